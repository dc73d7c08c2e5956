# The two README commands and the set-up they need. Every target is idempotent: a second run skips
# what is already there (pip, the vLLM venv and the tiny model are each guarded by a stamp).
PYTHON ?= python3
VENV := .venv
VLLM_VENV := .venv-vllm
TINY := models/tiny-qwen3
BIN := $(VENV)/bin

.PHONY: setup tmux test test-unit lint demo bench clean-results

setup: $(VENV)/.ready $(VLLM_VENV)/.llmopt-ready $(TINY)/llmopt-tiny.json tmux

# The end-to-end tests and the TUI benchmark drive the real app in tmux.
tmux:
	@command -v tmux >/dev/null || { apt-get update -qq && apt-get install -y -qq tmux; }

$(VENV)/.ready: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

$(VLLM_VENV)/.llmopt-ready: scripts/setup_vllm.sh
	PYTHON=$(PYTHON) scripts/setup_vllm.sh $(VLLM_VENV)

$(TINY)/llmopt-tiny.json: scripts/build_tiny_model.py $(VLLM_VENV)/.llmopt-ready
	$(VLLM_VENV)/bin/python scripts/build_tiny_model.py $(TINY)

lint: $(VENV)/.ready
	$(BIN)/ruff check probes presets tui tests scripts
	$(BIN)/ruff format --check -q probes presets tui tests scripts
	$(BIN)/mypy

test: setup lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-unit: $(VENV)/.ready
	$(BIN)/python -m pytest -q -m "not integration and not e2e"

demo: setup
	$(BIN)/llmopt-tui demo

bench: setup
	$(BIN)/python scripts/bench_all.py

clean-results:
	rm -rf llmopt-results
