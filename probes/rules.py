"""The diagnosis rule table: thresholds, the per-tick view every rule reads, and the rules themselves.

Each rule is data: an id, a severity, a one-line title, how long its condition must hold before it shows
(``hold_s``) and how long it must stay false before it goes (``clear_s``), the advice, and where the idea
comes from ("doc 1" = the CH9 study notes on an L40S, "doc 2" = the A40 reproduction; "reference" = the
project's measured vLLM facts). The condition is a small function over a
``TickView`` that returns the measured numbers that made it fire, or ``None``. ``probes.diagnosis`` runs the
table with hysteresis; this module does no bookkeeping of its own.

Rules that speak about GPUs (``needs_gpu``) never run without GPU data, so a CPU server never gets GPU words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Protocol

from probes.types import EngineSample, GpuDevice, GpuSnapshot, MemoryReport, Sample

Severity = Literal["info", "warn", "crit"]
ServerState = Literal["none", "starting", "ready", "died", "stopped"]
GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every number a rule compares against, in one place. Percentages are 0..100, fractions 0..1."""

    # Time spans (seconds) and tick counts the view averages over.
    span_s: float = 10.0  # rates and the "now" latency means
    long_span_s: float = 60.0  # finish-reason shares, server TTFT for the client/server comparison
    mean_ticks: int = 10  # running / waiting are averaged over this many ticks (1 Hz → 10 s)
    trend_ticks: int = 60  # the TTFT floor is the lowest per-tick TTFT mean over this many ticks
    # GPU step 1 quadrants (doc 1 step 1, figure 2).
    util_low_pct: float = 50.0  # below: the GPU is underused
    util_high_pct: float = 90.0  # at/above: busy (with power ≥ power_high_frac: saturated)
    power_high_frac: float = 0.9  # power / power cap at/above which power counts as high
    util_idle_pct: float = 5.0  # below: idle
    idle_pstate: int = 8  # P8 and above: the idle power state
    server_gpu_mem_frac: float = 0.3  # a GPU with this share of its memory in use belongs to the server
    idle_gpu_mem_frac: float = 0.05  # a GPU below this share of memory in use (and idle) is free
    throttle_reasons_bad: tuple[str, ...] = (  # clock-slowdown reasons worth a finding; power cap is not
        "hw_slowdown",
        "hw_thermal_slowdown",
        "sw_thermal_slowdown",
        "hw_power_brake_slowdown",
    )
    # Engine (work everywhere, CPU or GPU).
    waiting_min: float = 1.0  # mean waiting requests that count as "requests queue"
    kv_full_frac: float = 0.9  # KV usage at/above: near full
    kv_headroom_frac: float = 0.8  # KV usage below: headroom
    preempt_rate_min: float = 0.1  # preemptions per second that count as "rising"
    prefix_high_frac: float = 0.5  # prefix-cache hit rate at/above: reuse is high
    prefix_low_frac: float = 0.05  # below (with queries flowing): no reuse
    ttft_rise_ratio: float = 1.3  # TTFT now / TTFT floor at/above: climbing
    queue_share_min: float = 0.5  # queue time / TTFT at/above: TTFT is mostly waiting
    client_pinned_frac: float = 0.9  # mean running ≥ this x client concurrency: pinned at the client cap
    length_share_min: float = 0.5  # share of finish_reason=length at/above: completions are cut off
    length_min_finished: float = 5.0  # at least this many finished requests before judging the share
    traffic_min_tps: float = 1.0  # total tokens/s below which no traffic is flowing
    # Client vs server (reference §3: client 223 ms vs server 16.5 ms on a 2-core CPU).
    frontend_ttft_ratio: float = 3.0  # client TTFT / server TTFT at/above
    frontend_gap_s: float = 0.05  # and the gap at least this many seconds
    api_cpu_high_pct: float = 80.0  # API-server CPU (% of one core) at/above: its event loop is busy
    # Memory report (doc 1 step 4: 27.5 GiB weights vs 11 GiB KV = 71 %).
    weights_share_min: float = 0.6  # weights / (weights + KV) at/above: weights dominate
    vram_left_bytes: int = GIB // 2  # VRAM still used after a stop at/above this: not released
    # Between phases.
    noise_frac: float = 0.03  # |ratio - 1| below this: within run-to-run noise
    ttft_worse_frac: float = 0.10  # TTFT up by at least this with TPS up: a throughput/latency trade


