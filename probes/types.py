"""The frozen, typed records every probe returns and every consumer reads.

One place for the shapes keeps the data flow one-directional: probes build these, the window
layer and diagnosis read them, presets and tui never reach behind them. ``None`` always means
"not reported / could not read", never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

EMPTY: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Histogram:
    """A Prometheus histogram: cumulative ``(upper_bound, count)`` buckets, ending at +Inf."""

    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float


# Canonical keys used in EngineSample.counters / .histograms, whatever name the server version used.
COUNTER_KEYS = (
    "prompt_tokens",
    "generation_tokens",
    "preemptions",
    "prefix_queries",
    "prefix_hits",
)
HISTOGRAM_KEYS = ("ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode", "inference")

EngineState = Literal["up", "unreachable", "http_error", "malformed"]


@dataclass(frozen=True, slots=True)
class EngineSample:
    """One scrape of a vLLM ``/metrics`` page, summed over engines (data-parallel ranks)."""

    t: float  # wall-clock seconds (time.time()) when the scrape completed
    url: str
    state: EngineState
    error: str | None = None  # the one-line reason when state != "up"
    model: str | None = None
    engines: int = 0
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # 0..1, max over engines
    counters: Mapping[str, float] = field(default_factory=dict)  # keys from COUNTER_KEYS
    finished: Mapping[str, float] = field(default_factory=dict)  # finished_reason -> count
    histograms: Mapping[str, Histogram] = field(default_factory=dict)  # keys from HISTOGRAM_KEYS
    cache_config: Mapping[str, str] = field(default_factory=dict)  # cache_config_info labels
    scrape_s: float | None = None  # how long the scrape + parse took

    @property
    def ok(self) -> bool:
        return self.state == "up"


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One NVIDIA GPU as NVML reports it; every field may be None when NVML cannot read it."""

    index: int
    name: str | None = None
    uuid: str | None = None
    compute_capability: str | None = None  # "8.9"
    pstate: int | None = None  # 0..15 (P0 busy .. P8 idle)
    power_w: float | None = None
    power_limit_w: float | None = None
    util_gpu: float | None = None  # percent
    util_mem: float | None = None  # percent
    mem_used: int | None = None  # bytes
    mem_free: int | None = None
    mem_total: int | None = None
    temperature_c: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    throttle_reasons: tuple[str, ...] | None = None  # active, named ("sw_power_cap", "hw_slowdown", ...)
    energy_j: float | None = None  # total since driver load
    nvlink_active: int | None = None  # number of active NVLink links (0 = PCIe only)
    pcie_gen: int | None = None
    pcie_width: int | None = None


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """All GPUs at one instant, or why there are none."""

    t: float
    available: bool
    reason: str | None = None  # e.g. "NVML not found: no NVIDIA driver on this host"
    driver_version: str | None = None
    cuda_version: str | None = None
    devices: tuple[GpuDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class ProcessTree:
    """A server's whole process tree (main PID and every descendant)."""

    root_pid: int
    pids: tuple[int, ...]
    cpu_percent: float  # percent of ONE core, summed over the tree
    rss_bytes: int


@dataclass(frozen=True, slots=True)
class HostSample:
    t: float
    cpu_percent: float | None  # whole machine, 0..100
    cpu_count: int | None
    ram_used: int | None
    ram_total: int | None
    load1: float | None
    tree: ProcessTree | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """One tick: everything the probes saw at once. Any part may be missing (None)."""

    t: float
    engine: EngineSample | None = None
    gpu: GpuSnapshot | None = None
    host: HostSample | None = None


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """What a ``vllm serve`` start-up log says about memory; None for what it did not say (yet)."""

    weights_gib: float | None = None
    load_s: float | None = None
    kv_memory_gib: float | None = None  # "Available KV cache memory" (GPU)
    cpu_kv_gib: float | None = None  # "Explicitly/Auto set (x) GiB for KV cache" (CPU)
    kv_tokens: int | None = None
    kv_device: str | None = None  # "GPU" or "CPU", from the "<dev> KV cache size" line
    max_concurrency: float | None = None
    max_concurrency_request_tokens: int | None = None
    engine_init_s: float | None = None
    compile_s: float | None = None
    listening_url: str | None = None
    ready: bool = False  # "Application startup complete."
