"""The phase runner: serve → healthy → memory report → bench → summary → record → stop, phase after phase.

Runs blocking in one thread (the TUI's worker, or the headless CLI's main thread); cancel() may be called from
any thread or signal handler and makes the current phase stop every child and end as "cancelled". A finished
phase is written to disk (atomically) before its server is stopped, so nothing later can lose it.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from presets.process import ManagedProcess, ServerFailed, StopReport, VllmServer, port_in_use, tail_lines
from presets.results import PhaseRecord, SessionStore, mask_text, secret_values
from presets.schema import ServerPreset, TrafficPreset
from presets.vllm_env import server_env
from presets.vram import vram_used, wait_vram_released
from probes.diagnosis import DiagnosisContext, Finding, PhaseFacts, explain_change
from probes.monitor import Monitor
from probes.serverlog import parse_memory_report
from probes.types import MemoryReport

EventKind = Literal[
    "phase_start",
    "server_starting",
    "server_ready",
    "bench_start",
    "bench_progress",
    "bench_done",
    "phase_done",
    "phase_failed",
    "server_stopped",
    "session_done",
    "cancelled",
    "error",
]
ServerState = Literal["none", "starting", "ready", "died", "stopped"]
_PROGRESS = re.compile(r"(\d+)/(\d+) \[")
WATCH_EVERY_S = 1.0  # /health and the bench's progress bar are read at most this often


@dataclass(frozen=True, slots=True)
class RunnerEvent:
    kind: EventKind
    phase_index: int
    phase_name: str
    message: str
    server_url: str | None = None
    server_pid: int | None = None
    log_path: Path | None = None
    record: PhaseRecord | None = None
    progress: tuple[int, int] | None = None  # requests done / total, from the bench's progress bar
    t: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class PhaseSpec:
    server: ServerPreset | None  # None: attach mode, the server at `attach_url` is given
    traffic: TrafficPreset | None  # None: serve only (the TUI's preset keys) until stopped or replaced
    label: str

    @property
    def role(self) -> str:
        return self.server.role if self.server else "attached"


class Cancelled(Exception):
    pass


def bench_progress(log_path: Path) -> tuple[int, int] | None:
    """The last "done/total [" of the bench's progress bar."""
    for line in reversed(tail_lines(log_path, 5)):
        hits = _PROGRESS.findall(line)
        if hits:
            done, total = hits[-1]
            return int(done), int(total)
    return None


