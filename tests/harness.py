"""Real vLLM for tests: a `vllm serve` of the tiny local model on 127.0.0.1 and a free port."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from presets.process import VllmServer, free_port
from presets.vllm_env import find_vllm, server_env, tiny_model_path

ROOMY_ARGS = ("--max-model-len", "2048", "--kv-cache-memory-bytes", str(1 << 30))
STARVED_ARGS = ("--max-model-len", "256", "--kv-cache-memory-bytes", "400000")


@dataclass
class RunningServer:
    url: str
    log_path: Path
    pid: int
    server: VllmServer


@contextlib.contextmanager
def tiny_server(
    log_dir: Path, args: Sequence[str] = ROOMY_ARGS, timeout_s: float = 240.0
) -> Iterator[RunningServer]:
    """Start a real server, wait for /health 200, yield it, stop it, assert its whole tree is gone."""
    exe = find_vllm()
    port = free_port()
    argv = [
        str(exe),
        "serve",
        str(tiny_model_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "bfloat16",
        *args,
    ]
    log_path = log_dir / f"serve-{port}.log"
    server = VllmServer(argv, host="127.0.0.1", port=port, log_path=log_path, env=server_env())
    server.start()
    try:
        server.wait_ready(timeout_s)
        assert server.pid is not None
        yield RunningServer(server.url, log_path, server.pid, server)
    finally:
        report = server.stop()
        assert report.survivors == (), f"processes survived the server stop: {report.survivors}"


def run_bench(
    url: str,
    out_dir: Path,
    *,
    num_prompts: int = 40,
    rate: str = "20",
    concurrency: int = 8,
    input_len: int = 128,
    output_len: int = 64,
    extra: Sequence[str] = (),
) -> dict[str, object]:
    """Run the real `vllm bench serve` (random traffic, --ignore-eos) and return its saved JSON."""
    exe = find_vllm()
    model = str(tiny_model_path())
    argv = [
        str(exe),
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        url,
        "--model",
        model,
        "--tokenizer",
        model,
        "--endpoint",
        "/v1/completions",
        "--dataset-name",
        "random",
        "--num-prompts",
        str(num_prompts),
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--request-rate",
        rate,
        "--max-concurrency",
        str(concurrency),
        "--ignore-eos",
        "--seed",
        "0",
        "--save-result",
        "--result-dir",
        str(out_dir),
        "--result-filename",
        "bench.json",
        *extra,
    ]
    log = out_dir / "bench.log"
    with log.open("wb") as fh:
        done = subprocess.run(
            argv, stdout=fh, stderr=subprocess.STDOUT, env=server_env(), timeout=300, check=False
        )
    assert done.returncode == 0, f"vllm bench serve failed ({done.returncode}); see {log}"
    result: dict[str, object] = json.loads((out_dir / "bench.json").read_text())
    return result