DEFAULT_THRESHOLDS = Thresholds()


class ServerErrorLike(Protocol):
    """What ``probes.serverlog.ServerError`` offers (kept structural so diagnosis does not import it)."""

    @property
    def kind(self) -> str: ...

    @property
    def message(self) -> str: ...


@dataclass(frozen=True, slots=True)
class DiagnosisContext:
    """What the window cannot know: the phase, the client, the server process, the start-up log."""

    phase_running: bool = False  # a bench phase is sending traffic right now
    client_concurrency: int | None = None  # the client's --max-concurrency
    fixed_output_len: bool = False  # --ignore-eos / fixed output lengths: finish_reason=length is expected
    server_state: ServerState = "none"
    server_error: ServerErrorLike | str | None = None
    memory: MemoryReport | None = None
    tensor_parallel: int | None = None
    vram_after_stop_bytes: int | None = None  # VRAM still in use after the server was stopped (GPU only)
    client_ttft_mean_s: float | None = None  # the bench client's mean TTFT
    api_server_cpu_percent: float | None = None  # % of one core


class WindowView(Protocol):
    """The part of ``probes.window.Window`` the rules read."""

    @property
    def latest(self) -> Sample | None: ...

    def rate(self, counter: str, span_s: float = 10.0) -> float | None: ...

    def prefix_hit_rate(self, span_s: float = 10.0, *, or_lifetime: bool = False) -> float | None: ...

    def hist_mean(self, key: str, span_s: float = 10.0) -> float | None: ...

    def series(self, metric: str, n: int = 60) -> list[float | None]: ...

    def finished(self, span_s: float = 60.0) -> dict[str, float]: ...


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _block_min(values: Sequence[float | None], k: int) -> float | None:
    """Lowest mean over consecutive blocks of ``k`` values aligned to the newest; a block needs k/2 known."""
    best: float | None = None
    for i in range(len(values) % k, len(values), k):
        block = [v for v in values[i : i + k] if v is not None]
        if len(block) * 2 >= k:
            m = sum(block) / len(block)
            best = m if best is None or m < best else best
    return best


def _power_frac(d: GpuDevice) -> float | None:
    if d.power_w is None or not d.power_limit_w:
        return None
    return d.power_w / d.power_limit_w


def _mem_frac(d: GpuDevice) -> float | None:
    if d.mem_used is None or not d.mem_total:
        return None
    return d.mem_used / d.mem_total


