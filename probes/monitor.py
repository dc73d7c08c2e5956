"""One tick of every probe: engine + GPUs + host → Sample → Window → findings.

The TUI and the headless runner share this, so the screen and `llmopt-tui run` can never disagree. tick()
blocks on a scrape; callers run it in a worker thread and schedule the next tick when this one finished.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from probes.diagnosis import Diagnoser, DiagnosisContext, Finding
from probes.gpu import GpuSource
from probes.host import HostProbe
from probes.metrics import EngineSource, MetricsScraper
from probes.types import GpuSnapshot, Sample
from probes.window import Window


@dataclass(frozen=True, slots=True)
class Tick:
    sample: Sample
    findings: tuple[Finding, ...]
    cost_s: float  # the monitor's own time for this tick (scrape + parse + window + rules)


class Monitor:
    """Owns the sources, the window and the diagnoser; thread-safe for one ticking thread plus setters."""

    def __init__(
        self,
        engine: EngineSource | None,
        gpu: GpuSource,
        host: HostProbe,
        *,
        window: Window | None = None,
        diagnoser: Diagnoser | None = None,
        engine_factory: Callable[[str], EngineSource] = MetricsScraper,
    ) -> None:
        self._engine = engine
        self._gpu = gpu
        self._host = host
        self.window = window or Window(horizon_s=3 * 3600.0, maxlen=16384)  # a whole GPU phase at 1 Hz
        self.diagnoser = diagnoser or Diagnoser()
        self._engine_factory = engine_factory
        self._server_pid: int | None = None
        self._lock = threading.Lock()
        self.tick_lock = threading.RLock()  # the TUI's poller and the runner may both tick
        self.last_findings: tuple[Finding, ...] = ()
        self.on_sample: Callable[[Sample], None] | None = None  # e.g. the session recorder

    @property
    def engine_url(self) -> str | None:
        return getattr(self._engine, "url", None)

    def set_engine(self, url: str | None) -> None:
        """Point the engine probe at another server (a phase started elsewhere), or at none."""
        with self._lock:
            old, self._engine = self._engine, (self._engine_factory(url) if url else None)
        if old is not None:
            old.close()
        self.new_phase()  # another server is another world: no finding carries over

    def new_phase(self) -> None:
        """A phase starts: findings of the one before must not linger while the next server loads."""
        with self.tick_lock:
            self.diagnoser.reset()
            self.last_findings = ()

    def set_server_pid(self, pid: int | None) -> None:
        self._server_pid = pid

    def read_gpu(self) -> GpuSnapshot:
        return self._gpu.read()

    def read(self) -> Sample:
        """One sample of every source; each part degrades to None/unavailable on its own."""
        with self._lock:
            engine = self._engine
        engine_sample = engine.scrape() if engine is not None else None
        gpu_snapshot = self._gpu.read()
        host_sample = self._host.read(self._server_pid)
        return Sample(t=time.time(), engine=engine_sample, gpu=gpu_snapshot, host=host_sample)

    def ingest(self, sample: Sample, ctx: DiagnosisContext | None = None) -> tuple[Finding, ...]:
        """Push a sample (live or replayed) and evaluate the rules on it."""
        with self.tick_lock:
            self.window.push(sample)
            if self.on_sample is not None:
                self.on_sample(sample)
            self.last_findings = tuple(self.diagnoser.tick(self.window, ctx or DiagnosisContext(), sample.t))
            return self.last_findings

    def tick(self, ctx: DiagnosisContext | None = None) -> Tick:
        t0 = time.perf_counter()
        with self.tick_lock:
            sample = self.read()
            findings = self.ingest(sample, ctx)
        return Tick(sample, findings, time.perf_counter() - t0)

    def close(self) -> None:
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
        self._gpu.close()
