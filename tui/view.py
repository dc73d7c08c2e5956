"""The view model: one immutable Frame per tick, built off the UI thread.

The poll worker turns a Tick (plus the window, the server log and the process's own cost) into a Frame;
widgets only format what a Frame holds. All reads of the Window happen here, in the worker thread, so
the UI thread never touches shared mutable state and never does arithmetic on time series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from probes.types import EngineSample, GpuSnapshot, HostSample, MemoryReport, Sample

if TYPE_CHECKING:
    from probes.diagnosis import Finding
    from probes.window import Window

Unit = Literal["tps", "s", "frac", "count"]


@dataclass(frozen=True, slots=True)
class SparkSpec:
    metric: str  # a Window.series() metric name
    label: str
    unit: Unit
    top: float | None = None  # fixed full-scale value (None: scale to the visible maximum)


SPARKS: tuple[SparkSpec, ...] = (
    SparkSpec("total_tps", "TPS total", "tps"),
    SparkSpec("output_tps", "TPS output", "tps"),
    SparkSpec("ttft_mean", "TTFT mean", "s"),
    SparkSpec("ttft_p99", "TTFT p99", "s"),
    SparkSpec("itl_mean", "ITL mean", "s"),
    SparkSpec("itl_p99", "ITL p99", "s"),
    SparkSpec("kv_usage", "KV usage", "frac", top=1.0),
    SparkSpec("waiting", "waiting", "count"),
)

ServerState = Literal["none", "starting", "ready", "died", "stopped"]


@dataclass(frozen=True, slots=True)
class EngineView:
    """What the engine panel shows; None = not reported."""

    url: str | None
    scrape_state: str  # EngineSample.state, or "none" when no engine is configured
    error: str | None
    model: str | None
    running: float | None
    waiting: float | None
    kv_usage: float | None
    preemptions_ps: float | None
    prefix_hit_rate: float | None
    max_concurrency: float | None
    kv_tokens: int | None
    kv_device: str | None


@dataclass(frozen=True, slots=True)
class Frame:
    t: float
    gpu: GpuSnapshot | None
    host: HostSample | None
    engine: EngineView
    memory: MemoryReport | None
    series: Mapping[str, tuple[float | None, ...]]
    findings: tuple[Finding, ...] = ()
    log_tail: tuple[str, ...] = ()
    self_cpu_percent: float | None = None
    self_rss_bytes: int | None = None
    tick_cost_s: float | None = None
    finished_total: float | None = None  # requests the engine finished so far (bench progress)
    log_error: str | None = None  # the newest error the server log names
    reported: frozenset[str] = frozenset()  # spark metrics this server exposes (None then means "idle")


# What a server must expose for each sparkline to mean anything: without it the value is "not reported";
# with it, an empty tick only means no request finished in it.
_NEEDS: dict[str, tuple[str, str]] = {
    "total_tps": ("counter", "generation_tokens"),
    "output_tps": ("counter", "generation_tokens"),
    "ttft_mean": ("histogram", "ttft"),
    "ttft_p99": ("histogram", "ttft"),
    "itl_mean": ("histogram", "itl"),
    "itl_p99": ("histogram", "itl"),
    "kv_usage": ("gauge", "kv_usage"),
    "waiting": ("gauge", "waiting"),
}


def reported_metrics(engine: EngineSample | None) -> frozenset[str]:
    if engine is None or not engine.ok:
        return frozenset()
    present = {
        "counter": lambda key: key in engine.counters,
        "histogram": lambda key: key in engine.histograms,
        "gauge": lambda key: getattr(engine, key) is not None,
    }
    return frozenset(metric for metric, (kind, key) in _NEEDS.items() if present[kind](key))


def _f(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def engine_view(window: Window, engine: EngineSample | None, memory: MemoryReport | None) -> EngineView:
    """The engine panel's numbers; the log's memory report wins over cache_config_info."""
    cfg: Mapping[str, str] = engine.cache_config if engine is not None else {}
    max_conc = memory.max_concurrency if memory is not None else None
    if max_conc is None:
        max_conc = _f(cfg.get("kv_cache_max_concurrency"))
    kv_tokens = memory.kv_tokens if memory is not None else None
    if kv_tokens is None:
        raw = _f(cfg.get("kv_cache_size_tokens"))
        kv_tokens = int(raw) if raw is not None else None
    up = engine is not None and engine.ok
    return EngineView(
        url=engine.url if engine is not None else None,
        scrape_state=engine.state if engine is not None else "none",
        error=engine.error if engine is not None else None,
        model=engine.model if engine is not None else None,
        running=engine.running if up and engine is not None else None,
        waiting=engine.waiting if up and engine is not None else None,
        kv_usage=engine.kv_usage if up and engine is not None else None,
        preemptions_ps=window.rate("preemptions") if up else None,
        prefix_hit_rate=window.prefix_hit_rate(or_lifetime=True) if up else None,
        max_concurrency=max_conc,
        kv_tokens=kv_tokens,
        kv_device=memory.kv_device if memory is not None else None,
    )


def build_frame(
    sample: Sample,
    window: Window,
    *,
    spark_width: int,
    findings: Sequence[Finding] = (),
    memory: MemoryReport | None = None,
    log_tail: Sequence[str] = (),
    self_cpu_percent: float | None = None,
    self_rss_bytes: int | None = None,
    tick_cost_s: float | None = None,
    log_error: str | None = None,
) -> Frame:
    """Everything one screen refresh needs, computed in the caller's (worker) thread."""
    n = max(1, spark_width)
    series = {spec.metric: tuple(window.series(spec.metric, n)) for spec in SPARKS}
    engine = sample.engine
    finished = sum(engine.finished.values()) if engine is not None and engine.ok and engine.finished else None
    return Frame(
        t=sample.t,
        gpu=sample.gpu,
        host=sample.host,
        engine=engine_view(window, sample.engine, memory),
        memory=memory,
        series=series,
        findings=tuple(findings),
        log_tail=tuple(log_tail),
        self_cpu_percent=self_cpu_percent,
        self_rss_bytes=self_rss_bytes,
        tick_cost_s=tick_cost_s,
        finished_total=finished,
        log_error=log_error,
        reported=reported_metrics(engine),
    )