class TickView:
    """Shared quantities for one tick, each computed at most once and only when a rule asks for it."""

    def __init__(self, window: WindowView, ctx: DiagnosisContext, th: Thresholds, now: float) -> None:
        self.window = window
        self.ctx = ctx
        self.th = th
        self.now = now
        latest = window.latest
        eng = latest.engine if latest is not None else None
        self.engine: EngineSample | None = eng if eng is not None and eng.ok else None
        gpu = latest.gpu if latest is not None else None
        on_cpu = ctx.memory is not None and ctx.memory.kv_device == "CPU"
        ok = gpu is not None and gpu.available and bool(gpu.devices) and not on_cpu
        self.gpu: GpuSnapshot | None = gpu if ok else None

    # -- engine -------------------------------------------------------------------------------------
    @property
    def running(self) -> float | None:
        return self.engine.running if self.engine else None

    @property
    def waiting(self) -> float | None:
        return self.engine.waiting if self.engine else None

    @property
    def kv_usage(self) -> float | None:
        return self.engine.kv_usage if self.engine else None

    def _tick_mean(self, metric: str, now_value: float | None) -> float | None:
        if self.engine is None:
            return None
        m = _mean(self.window.series(metric, self.th.mean_ticks))
        return now_value if m is None else m

    @cached_property
    def running_mean(self) -> float | None:
        return self._tick_mean("running", self.running)

    @cached_property
    def waiting_mean(self) -> float | None:
        return self._tick_mean("waiting", self.waiting)

    @cached_property
    def total_tps(self) -> float | None:
        return self.window.rate("total_tokens", self.th.span_s)

    @cached_property
    def preempt_ps(self) -> float | None:
        return self.window.rate("preemptions", self.th.span_s)

    @cached_property
    def prefix(self) -> tuple[float, float] | None:
        """(hit rate 0..1, queried prompt tokens/s), None while no prefix queries flow."""
        rate = self.window.prefix_hit_rate(self.th.span_s)
        queries = self.window.rate("prefix_queries", self.th.span_s)
        return None if rate is None or queries is None else (rate, queries)

    @cached_property
    def ttft_mean(self) -> float | None:
        return self.window.hist_mean("ttft", self.th.span_s)

    @cached_property
    def ttft_long(self) -> float | None:
        return self.window.hist_mean("ttft", self.th.long_span_s)

    @cached_property
    def ttft_floor(self) -> float | None:
        """The lowest TTFT of the recent past: per-tick means averaged in blocks of ``mean_ticks``, then the
        minimum (a single quiet tick with one fast request must not set the floor)."""
        return _block_min(self.window.series("ttft_mean", self.th.trend_ticks), self.th.mean_ticks)

    @cached_property
    def queue_mean(self) -> float | None:
        return self.window.hist_mean("queue", self.th.span_s)

    @cached_property
    def finished(self) -> Mapping[str, float]:
        """Requests finished per reason over the last ``long_span_s``."""
        return self.window.finished(self.th.long_span_s) if self.engine is not None else {}

    # -- GPU ----------------------------------------------------------------------------------------
    @cached_property
    def server_devices(self) -> tuple[GpuDevice, ...]:
        """GPUs holding the server's memory; all GPUs when none visibly does."""
        if self.gpu is None:
            return ()
        held = tuple(
            d
            for d in self.gpu.devices
            if (f := _mem_frac(d)) is not None and f >= self.th.server_gpu_mem_frac
        )
        return held or self.gpu.devices

    @cached_property
    def util(self) -> float | None:
        return _mean([d.util_gpu for d in self.server_devices])

    @cached_property
    def power_frac(self) -> float | None:
        return _mean([_power_frac(d) for d in self.server_devices])

    @cached_property
    def power_w(self) -> float | None:
        known = [d.power_w for d in self.server_devices if d.power_w is not None]
        return sum(known) if known else None

    def gpu_line(self) -> tuple[str, ...]:
        """The step-1 reading of the server GPUs: utilisation and power against the cap."""
        out = []
        if self.util is not None:
            out.append(f"GPU util {self.util:.0f} %")
        if self.power_frac is not None:
            out.append(f"power {self.power_frac * 100:.0f} % of cap")
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Hit:
    """A rule's condition held: the measured numbers, and optionally advice specific to this case."""

    evidence: tuple[str, ...]
    advice: str | None = None


Check = Callable[[TickView], Hit | None]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    severity: Severity
    title: str
    check: Check
    advice: str
    source: str
    hold_s: float = 10.0
    clear_s: float = 15.0
    needs_gpu: bool = False
    advice_cpu: str | None = None  # the same advice without GPU words, for CPU servers


def _f(x: float) -> str:
    """A count or rate as people read it: 6, 4.2, 1,280."""
    if abs(x) >= 100 or x == int(x):
        return f"{x:,.0f}"
    return f"{x:.1f}"


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def _devs(devs: Sequence[GpuDevice]) -> str:
    return "GPU" + ",".join(str(d.index) for d in devs)


