"""The probes against a REAL server under a real `vllm bench serve`: counters and window vs the bench JSON."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from probes.metrics import MetricsScraper
from probes.types import Sample
from probes.window import Window
from tests.harness import RunningServer, run_bench

pytestmark = pytest.mark.integration


def test_window_throughput_agrees_with_bench(roomy_server: RunningServer, tmp_path: Path) -> None:
    window = Window()
    scraper = MetricsScraper(roomy_server.url)
    stop = threading.Event()

    def scrape() -> None:  # 10 Hz, so the active span is known to ~0.1 s of a ~10 s run
        while not stop.wait(0.1):
            engine = scraper.scrape()
            window.push(Sample(t=engine.t, engine=engine))

    engine = scraper.scrape()
    window.push(Sample(t=engine.t, engine=engine))
    thread = threading.Thread(target=scrape)
    thread.start()
    try:
        result = run_bench(roomy_server.url, tmp_path, num_prompts=200)
    finally:
        stop.set()
        thread.join()
    engine = scraper.scrape()
    window.push(Sample(t=engine.t + 0.001, engine=engine))
    scraper.close()
    first, last = window.samples[0], window.samples[-1]
    summary = window.summary(first.t, last.t)
    bench_total = float(result["total_input_tokens"]) + float(result["total_output_tokens"])  # type: ignore[arg-type]
    assert summary.total_tokens is not None and summary.active_total_tps is not None
    # Counter deltas = the bench's tokens plus its single warm-up request (<= 128 in + 64 out).
    assert bench_total <= summary.total_tokens <= bench_total + 192
    assert summary.generation_tokens is not None and 0 <= summary.generation_tokens - 200 * 64 <= 64
    bench_tps = float(result["total_token_throughput"])  # type: ignore[arg-type]
    spans = (summary.active_s, result["duration"])
    assert summary.active_total_tps == pytest.approx(bench_tps, rel=0.03), spans
    assert summary.finished.get("length", 0) >= 200  # --ignore-eos: every request ends on its length
    assert summary.ttft_mean is not None and summary.itl_mean is not None
