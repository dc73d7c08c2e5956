"""`llmopt-tui memory LOGFILE`: the memory report of a `vllm serve` log (what the documents did with grep)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from probes.serverlog import LogFollower


def run_memory(logfile: str, as_json: bool) -> int:
    path = Path(logfile)
    if not path.is_file():
        raise FileNotFoundError(f"no such log file: {path}")
    follower = LogFollower(path)
    follower.poll()
    report = follower.report
    errors = [asdict(e) for e in follower.errors]
    if as_json:
        print(json.dumps({"file": str(path), "memory": asdict(report), "errors": errors}, indent=2))
        return 0
    rows = [
        ("weights", report.weights_gib, "{:.2f} GiB"),
        ("load time", report.load_s, "{:.1f} s"),
        (
            "KV cache memory",
            report.kv_memory_gib if report.kv_memory_gib is not None else report.cpu_kv_gib,
            "{:.2f} GiB",
        ),
        ("KV cache size", report.kv_tokens, "{:,} tokens"),
        ("max concurrency", report.max_concurrency, "{:.2f}x"),
        ("  for request length", report.max_concurrency_request_tokens, "{:,} tokens"),
        ("engine init", report.engine_init_s, "{:.1f} s"),
        ("compile", report.compile_s, "{:.1f} s"),
        ("listening", report.listening_url, "{}"),
    ]
    device = report.kv_device or "?"
    print(f"{path}  (KV on {device})")
    for label, value, fmt in rows:
        print(f"  {label:22} {'not in log' if value is None else fmt.format(value)}")
    for err in follower.errors:
        print(f"  error: {err.kind}: {err.message}")
    return 0