# -- conditions ---------------------------------------------------------------------------------------
def _queued(v: TickView) -> bool:
    return v.waiting_mean is not None and v.waiting_mean >= v.th.waiting_min


def _busy(v: TickView) -> bool:
    return v.running_mean is not None and v.running_mean >= 1


def _low_util_queue(v: TickView) -> Hit | None:
    th = v.th
    if v.util is None or v.util >= th.util_low_pct or not _queued(v):
        return None
    if v.kv_usage is not None and v.kv_usage >= th.kv_full_frac:
        return None  # the KV cache, not the scheduler, keeps them waiting: kv_bound says so
    return Hit((*v.gpu_line(), f"waiting {_f(v.waiting_mean or 0)}", f"running {_f(v.running_mean or 0)}"))


def _high_power_low_util(v: TickView) -> Hit | None:
    th = v.th
    if v.power_frac is None or v.util is None or not _busy(v):
        return None
    if v.power_frac < th.power_high_frac or v.util >= th.util_high_pct:
        return None
    ev = list(v.gpu_line())
    if v.total_tps is not None:
        ev.append(f"{_f(v.total_tps)} tok/s")
        if v.power_w:
            ev.append(f"{v.total_tps / v.power_w:.2f} tok/J")
    return Hit(tuple(ev))


def _saturated(v: TickView) -> Hit | None:
    th = v.th
    if v.util is None or v.power_frac is None:
        return None
    if v.util < th.util_high_pct or v.power_frac < th.power_high_frac:
        return None
    return Hit(v.gpu_line())


def _healthy(v: TickView) -> Hit | None:
    th = v.th
    if v.util is None or v.util < th.util_low_pct or not _busy(v) or _queued(v):
        return None
    if v.power_frac is not None and v.power_frac >= th.power_high_frac:
        return None
    if v.preempt_ps:
        return None
    return Hit((*v.gpu_line(), f"running {_f(v.running_mean or 0)}", "waiting 0"))


def _no_traffic(v: TickView) -> bool:
    if not v.ctx.phase_running or v.engine is None:
        return False
    if (v.running_mean or 0) >= 0.5 or (v.waiting_mean or 0) >= 0.5:
        return False
    return v.total_tps is None or v.total_tps < v.th.traffic_min_tps


def _gpu_idle(v: TickView) -> Hit | None:
    th = v.th
    if not _no_traffic(v):
        return None
    devs = v.server_devices
    idle = [
        d
        for d in devs
        if (d.pstate is not None and d.pstate >= th.idle_pstate)
        or (d.util_gpu is not None and d.util_gpu < th.util_idle_pct)
    ]
    if not devs or len(idle) < len(devs):
        return None
    d = idle[0]
    state = f"P{d.pstate}, " if d.pstate is not None else ""
    util = f"util {d.util_gpu:.0f} %" if d.util_gpu is not None else "util n/a"
    return Hit((f"GPU{d.index} {state}{util}", "running 0, waiting 0", f"{_f(v.total_tps or 0)} tok/s"))


def _engine_idle(v: TickView) -> Hit | None:
    if v.gpu is not None or not _no_traffic(v):
        return None  # with GPU data gpu_idle says it with the P-state
    return Hit(("running 0, waiting 0", f"{_f(v.total_tps or 0)} tok/s"))


def _kv_bound(v: TickView) -> Hit | None:
    th = v.th
    kv, p = v.kv_usage, v.preempt_ps or 0.0
    full = kv is not None and kv >= th.kv_full_frac and _queued(v)
    if not full and p < th.preempt_rate_min:
        return None
    ev = []
    if kv is not None:
        ev.append(f"KV usage {kv * 100:.0f} %")
    ev += [f"waiting {_f(v.waiting_mean or 0)}", f"preemptions {p:.1f}/s"]
    return Hit(tuple(ev))


