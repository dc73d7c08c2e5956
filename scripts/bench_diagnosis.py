"""Cost of one diagnosis tick: every rule evaluated over a real Window of ~600 samples, 1 and 8 GPUs.

The server is busy in the way that makes the rules do the most work (requests waiting, prefix queries,
finishes, a memory report, the client's TTFT known), so every lazily computed quantity is computed. A new
sample is pushed before each tick (not timed), as at 1 Hz, so nothing is served from a previous tick.

    .venv/bin/python scripts/bench_diagnosis.py [--ticks N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes.diagnosis import Diagnoser, DiagnosisContext
from probes.types import (
    EngineSample,
    GpuDevice,
    GpuSnapshot,
    Histogram,
    MemoryReport,
    Sample,
)
from probes.window import Window

TARGET_MS = 0.2
WINDOW_SAMPLES = 600
BOUNDS = {  # vLLM's default buckets (reference/vllm.md §1)
    "ttft": (
        0.001,
        0.005,
        0.01,
        0.02,
        0.04,
        0.06,
        0.08,
        0.1,
        0.25,
        0.5,
        0.75,
        1,
        2.5,
        5,
        7.5,
        10,
        20,
        40,
        80,
    ),
    "itl": (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80),
    "queue": (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680),
    "e2e": (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680),
}
OBSERVE = {"ttft": 0.104, "itl": 0.043, "queue": 0.02, "e2e": 8.7}  # doc 1's baseline latencies
CTX = DiagnosisContext(
    phase_running=True,
    client_concurrency=10,
    server_state="ready",
    memory=MemoryReport(
        weights_gib=27.5,
        kv_memory_gib=11.0,
        kv_tokens=72_064,
        kv_device="GPU",
        max_concurrency=1.76,
        max_concurrency_request_tokens=40_960,
        ready=True,
    ),
    tensor_parallel=1,
    client_ttft_mean_s=0.223,
    api_server_cpu_percent=95.0,
)


class Server:
    """Cumulative /metrics of a busy server, one sample per second."""

    def __init__(self, n_gpus: int) -> None:
        self.t = 1_000_000.0
        self.n_gpus = n_gpus
        self.counters = dict.fromkeys(
            ("prompt_tokens", "generation_tokens", "preemptions", "prefix_queries", "prefix_hits"), 0.0
        )
        self.finished = {"stop": 0.0, "length": 0.0}
        self.hist = {k: [0.0] * (len(b) + 3) for k, b in BOUNDS.items()}  # buckets, +Inf, sum, count

    def sample(self) -> Sample:
        self.t += 1.0
        i = int(self.t)
        for k, inc in (
            ("prompt_tokens", 246.0),
            ("generation_tokens", 228.0),
            ("preemptions", 0.2),
            ("prefix_queries", 246.0),
            ("prefix_hits", 5.0),
        ):
            self.counters[k] += inc
        self.finished["stop"] += 1.0
        self.finished["length"] += 0.1
        hists = {}
        for key, bounds in BOUNDS.items():
            h, v, n = self.hist[key], OBSERVE[key] * (1 + 0.3 * (i % 7) / 7), 2.0
            for j, le in enumerate(bounds):
                if v <= le:
                    h[j] += n
            h[len(bounds)] += n
            h[-2] += n * v
            h[-1] += n
            edges = (*bounds, float("inf"))
            hists[key] = Histogram(tuple(zip(edges, h[: len(edges)], strict=True)), h[-2], h[-1])
        engine = EngineSample(
            t=self.t,
            url="http://127.0.0.1:8000/metrics",
            state="up",
            model="Qwen/Qwen3-14B",
            engines=1,
            running=8.0,
            waiting=float(2 + i % 3),
            kv_usage=0.85,
            counters=dict(self.counters),
            finished=dict(self.finished),
            histograms=hists,
        )
        total = 46_068 * 1024**2
        devices = tuple(
            GpuDevice(
                index=g,
                name="NVIDIA L40S",
                pstate=0,
                power_w=250.0,
                power_limit_w=350.0,
                util_gpu=40.0 + i % 5,
                mem_used=int(total * 0.9),
                mem_total=total,
                temperature_c=70.0,
                sm_clock_mhz=2520,
                throttle_reasons=("sw_power_cap",),
                nvlink_active=0,
                pcie_gen=4,
                pcie_width=16,
            )
            for g in range(self.n_gpus)
        )
        return Sample(t=self.t, engine=engine, gpu=GpuSnapshot(t=self.t, available=True, devices=devices))


def measure(n_gpus: int, ticks: int) -> dict[str, Any]:
    server = Server(n_gpus)
    window = Window(horizon_s=WINDOW_SAMPLES - 1)
    for _ in range(WINDOW_SAMPLES):
        window.push(server.sample())
    diag = Diagnoser()
    costs: list[float] = []
    findings = 0
    for _ in range(ticks):
        window.push(server.sample())
        t0 = time.perf_counter()
        found = diag.tick(window, CTX, server.t)
        costs.append((time.perf_counter() - t0) * 1000)
        findings = len(found)
    costs.sort()
    return {
        "gpus": n_gpus,
        "window_samples": len(window.samples),
        "rules": len(diag.rules),
        "findings": findings,
        "median_ms": round(statistics.median(costs), 4),
        "mean_ms": round(statistics.fmean(costs), 4),
        "p99_ms": round(costs[min(len(costs) - 1, int(len(costs) * 0.99))], 4),
    }


def run(ticks: int = 2000) -> dict[str, Any]:
    """Tick cost with 1 and 8 GPUs; ``ok`` when both medians meet the target."""
    results = [measure(n, ticks) for n in (1, 8)]
    return {
        "target_ms": TARGET_MS,
        "ticks": ticks,
        "results": results,
        "ok": all(r["median_ms"] <= TARGET_MS for r in results),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--ticks", type=int, default=2000)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    out = run(args.ticks)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for r in out["results"]:
            print(
                f"{r['gpus']} GPU(s), {r['window_samples']} samples, {r['rules']} rules, "
                f"{r['findings']} findings: "
                f"median {r['median_ms']:.3f} ms, mean {r['mean_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms "
                f"(target <= {out['target_ms']} ms)"
            )
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