class PlanRunner:
    """Runs phases one after another; every event goes to `on_event` (called from the runner's thread)."""

    def __init__(
        self,
        *,
        vllm_exe: Path,
        store: SessionStore,
        on_event: Callable[[RunnerEvent], None],
        monitor: Monitor,
        attach_url: str | None = None,
        tick_interval_s: float | None = 1.0,
        baseline_index: int = 0,
        first_index: int = 0,
    ) -> None:
        self.vllm_exe = vllm_exe
        self.store = store
        self.on_event = on_event
        self.monitor = monitor
        self.attach_url = attach_url
        self.tick_interval_s = tick_interval_s  # None: someone else (the TUI) ticks the monitor
        self.baseline_index = baseline_index
        self.first_index = first_index  # phase numbers continue across runners sharing one session
        self.records: list[PhaseRecord] = []
        self.current_phase: PhaseSpec | None = None
        self.server: VllmServer | None = None
        self.server_state: ServerState = "none"
        self.memory = MemoryReport()
        self._cancel = threading.Event()
        self._findings: dict[str, Finding] = {}
        self._client_concurrency: int | None = None
        self._fixed_output = False
        self._secrets: set[str] = set()  # the current preset's secret values, masked in all we say
        self._benching = False  # traffic is being sent (idle rules must not fire during start-up)
        self._vram_before_start: int | None = None  # GPU only: used VRAM before our server started
        self.vram_left_bytes: int | None = None  # GPU only: VRAM still held after the last stop

    # ------------------------------------------------------------------ public
    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def context(self) -> DiagnosisContext:
        """What the diagnosis should know about the phase that runs now."""
        return DiagnosisContext(
            phase_running=self._benching,
            client_concurrency=self._client_concurrency,
            fixed_output_len=self._fixed_output,
            server_state=self.server_state,
            memory=self.memory,
            vram_after_stop_bytes=self.vram_left_bytes,
        )

    def run(self, phases: Sequence[PhaseSpec], *, keep_last_server: bool = False) -> list[PhaseRecord]:
        """Run every phase; return the records (finished phases are on disk whatever happens)."""
        for phase in phases:
            port_owner = phase.server
            if (
                port_owner is not None
                and port_in_use(port_owner.host, port_owner.port)
                and self.server is None
            ):
                raise ServerFailed(
                    f"port {port_owner.port} on {port_owner.host} is already in use (phase {phase.label}): "
                    "stop what listens there or change the preset's port"
                )
        try:
            for n, phase in enumerate(phases):
                if self._cancel.is_set():
                    break
                last = n == len(phases) - 1
                self._run_phase(
                    self.first_index + len(self.records), phase, keep_server=keep_last_server and last
                )
        finally:
            if not keep_last_server or self._cancel.is_set():
                self.stop_server(self.first_index + len(self.records), "session end")
            self._emit(
                "cancelled" if self._cancel.is_set() else "session_done",
                -1,
                "",
                f"{len(self.records)} phase(s) recorded in {self.store.session_dir}",
            )
        return self.records

    # ------------------------------------------------------------------ one phase
    def _run_phase(self, index: int, phase: PhaseSpec, *, keep_server: bool) -> None:
        self.current_phase = phase
        self._findings = {}
        self.monitor.new_phase()
        self.memory = MemoryReport()
        traffic = phase.traffic
        self._client_concurrency = traffic.max_concurrency if traffic else None
        self._fixed_output = bool(traffic and traffic.ignore_eos)
        started_at = datetime.now(UTC)
        timings: dict[str, float | None] = {}
        status: Literal["ok", "failed", "cancelled"] = "ok"
        error: str | None = None
        log_tail: list[str] = []
        window_summary: Any = None
        bench_path = self.store.bench_json(index)
        self._secrets = secret_values(phase.server.model_dump()) if phase.server else set()
        self._emit("phase_start", index, phase.label, f"phase {index}: {phase.label}")
        t_phase = time.monotonic()
        try:
            url = self._start_server(index, phase, timings)
            if traffic is not None:
                window_summary = self._bench(index, phase, traffic, url, bench_path, timings)
            else:
                self._serve_until_cancelled(index, phase)
        except Cancelled:
            status, error = "cancelled", "cancelled by the user"
        except ServerFailed as exc:
            status, error = "failed", mask_text(str(exc), self._secrets)
            log_tail = [mask_text(line, self._secrets) for line in exc.log_tail]
            self.server_state = "died"
        timings["phase_s"] = time.monotonic() - t_phase
        if self.server is not None:
            self.memory = parse_memory_report(self.server.log_path.read_text(errors="replace"))
        findings = list(self._findings.values())
        record = PhaseRecord.build(
            index,
            phase.label,
            phase.server.model_dump() if phase.server else {"url": self.attach_url},
            traffic.model_dump() if traffic else {},
            status,
            bench_path=bench_path if status == "ok" else None,
            memory=self.memory,
            window=window_summary,
            findings=findings,
            error=error,
            log_tail=log_tail,
            timings=timings,
            started_at=started_at,
            finished_at=datetime.now(UTC),
            files=self._files(index),
        )
        if status == "ok" and traffic is not None and self.records:
            chain = self._explain(record)
            record = record.model_copy(update={"findings": record.findings + chain})
        self.store.write_phase(record)
        self.records.append(record)
        self._emit(
            "phase_done" if status == "ok" else "phase_failed",
            index,
            phase.label,
            f"phase {index} {phase.label}: {status}" + (f" — {error}" if error else ""),
            record=record,
        )
        if not keep_server or status != "ok":
            report = self.stop_server(index, phase.label)
            if report is not None:
                timings.update(stop_s=report.stop_s, children_gone_s=report.children_gone_s)
                record = record.model_copy(update={"timings": dict(timings)})
                self.store.write_phase(record)
                self.records[-1] = record
        self.current_phase = None

    def _start_server(self, index: int, phase: PhaseSpec, timings: dict[str, float | None]) -> str:
        if phase.server is None:
            if self.attach_url is None:
                raise ServerFailed("attach mode needs a server URL")
            self.server_state = "ready"
            self.monitor.set_engine(self.attach_url)
            return self.attach_url
        self.stop_server(index, phase.label)  # one server at a time: the previous phase's, if kept
        preset = phase.server
        log_path = self.store.serve_log(index)
        argv = preset.argv(self.vllm_exe)
        env = server_env(preset.env)
        for name in preset.env_unset:
            env.pop(name, None)
        server = VllmServer(argv, host=preset.host, port=preset.port, log_path=log_path, env=env)
        self._vram_before_start = vram_used(self.monitor.read_gpu())
        self.server_state = "starting"
        t0 = time.monotonic()
        server.start()
        self.server = server
        self.monitor.set_server_pid(server.pid)  # the process tree shows while it loads
        self._emit(
            "server_starting",
            index,
            phase.label,
            f"starting {preset.name}: {' '.join(argv[1:4])} ...",
            server_url=server.url,
            server_pid=server.pid,
            log_path=log_path,
        )
        timings["ready_s"] = server.wait_ready(preset.startup_timeout_s, self._cancel)
        timings["start_to_ready_s"] = time.monotonic() - t0
        if self._cancel.is_set():
            raise Cancelled
        self.server_state = "ready"
        self.memory = parse_memory_report(log_path.read_text(errors="replace"))
        self.monitor.set_engine(server.url)
        self.monitor.set_server_pid(server.pid)
        self._emit(
            "server_ready",
            index,
            phase.label,
            f"{preset.name} ready in {timings['ready_s']:.1f} s at {server.url}",
            server_url=server.url,
            server_pid=server.pid,
            log_path=log_path,
        )
        return server.url

    def _bench(
        self,
        index: int,
        phase: PhaseSpec,
        traffic: TrafficPreset,
        url: str,
        bench_path: Path,
        timings: dict[str, float | None],
    ) -> Any:
        model = phase.server.model if phase.server else self._served_model(url)
        argv = traffic.argv(self.vllm_exe, url, model, model, bench_path.parent, bench_path.name)
        bench = ManagedProcess(argv, self.store.bench_log(index), bench_env(phase))
        first = self.monitor.tick(self.context())
        self._collect(first.findings)
        t0 = time.monotonic()
        bench.start()
        self._benching = True
        self._emit(
            "bench_start",
            index,
            phase.label,
            f"bench {traffic.name}: {traffic.num_prompts} prompts",
            server_url=url,
            log_path=self.store.bench_log(index),
        )
        try:
            self._watch_bench(index, phase, bench)
        except (Cancelled, ServerFailed):
            bench.stop(term_timeout_s=5.0)
            raise
        finally:
            self._benching = False
        timings["bench_s"] = time.monotonic() - t0
        code = bench.poll()
        last = self.monitor.tick(self.context())
        self._collect(last.findings)
        if code != 0:
            raise ServerFailed(
                f"vllm bench serve exited with code {code} (log: {self.store.bench_log(index)})",
                tail_lines(self.store.bench_log(index)),
            )
        self._emit("bench_done", index, phase.label, f"bench done in {timings['bench_s']:.1f} s")
        return self.monitor.window.summary(first.sample.t, last.sample.t)

    def _watch_bench(self, index: int, phase: PhaseSpec, bench: ManagedProcess) -> None:
        """Until the bench exits: notice cancel and a dead server quickly, tick when asked, report progress.

        Only the process checks run every 0.2 s; /health (a request to the server being measured) and the
        log's progress bar are read at most once a second, so watching costs the server nothing measurable.
        """
        next_tick = time.monotonic() + (self.tick_interval_s or 0.0)
        next_look = time.monotonic()
        last_progress: tuple[int, int] | None = None
        while bench.poll() is None:
            if self._cancel.wait(0.2):
                raise Cancelled
            now = time.monotonic()
            self._check_server_alive(with_health=now >= next_look)
            if self.tick_interval_s is not None and now >= next_tick:
                next_tick = now + self.tick_interval_s
                self._collect(self.monitor.tick(self.context()).findings)
            else:
                self._collect(self.monitor.last_findings)
            if now < next_look:
                continue
            next_look = now + WATCH_EVERY_S
            progress = bench_progress(bench.log_path)
            if progress and progress != last_progress:
                last_progress = progress
                message = f"{progress[0]}/{progress[1]} requests"
                self._emit("bench_progress", index, phase.label, message, progress=progress)

    def _serve_until_cancelled(self, index: int, phase: PhaseSpec) -> None:
        """Serve-only phase: keep the server until cancel() (the TUI stops or replaces it)."""
        next_tick = time.monotonic()
        while not self._cancel.wait(WATCH_EVERY_S):
            self._check_server_alive(with_health=True)
            if self.tick_interval_s is not None and time.monotonic() >= next_tick:
                next_tick = time.monotonic() + self.tick_interval_s
                self.monitor.tick(self.context())
        raise Cancelled

    def _check_server_alive(self, *, with_health: bool) -> None:
        if self.server is None:
            return
        code = self.server.process.poll()
        if code is not None:
            raise ServerFailed(f"vllm serve died (exit code {code})", tail_lines(self.server.log_path))
        if with_health and self.server.health() == 503:
            raise ServerFailed(
                "vllm serve reports its engine dead (/health 503)", tail_lines(self.server.log_path)
            )

    def stop_server(self, index: int, label: str) -> StopReport | None:
        server, self.server = self.server, None
        if server is None:
            return None
        self.monitor.set_server_pid(None)
        report = server.stop()
        if self.server_state != "died":
            self.server_state = "stopped"
        survivors = f", SURVIVORS {list(report.survivors)}" if report.survivors else ""
        if self._vram_before_start is not None:
            self.vram_left_bytes, waited = wait_vram_released(self.monitor.read_gpu, self._vram_before_start)
            survivors += (
                f", VRAM released in {waited:.1f} s"
                if not self.vram_left_bytes
                else f", VRAM NOT released: {self.vram_left_bytes / 1024**3:.1f} GiB still used"
            )
        self._emit(
            "server_stopped",
            index,
            label,
            f"server stopped in {report.stop_s:.1f} s (tree gone in {report.children_gone_s:.1f} s"
            f"{', SIGKILL needed' if report.killed else ''}{survivors})",
            log_path=server.log_path,
        )
        return report

    # ------------------------------------------------------------------ helpers
    def _collect(self, findings: Sequence[Finding]) -> None:
        for finding in findings:
            self._findings[finding.id] = finding

    def _explain(self, record: PhaseRecord) -> list[dict[str, Any]]:
        base = self.records[min(self.baseline_index, len(self.records) - 1)]
        tunes_name = record.server.get("tunes")
        tuned = next((r for r in self.records if r.server.get("name") == tunes_name), None)
        facts = [phase_facts(r) for r in (base, record)]
        chain = explain_change(facts[0], facts[1], phase_facts(tuned) if tuned else None)
        return [asdict(f) for f in chain]

    def _served_model(self, url: str) -> str:
        from probes.metrics import MetricsScraper

        scraper = MetricsScraper(url)
        try:
            models = scraper.models()
        finally:
            scraper.close()
        if not models:
            raise ServerFailed(f"{url} lists no model at /v1/models")
        return models[0]

    def _files(self, index: int) -> dict[str, str]:
        root = self.store.session_dir
        paths = {
            "serve_log": self.store.serve_log(index),
            "bench_log": self.store.bench_log(index),
            "bench_json": self.store.bench_json(index),
        }
        return {k: str(p.relative_to(root)) for k, p in paths.items() if p.exists()}

    def _emit(self, kind: EventKind, index: int, name: str, message: str, **extra: Any) -> None:
        self.on_event(RunnerEvent(kind, index, name, mask_text(message, self._secrets), **extra))