def _concurrency_ceiling(v: TickView) -> Hit | None:
    m, cc = v.ctx.memory, v.ctx.client_concurrency
    if m is None or m.max_concurrency is None or not cc or m.max_concurrency >= cc:
        return None
    per = (
        f" for {m.max_concurrency_request_tokens:,}-token requests"
        if m.max_concurrency_request_tokens
        else ""
    )
    ev = [f"log: max concurrency {m.max_concurrency:.2f}x{per}", f"client concurrency {cc}"]
    if m.kv_tokens is not None:
        ev.append(f"KV {m.kv_tokens:,} tokens")
    return Hit(tuple(ev))


def _weights_dominate(v: TickView) -> Hit | None:
    m = v.ctx.memory
    if m is None or m.kv_device == "CPU" or m.weights_gib is None or not m.kv_memory_gib:
        return None
    share = m.weights_gib / (m.weights_gib + m.kv_memory_gib)
    if share < v.th.weights_share_min:
        return None
    ev = [f"weights {m.weights_gib:.1f} GiB vs KV {m.kv_memory_gib:.1f} GiB ({share * 100:.0f} % weights)"]
    if m.kv_tokens is not None:
        ev.append(f"KV {m.kv_tokens:,} tokens")
    return Hit(tuple(ev))


def _prefix_line(v: TickView) -> tuple[str, ...]:
    rate, q = v.prefix or (0.0, 0.0)
    return (f"prefix cache hit rate {rate * 100:.0f} %", f"{_f(q)} prompt tokens/s queried")


def _prefix_high(v: TickView) -> Hit | None:
    if v.prefix is None or v.prefix[0] < v.th.prefix_high_frac:
        return None
    return Hit(_prefix_line(v))


def _prefix_absent(v: TickView) -> Hit | None:
    if v.prefix is None or v.prefix[0] >= v.th.prefix_low_frac:
        return None
    return Hit(_prefix_line(v))


def _queueing_ttft(v: TickView) -> Hit | None:
    th = v.th
    ttft = v.ttft_mean
    if not ttft or not _queued(v):
        return None
    floor = v.ttft_floor
    rising = floor is not None and floor > 0 and ttft / floor >= th.ttft_rise_ratio
    share = (v.queue_mean or 0.0) / ttft
    if not rising and share < th.queue_share_min:
        return None
    ev = [f"TTFT mean {_ms(ttft)}" + (f" (floor {_ms(floor)})" if floor and rising else "")]
    if v.queue_mean is not None:
        ev.append(f"queue {_ms(v.queue_mean)} of it ({min(share, 1.0) * 100:.0f} %)")
    ev.append(f"waiting {_f(v.waiting_mean or 0)}")
    return Hit(tuple(ev))


def _frontend_bound(v: TickView) -> Hit | None:
    th, c = v.th, v.ctx
    server = v.ttft_long
    client = c.client_ttft_mean_s
    if client is None or not server:
        return None
    if client / server < th.frontend_ttft_ratio or client - server < th.frontend_gap_s:
        return None
    cpu = c.api_server_cpu_percent
    if cpu is not None and cpu < th.api_cpu_high_pct:
        return None  # the gap is not the API server's doing
    ev = [f"client TTFT {_ms(client)} vs server {_ms(server)} (x{client / server:.1f})"]
    if cpu is not None:
        ev.append(f"API server CPU {cpu:.0f} % of a core")
    return Hit(tuple(ev))


def _client_capped(v: TickView) -> Hit | None:
    th, cc = v.th, v.ctx.client_concurrency
    if not v.ctx.phase_running or not cc or v.running_mean is None:
        return None
    if v.running_mean < th.client_pinned_frac * cc or _queued(v):
        return None
    if v.kv_usage is not None and v.kv_usage >= th.kv_headroom_frac:
        return None
    if v.util is not None and v.util >= th.util_high_pct:
        return None
    ev = [f"running {_f(v.running_mean)} of client concurrency {cc}", f"waiting {_f(v.waiting_mean or 0)}"]
    if v.kv_usage is not None:
        ev.append(f"KV usage {v.kv_usage * 100:.0f} %")
    if v.util is not None:
        ev.append(f"GPU util {v.util:.0f} %")
    return Hit(tuple(ev))


