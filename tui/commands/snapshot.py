"""`llmopt-tui snapshot`: one look at GPUs, host and engine, like `gpustat --json` or `nvtop -s`.

Rates and latencies need two scrapes: the engine is scraped at the start and the end of --window seconds
(and once in between), and every number is computed by the same Window the live screen uses.
The JSON keys are stable; docs/json.md documents them.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from probes.gpu import open_gpu_source
from probes.host import HostProbe
from probes.metrics import MetricsScraper
from probes.monitor import Monitor
from probes.types import Sample
from probes.window import Window
from tui.commands.doctor import gpu_lines, host_line

SNAPSHOT_SCHEMA = 1


def engine_view(window: Window, span_s: float) -> dict[str, Any]:
    """The engine part of a snapshot: state, gauges, rates and latencies over the window."""
    latest = window.latest
    engine = latest.engine if latest else None
    if engine is None:
        return {"state": "none"}
    view: dict[str, Any] = {
        "url": engine.url,
        "state": engine.state,
        "error": engine.error,
        "model": engine.model,
        "engines": engine.engines,
        "running": engine.running,
        "waiting": engine.waiting,
        "kv_usage": engine.kv_usage,
        "cache_config": dict(engine.cache_config),
    }
    if not engine.ok:
        return view
    view["rates"] = {
        "prompt_tps": window.rate("prompt_tokens", span_s),
        "output_tps": window.rate("generation_tokens", span_s),
        "total_tps": window.rate("total_tokens", span_s),
        "preemptions_ps": window.rate("preemptions", span_s),
    }
    view["prefix_hit_rate"] = window.prefix_hit_rate(span_s)
    latency: dict[str, Any] = {}
    for key in ("ttft", "itl", "e2e", "queue"):
        p50, p99 = window.hist_quantile(key, 0.5, span_s), window.hist_quantile(key, 0.99, span_s)
        latency[key] = {
            "mean_s": window.hist_mean(key, span_s),
            "p50_s": p50.value if p50 else None,
            "p50_below_first_bucket": bool(p50 and p50.below_first_bucket),
            "p99_s": p99.value if p99 else None,
            "p99_below_first_bucket": bool(p99 and p99.below_first_bucket),
        }
    view["latency"] = latency
    view["finished"] = dict(engine.finished)
    return view


def take_snapshot(url: str, window_s: float, fake_gpus: int = 0) -> tuple[dict[str, Any], Sample]:
    monitor = Monitor(MetricsScraper(url), open_gpu_source(fake_gpus), HostProbe())
    try:
        t0 = time.monotonic()
        monitor.tick()
        for fraction in (0.5, 1.0):
            time.sleep(max(0.0, t0 + window_s * fraction - time.monotonic()))
            monitor.tick()
        latest = monitor.window.latest
        assert latest is not None
        span = max(window_s, 0.1) + 0.5
        snap = {
            "schema": SNAPSHOT_SCHEMA,
            "t": latest.t,
            "window_s": window_s,
            "gpu": asdict(latest.gpu) if latest.gpu else None,
            "host": asdict(latest.host) if latest.host else None,
            "engine": engine_view(monitor.window, span),
            "findings": [asdict(f) for f in monitor.last_findings],
        }
        return snap, latest
    finally:
        monitor.close()


def _fmt(value: Any, fmt: str = "{:.1f}", none: str = "n/r") -> str:
    return none if value is None else fmt.format(value)


def render_text(snap: dict[str, Any], sample: Sample) -> str:
    lines: list[str] = []
    if sample.gpu is not None:
        lines += gpu_lines(sample.gpu)
    if sample.host is not None:
        lines.append(host_line(sample.host))
    eng = snap["engine"]
    if eng.get("state") != "up":
        lines.append(f"Engine  {eng.get('url', '')}: {eng.get('error') or eng.get('state')}")
        return "\n".join(lines)
    rates, lat = eng["rates"], eng["latency"]
    kv, hit = eng["kv_usage"], eng["prefix_hit_rate"]
    kv_text = _fmt(None if kv is None else kv * 100, "{:.1f} %")
    hit_text = _fmt(None if hit is None else hit * 100, "{:.1f} %", "n/a")
    lines.append(f"Engine  {eng['url']}  model {eng['model']}  engines {eng['engines']}")
    lines.append(
        f"        running {_fmt(eng['running'], '{:.0f}')}  waiting {_fmt(eng['waiting'], '{:.0f}')}  "
        f"KV {kv_text}  prefix hit {hit_text}"
    )
    lines.append(
        f"        total {_fmt(rates['total_tps'])} tok/s  output {_fmt(rates['output_tps'])} tok/s  "
        f"preemptions {_fmt(rates['preemptions_ps'], '{:.2f}')}/s  (over {snap['window_s']:.1f} s)"
    )
    for key in ("ttft", "itl"):
        entry = lat[key]
        p99 = entry["p99_s"]
        p99_text = (
            "n/a" if p99 is None else ("< " if entry["p99_below_first_bucket"] else "") + f"{p99 * 1000:.1f}"
        )
        mean = entry["mean_s"]
        lines.append(
            f"        {key.upper():4} mean {_fmt(None if mean is None else mean * 1000, '{:.1f}', 'n/a')} ms"
            f"  p99 {p99_text} ms"
        )
    for finding in snap["findings"]:
        lines.append(f"Finding [{finding['severity']}] {finding['title']}")
    return "\n".join(lines)


def run_snapshot(url: str, window_s: float, as_json: bool, fake_gpus: int = 0) -> int:
    snap, sample = take_snapshot(url, window_s, fake_gpus)
    print(json.dumps(snap, indent=2, default=str) if as_json else render_text(snap, sample))
    return 0 if snap["engine"].get("state") == "up" else 1