def bench_env(phase: PhaseSpec) -> dict[str, str]:
    """The bench client's environment: offline settings plus the preset's secrets (e.g. OPENAI_API_KEY)."""
    extra = {k: v for k, v in (phase.server.env if phase.server else {}).items() if k == "OPENAI_API_KEY"}
    return server_env(extra)


def _peak_running(window: dict[str, Any]) -> float | None:
    """The window's peak of running requests; a 0 while tokens were generated only means the 1 Hz gauge
    reads fell between engine steps, so it is dropped rather than told as a fact."""
    peak = window.get("peak_running")
    if peak == 0 and (window.get("generation_tokens") or 0) > 0:
        return None
    return peak


def phase_facts(record: PhaseRecord) -> PhaseFacts:
    """The numbers of a phase that the between-phase explanation reads."""
    bench = record.bench
    window = record.window or {}
    memory = record.memory or {}
    traffic = record.traffic or {}
    return PhaseFacts(
        name=record.name,
        weights_gib=memory.get("weights_gib"),
        kv_tokens=memory.get("kv_tokens"),
        max_concurrency=memory.get("max_concurrency"),
        total_tps=bench.total_token_throughput if bench else window.get("total_tps"),
        output_tps=bench.output_throughput if bench else window.get("output_tps"),
        ttft_mean_ms=bench.stat("ttft", "mean") if bench else None,
        itl_mean_ms=bench.stat("itl", "mean") if bench else None,
        client_concurrency=traffic.get("max_concurrency"),
        peak_running=_peak_running(window),
        preemptions=window.get("preemptions"),
        prefix_hit_rate=window.get("prefix_hit_rate"),
    )