def _tp_over_pcie(v: TickView) -> Hit | None:
    tp = v.ctx.tensor_parallel
    if not tp or tp < 2:
        return None
    devs = v.server_devices
    links = [d.nvlink_active for d in devs]
    if not devs or any(n is None or n > 0 for n in links):
        return None
    d = devs[0]
    pcie = f" (PCIe gen{d.pcie_gen} x{d.pcie_width})" if d.pcie_gen and d.pcie_width else ""
    return Hit((f"tensor parallel {tp}", f"NVLink links 0 on {_devs(devs)}{pcie}"))


def _idle_gpus_beside(v: TickView) -> Hit | None:
    th = v.th
    if v.gpu is None or len(v.gpu.devices) < 2 or (v.ctx.tensor_parallel or 1) != 1:
        return None
    held = [d for d in v.gpu.devices if (f := _mem_frac(d)) is not None and f >= th.server_gpu_mem_frac]
    free = [
        d
        for d in v.gpu.devices
        if (f := _mem_frac(d)) is not None
        and f < th.idle_gpu_mem_frac
        and (d.util_gpu is None or d.util_gpu < th.util_idle_pct)
    ]
    if len(held) != 1 or not free:
        return None
    s = held[0]
    util = f", util {s.util_gpu:.0f} %" if s.util_gpu is not None else ""
    return Hit((f"server on GPU{s.index}{util}", f"{len(free)} idle: {_devs(free)}"))


def _clock_throttle(v: TickView) -> Hit | None:
    bad = set(v.th.throttle_reasons_bad)
    ev = []
    for d in v.server_devices:
        reasons = [r for r in d.throttle_reasons or () if r in bad]
        if not reasons:
            continue
        parts = [", ".join(reasons)]
        if d.sm_clock_mhz is not None:
            parts.append(f"SM {d.sm_clock_mhz:,} MHz")
        if d.temperature_c is not None:
            parts.append(f"{d.temperature_c:.0f} °C")
        ev.append(f"GPU{d.index}: " + ", ".join(parts))
    return Hit(tuple(ev)) if ev else None


_DIED_ADVICE = {
    "cuda_oom": "CUDA ran out of memory: lower --gpu-memory-utilization or --max-model-len, or use a smaller "
    "(quantised) checkpoint; check no other process holds the GPU.",
    "no_cache_memory": "Nothing was left for the KV cache after the weights: quantise the weights, raise the "
    "memory given to vLLM, or lower --max-model-len.",
    "max_seq_len": "The KV cache cannot hold one request of --max-model-len tokens: lower --max-model-len or "
    "give the KV cache more memory.",
    "address_in_use": "Another process already listens on the port: stop the old server (and see its memory "
    "freed) or pick another --port.",
}


def _server_died(v: TickView) -> Hit | None:
    c = v.ctx
    if c.server_state != "died":
        return None
    err = c.server_error
    if err is None:
        return Hit(("server process exited",))
    if isinstance(err, str):
        return Hit((err,))
    return Hit((f"{err.kind}: {err.message}",), _DIED_ADVICE.get(err.kind))


def _vram_not_released(v: TickView) -> Hit | None:
    c = v.ctx
    left = c.vram_after_stop_bytes
    if c.server_state != "stopped" or left is None or left < v.th.vram_left_bytes:
        return None
    return Hit((f"VRAM still in use after stop: {left / GIB:.1f} GiB",))


def _length_finishes(v: TickView) -> Hit | None:
    th = v.th
    if v.ctx.fixed_output_len:
        return None  # fixed output lengths (--ignore-eos): every request ends on length by design
    done = v.finished
    total = sum(done.values())
    cut = done.get("length", 0.0)
    if total < th.length_min_finished or cut / total < th.length_share_min:
        return None
    share = f"{cut / total * 100:.0f} %"
    return Hit((f"finish_reason=length {share} ({cut:.0f} of {total:.0f} in {th.long_span_s:.0f} s)",))


