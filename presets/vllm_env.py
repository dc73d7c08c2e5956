"""Where vLLM lives and the environment it runs in.

vLLM sits in its own venv (it pins many packages) and is only ever called as a program. The executable is
found by, in order: an explicit path (``--vllm``), ``$LLMOPT_VLLM``, the project's ``.venv-vllm``, ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PROJECT_VLLM = PROJECT_ROOT / ".venv-vllm" / "bin" / "vllm"
DEFAULT_TINY_MODEL = PROJECT_ROOT / "models" / "tiny-qwen3"

# Offline and loopback-only: no hub, no telemetry, internal sockets on 127.0.0.1 (reference/vllm.md §5).
OFFLINE_ENV: Mapping[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "PYTHONUNBUFFERED": "1",
}


class VllmNotFound(Exception):
    """No usable vLLM executable; str() is a one-line message with what to do."""


def find_vllm(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Return the vLLM executable to use, or raise VllmNotFound with a hint."""
    candidates: list[tuple[str, str | os.PathLike[str] | None]] = [
        ("--vllm", explicit),
        ("$LLMOPT_VLLM", os.environ.get("LLMOPT_VLLM")),
        ("project venv", PROJECT_VLLM if PROJECT_VLLM.exists() else None),
        ("PATH", shutil.which("vllm")),
    ]
    for source, value in candidates:
        if not value:
            continue
        path = Path(value).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path
        if source in ("--vllm", "$LLMOPT_VLLM"):
            raise VllmNotFound(f"vLLM executable from {source} not found or not executable: {path}")
    raise VllmNotFound(
        "no vLLM executable found: run `make setup` (builds .venv-vllm), "
        "or pass --vllm PATH / set LLMOPT_VLLM"
    )


def vllm_version(exe: Path, timeout_s: float = 60.0) -> str | None:
    """``vllm --version`` (last line), or None when it cannot run."""
    try:
        done = subprocess.run(
            [str(exe), "--version"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=server_env(),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in done.stdout.splitlines() if ln.strip()]
    return lines[-1] if done.returncode == 0 and lines else None


def tiny_model_path() -> Path:
    """The locally built tiny model (``make setup`` builds it); ``$LLMOPT_TINY_MODEL`` overrides."""
    return Path(os.environ.get("LLMOPT_TINY_MODEL", str(DEFAULT_TINY_MODEL))).expanduser()


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a vLLM child: ours, offline/loopback settings, then the preset's own."""
    env = dict(os.environ)
    env.update(OFFLINE_ENV)
    if extra:
        env.update(extra)
    return env