RULES: tuple[Rule, ...] = (
    Rule(
        "server_died",
        "crit",
        "The server died",
        _server_died,
        "Read the last log lines; fix the cause before the next phase.",
        "architecture: processes",
        hold_s=0,
        clear_s=0,
    ),
    Rule(
        "vram_not_released",
        "crit",
        "VRAM not released after the server stopped",
        _vram_not_released,
        "A server process survived the stop: find it (nvidia-smi) and end it, and see the memory free before "
        "the next phase starts, or that phase runs with less memory.",
        "doc 2 step 6-1",
        hold_s=3,
        clear_s=0,
        needs_gpu=True,
    ),
    Rule(
        "kv_bound",
        "warn",
        "KV cache is the limit",
        _kv_bound,
        "Free memory for the KV cache: smaller weights (a 4-bit checkpoint took KV 72,064 → 191,056 tokens), "
        "a higher --gpu-memory-utilization, or a --max-model-len no longer than the traffic needs.",
        "doc 1 step 4",
        advice_cpu="Give the KV cache more memory (--kv-cache-memory-bytes or "
        "VLLM_CPU_KVCACHE_SPACE) or lower --max-model-len to what the traffic needs.",
    ),
    Rule(
        "queueing_ttft",
        "warn",
        "TTFT is climbing while requests wait",
        _queueing_ttft,
        "Requests spend their TTFT in the queue: more throughput raised concurrency and they wait longer. If "
        "TTFT matters, lower the load or free KV cache; caching can raise throughput and TTFT together.",
        "doc 2 prefix_repetition phase",
    ),
    Rule(
        "batching",
        "warn",
        "GPU underused while requests queue: batching / scheduling",
        _low_util_queue,
        "The scheduler is not filling batches: check --max-num-seqs (8 throttles concurrency) and "
        "--max-num-batched-tokens, and that chunked prefill is on.",
        "doc 1 step 1",
        needs_gpu=True,
    ),
    Rule(
        "memory_bound",
        "warn",
        "High power, low utilisation: memory-bound or inefficient kernels",
        _high_power_low_util,
        "The GPU burns power without keeping its cores busy: suspect memory bandwidth or kernel choice "
        "(dtype, quantisation kernels, attention backend); profile before touching scheduler flags.",
        "doc 1 step 1",
        needs_gpu=True,
    ),
    Rule(
        "saturated",
        "info",
        "GPU saturated (util and power ≥ 90 %)",
        _saturated,
        "Normal saturation: settings will not add much. Do less work per token (quantisation, prefix reuse) "
        "or add hardware (replicas for throughput).",
        "doc 1 step 1",
        needs_gpu=True,
    ),
    Rule(
        "gpu_healthy",
        "info",
        "GPU busy with power headroom, no queue",
        _healthy,
        "Nothing to fix in the step-1 reading; look at KV usage and latency for the next limit.",
        "doc 1 step 1",
        needs_gpu=True,
    ),
    Rule(
        "gpu_idle",
        "warn",
        "GPU idle while a phase runs: no requests arriving",
        _gpu_idle,
        "The bench client is not reaching this server: check it is running and its --base-url and --model.",
        "doc 1 step 1",
        needs_gpu=True,
    ),
    Rule(
        "engine_idle",
        "warn",
        "Server idle while a phase runs: no requests arriving",
        _engine_idle,
        "The bench client is not reaching this server: check it is running and its --base-url and --model.",
        "doc 1 step 1",
    ),
    Rule(
        "concurrency_ceiling",
        "warn",
        "The KV cache holds fewer full-length requests than the client sends",
        _concurrency_ceiling,
        "Shrink the weights (AWQ took max concurrency 1.76x → 4.66x), lower --max-model-len to what the "
        "traffic needs, or raise --gpu-memory-utilization.",
        "doc 1 step 4",
        hold_s=0,
        clear_s=0,
        advice_cpu="Give the KV cache more memory (--kv-cache-memory-bytes or VLLM_CPU_KVCACHE_SPACE) or "
        "lower --max-model-len to what the traffic needs.",
    ),
    Rule(
        "weights_dominate",
        "info",
        "Weights take most of the server's memory: quantisation headroom",
        _weights_dominate,
        "A 4-bit (AWQ/GPTQ) or FP8 checkpoint frees memory for the KV cache: 27.5 → 9.6 GiB gave KV x2.65 "
        "and total TPS x2.70. Check output quality separately.",
        "doc 1 steps 4 and 6",
        hold_s=0,
        clear_s=0,
    ),
    Rule(
        "prefix_reuse_high",
        "info",
        "High prefix reuse: the cache is doing the work",
        _prefix_high,
        "Throughput here reflects reused prefixes, not a faster server: compare phases on the same traffic "
        "(474 vs 1,123 TPS from traffic alone) and watch TTFT, which caching can raise.",
        "doc 1 step 5",
        hold_s=15,
        clear_s=30,
    ),
    Rule(
        "prefix_reuse_absent",
        "info",
        "No prefix reuse in this traffic",
        _prefix_absent,
        "Prefix caching cannot help this traffic; if real traffic shares system prompts, measure it with "
        "prefix_repetition too.",
        "doc 1 step 2",
        hold_s=30,
        clear_s=30,
    ),
    Rule(
        "frontend_bound",
        "warn",
        "Client TTFT far above the server's: the API server front end",
        _frontend_bound,
        "Time goes before the engine (tokenisation, HTTP, the API server's event loop): add API servers "
        "(--api-server-count), scrape /metrics less often, or move the client off the server's cores.",
        "reference §3 (client vs server latency)",
        hold_s=5,
        clear_s=30,
    ),
    Rule(
        "client_capped",
        "info",
        "Load capped by the client's concurrency",
        _client_capped,
        "Not a server problem: raise the bench's --max-concurrency (or --request-rate) to find the server's "
        "limit. Server flags cannot change this (the tuned phase gave +0.07 %).",
        "doc 2 tuned phase",
        hold_s=15,
        clear_s=10,
    ),
    Rule(
        "tp_over_pcie",
        "warn",
        "Tensor parallel over PCIe-only GPUs",
        _tp_over_pcie,
        "Every layer all-reduces over PCIe: one L40S beat two and four. If the model fits one GPU, run one "
        "replica per GPU instead.",
        "doc 1 step 8",
        hold_s=0,
        clear_s=0,
        needs_gpu=True,
    ),
    Rule(
        "idle_gpus_beside",
        "info",
        "Idle GPUs beside a one-GPU server",
        _idle_gpus_beside,
        "For throughput run one replica per GPU behind a router: 4 replicas gave 9,816 TPS vs 3,926 for "
        "TP=4. Use tensor parallel for models that do not fit or to cut TTFT.",
        "doc 1 step 8",
        hold_s=10,
        clear_s=10,
        needs_gpu=True,
    ),
    Rule(
        "clock_throttle",
        "warn",
        "GPU clocks throttled",
        _clock_throttle,
        "The GPU slows itself down (heat or power brake): check cooling and airflow; results from this phase "
        "understate the hardware.",
        "doc 1 step 1 (P-state and power)",
        hold_s=10,
        clear_s=15,
        needs_gpu=True,
    ),
    Rule(
        "length_finishes",
        "warn",
        "Many completions cut off at the length limit",
        _length_finishes,
        "Requests end on max_tokens or --max-model-len rather than naturally: raise the limit if that is not "
        "intended (--max-model-len 1024 breaks ShareGPT). Mark fixed-length bench traffic as such.",
        "doc 2 step 7 / reference §6",
        hold_s=5,
        clear_s=30,
    ),
)
