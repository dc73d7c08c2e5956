"""The live screen: GPU / engine / sparklines / diagnosis, driven by one poll worker and the plan runner.

Threads: the poll worker (a thread) ticks the Monitor, reads the window and the server log, and posts one
immutable Frame per tick (``FrameReady``, which collapses when the UI is behind). The runner works in its
own thread worker and reports through ``RunnerEventMessage``. The UI thread only formats and draws.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.worker import Worker, WorkerState, get_current_worker

from presets.results import mask_text
from probes.diagnosis import DiagnosisContext, Finding
from probes.types import MemoryReport
from tui import state as run_state
from tui.screens.confirm import ConfirmScreen
from tui.screens.findings import FindingsScreen
from tui.screens.help import HelpScreen, KeyHelp
from tui.screens.picker import Pick, PickerScreen
from tui.view import Frame, build_frame
from tui.widgets.diagnosis import DiagnosisPanel
from tui.widgets.engine import EnginePanel, ServerStatus
from tui.widgets.gpu import GpuPanel
from tui.widgets.logtail import LogTail
from tui.widgets.phasebar import PhaseBar
from tui.widgets.sparks import SparkPanel
from tui.widgets.status import StatusLine

if TYPE_CHECKING:
    from presets.catalog import Catalog
    from presets.runner import PhaseSpec, PlanRunner, RunnerEvent
    from presets.schema import Plan, ServerPreset, TrafficPreset
    from probes.monitor import Monitor
    from probes.replay import ReplaySource
    from probes.serverlog import LogFollower

SelfStats = Callable[[], tuple[float | None, int | None]]
CHAIN_IDS = ("change_", "tuning_", "ttft_tradeoff")
RUNNER_ACTIONS = frozenset({"switch_role", "pick", "run_plan", "stop"})
REPLAY_ACTIONS = frozenset({"replay_pause", "replay_speed"})


class FrameReady(Message):
    """One tick's Frame. A newer one supersedes an older one still queued (the UI fell behind)."""

    def __init__(self, frame: Frame) -> None:
        super().__init__()
        self.frame = frame

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FrameReady)


class RunnerEventMessage(Message):
    def __init__(self, event: RunnerEvent) -> None:
        super().__init__()
        self.event = event


class ReplayEnded(Message):
    pass


def psutil_self_stats(span_s: float = 10.0) -> SelfStats:
    """CPU % of one core over the last ``span_s`` seconds, and RSS, of this process (all threads).

    Averaged over seconds, not ticks: CPU time comes in 10 ms clock ticks, so a per-tick figure at
    1 Hz or faster would flicker between 0 and a multiple of 1 %.
    """
    import collections

    import psutil

    proc = psutil.Process(os.getpid())
    history: collections.deque[tuple[float, float]] = collections.deque()

    def read() -> tuple[float | None, int | None]:
        try:
            times = proc.cpu_times()
            rss = proc.memory_info().rss
        except psutil.Error:
            return None, None
        now = time.monotonic()
        history.append((now, times.user + times.system))
        while len(history) > 2 and now - history[1][0] >= span_s:
            history.popleft()
        (t0, c0), (t1, c1) = history[0], history[-1]
        return ((c1 - c0) / (t1 - t0) * 100.0 if t1 > t0 else None), rss

    return read


def finding_from_dict(d: dict[str, Any]) -> Finding | None:
    try:
        return Finding(
            id=str(d["id"]),
            severity=d["severity"],
            title=str(d["title"]),
            evidence=tuple(str(e) for e in d.get("evidence", ())),
            advice=str(d.get("advice", "")),
            source=str(d.get("source", "")),
        )
    except (KeyError, TypeError):
        return None


def chain_findings(record: Any) -> tuple[Finding, ...]:
    """The between-phase explanation the runner stored in a PhaseRecord's findings."""
    out: list[Finding] = []
    for d in getattr(record, "findings", None) or ():
        if isinstance(d, dict) and str(d.get("id", "")).startswith(CHAIN_IDS):
            f = finding_from_dict(d)
            if f is not None:
                out.append(f)
    return tuple(out)


def record_memory(record: Any) -> MemoryReport | None:
    """A PhaseRecord's memory report (a dict on disk) as the MemoryReport the panels read."""
    data = getattr(record, "memory", None)
    if not data:
        return None
    known = {f.name for f in dataclasses.fields(MemoryReport)}
    try:
        return MemoryReport(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None


def replay_context(record: Any, memory: MemoryReport | None) -> DiagnosisContext:
    """What the runner knew while the recorded phase ran, so replayed rules judge it the same way."""
    if record is None:
        return DiagnosisContext()
    traffic = getattr(record, "traffic", None) or {}
    server = getattr(record, "server", None) or {}
    args = server.get("args") or []
    tp = None
    for flag in ("--tensor-parallel-size", "-tp"):
        if flag in args and args.index(flag) + 1 < len(args):
            with contextlib.suppress(ValueError):
                tp = int(args[args.index(flag) + 1])
    return DiagnosisContext(
        phase_running=bool(traffic),
        client_concurrency=traffic.get("max_concurrency"),
        fixed_output_len=bool(traffic.get("ignore_eos")),
        server_state="ready",
        memory=memory,
        tensor_parallel=tp,
    )


@dataclass(frozen=True, slots=True)
class Panels:
    phase: PhaseBar
    gpu: GpuPanel
    engine: EnginePanel
    sparks: SparkPanel
    diagnosis: DiagnosisPanel
    log: LogTail
    status: StatusLine


class LlmoptApp(App[None]):
    """See the module docstring; ``tui.cli`` builds it for attach, demo and replay."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "llmopt-tui"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall"), (50, "-huge")]  # noqa: RUF012 (Textual's own class attribute)
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012
    ENABLE_COMMAND_PALETTE = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "b",
            "switch_role('baseline')",
            "base",
            id="preset.baseline",
            tooltip="serve the baseline server preset (bf16; on CPU the starved-KV one)",
        ),
        Binding(
            "a",
            "switch_role('freed-memory')",
            "AWQ",
            id="preset.freed_memory",
            tooltip="serve the freed-memory preset (AWQ 4-bit; on CPU the roomy-KV one)",
        ),
        Binding(
            "t",
            "switch_role('tuned')",
            "tuned",
            id="preset.tuned",
            tooltip="serve the tuned preset (knobs on top of the freed-memory one)",
        ),
        Binding(
            "p", "pick", "pick", id="preset.pick", tooltip="pick any server, traffic or plan from a list"
        ),
        Binding("r", "run_plan", "run", id="plan.run", tooltip="run the plan: every phase, then compare"),
        Binding("s", "stop", "stop", id="plan.stop", tooltip="stop the running phase and its server"),
        Binding(
            "c",
            "compare",
            "compare",
            id="view.compare",
            tooltip="phase table with ratios vs the baseline, TPS and TTFT chart",
        ),
        Binding("l", "toggle_log", "log", id="view.log", tooltip="show / hide the server log tail"),
        Binding(
            "d",
            "details",
            "details",
            id="view.details",
            tooltip="every finding with its evidence, advice and source",
        ),
        Binding(
            "space",
            "replay_pause",
            "pause",
            id="replay.pause",
            key_display="space",
            tooltip="pause / resume the replay",
        ),
        Binding(
            "plus,equals_sign",
            "replay_speed(2.0)",
            "faster",
            id="replay.faster",
            key_display="+",
            tooltip="replay twice as fast",
        ),
        Binding(
            "minus",
            "replay_speed(0.5)",
            "slower",
            id="replay.slower",
            key_display="-",
            tooltip="replay half as fast",
        ),
        Binding("question_mark", "help", "help", id="app.help", key_display="?", tooltip="this list of keys"),
        Binding("q", "quit", "quit", id="app.quit", tooltip="quit (stops the server and bench it started)"),
    ]

    def __init__(
        self,
        monitor: Monitor,
        *,
        catalog: Catalog,
        runner_factory: Callable[..., PlanRunner] | None,
        plan: Plan | None,
        interval_s: float = 1.0,
        replay: ReplaySource | None = None,
        gpu_host: bool,
        replay_speed: float = 1.0,
        autostart: bool = True,
        self_stats: SelfStats | None = None,
        start_plan: bool = False,
    ) -> None:
        super().__init__()
        self.monitor = monitor
        self.catalog = catalog
        self.runner_factory = runner_factory
        self.plan = plan
        self.interval_s = max(0.05, interval_s)
        self.replay = replay
        self.gpu_host = gpu_host
        self.replay_speed = replay_speed
        self.replay_paused = False
        self.autostart = autostart
        self.start_plan = start_plan  # `llmopt-tui demo`: run the plan as soon as the screen is up
        self._self_stats = self_stats
        self.runstate = run_state.initial("replay" if replay is not None else "attach")
        self.specs: tuple[PhaseSpec, ...] = ()
        self.runner: PlanRunner | None = None
        self.runner_worker: Worker[Any] | None = None
        self.frame: Frame | None = None
        self.frames = 0  # frames drawn (tests and the e2e harness wait on it)
        self.chain: tuple[Finding, ...] = ()
        self.log_visible = False
        self.replay_records: tuple[Any, ...] = ()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._follower: LogFollower | None = None
        self._follower_path: Path | None = None
        self._sparks: SparkPanel | None = None  # widget refs the worker thread reads plain ints from
        self._log_widget: LogTail | None = None
        if replay is not None:
            self.replay_records = tuple(self._load_replay_records(replay))

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield PhaseBar(id="phase")
        with Horizontal(id="top"):
            yield GpuPanel(id="gpu")
            yield EnginePanel(id="engine")
        yield SparkPanel(id="sparks")
        yield DiagnosisPanel(id="diagnosis")
        yield LogTail(id="log")
        yield StatusLine(id="status")

    def on_mount(self) -> None:
        # Widget refs, taken once: app.query_one() searches the *current* screen, which may be a modal.
        self.panels = Panels(
            self.query_one(PhaseBar),
            self.query_one(GpuPanel),
            self.query_one(EnginePanel),
            self.query_one(SparkPanel),
            self.query_one(DiagnosisPanel),
            self.query_one(LogTail),
            self.query_one(StatusLine),
        )
        self._sparks = self.panels.sparks
        self._log_widget = self.panels.log
        self._show_phase()
        self._show_keys()
        self.panels.diagnosis.show(())
        if self.autostart:
            self.start_polling()
        if self.start_plan and self.replay is None:
            self.action_run_plan()

    def on_unmount(self) -> None:
        self._stop.set()
        self._wake.set()

    @property
    def device(self) -> str:
        return "gpu" if self.gpu_host else "cpu"

    # ------------------------------------------------------------------ polling (worker thread)
    def start_polling(self) -> None:
        self._stop.clear()
        self.run_worker(
            self._poll_loop, thread=True, exclusive=True, group="poll", name="poll", exit_on_error=False
        )

    def _poll_loop(self) -> None:
        worker = get_current_worker()
        stats = self._self_stats or psutil_self_stats()
        while not (worker.is_cancelled or self._stop.is_set()):
            started = time.monotonic()
            due = started + self.poll_once(stats)
            # Sleep until due, in short slices so a cancelled worker (app exit) never lingers.
            while not (worker.is_cancelled or self._stop.is_set()):
                left = due - time.monotonic()
                if left <= 0 or self._wake.wait(min(left, 0.25)):
                    break
            self._wake.clear()

    def poll_once(self, stats: SelfStats | None = None) -> float:
        """One tick: sample (or replay) → Frame → post. Returns the seconds until the next tick is due."""
        stats = stats or self._self_stats or psutil_self_stats()
        if self.replay is not None:
            if self.replay_paused:
                return 3600.0
            sample = self.replay.next()
            if sample is None:
                self.replay_paused = True
                self.post_message(ReplayEnded())
                return 3600.0
            record = self.replay_record(sample.t)
            memory = record_memory(record)
            t0 = time.perf_counter()
            findings = self.monitor.ingest(sample, replay_context(record, memory))
            cost = time.perf_counter() - t0
            wait = self.replay.gap_after(self.replay.position - 1) / max(0.01, self.replay_speed)
            log_error: str | None = None
            tail: tuple[str, ...] = ()
        else:
            tick = self.monitor.tick(self._diag_context())
            sample, findings, cost = tick.sample, tick.findings, tick.cost_s
            wait = self.interval_s
            memory, log_error, tail = self._read_log()
        cpu, rss = stats()
        with self._window_lock():  # the runner's thread may push a sample while we read the window
            frame = build_frame(
                sample,
                self.monitor.window,
                spark_width=self._sparks.spark_width if self._sparks is not None else 60,
                findings=findings,
                memory=memory,
                log_tail=tail,
                self_cpu_percent=cpu,
                self_rss_bytes=rss,
                tick_cost_s=cost,
                log_error=log_error,
            )
        self.post_message(FrameReady(frame))
        return wait

    def _window_lock(self) -> contextlib.AbstractContextManager[Any]:
        """The Monitor's tick lock: the runner may push a sample while this thread reads the window."""
        return self.monitor.tick_lock

    def replay_record(self, t: float) -> Any | None:
        """The recorded phase a replayed sample belongs to (by its start and finish time), if any."""
        for r in self.replay_records:
            start, end = getattr(r, "started_at", None), getattr(r, "finished_at", None)
            if start is not None and end is not None and start.timestamp() <= t <= end.timestamp():
                return r
        return None

    def _diag_context(self) -> DiagnosisContext:
        runner = self.runner
        ctx = runner.context() if runner is not None and self.runstate.active else self.runstate.context()
        follower = self._follower
        if follower is not None and ctx.memory is None:
            ctx = dataclasses.replace(ctx, memory=follower.report)
        return ctx

    def _read_log(self) -> tuple[Any, str | None, tuple[str, ...]]:
        """Follow the current phase's serve log (memory report, errors, tail); worker thread only."""
        path = self.runstate.log_path
        if path != self._follower_path:
            from probes.serverlog import LogFollower

            self._follower = LogFollower(path) if path is not None else None
            self._follower_path = path
        follower = self._follower
        if follower is None:
            return None, None, ()
        follower.poll()
        errors = follower.errors
        log_error = mask_text(errors[-1].message) if errors else None  # never draw a secret the log printed
        tail = tuple(map(mask_text, follower.tail(max(1, self._log_rows())))) if self.log_visible else ()
        return follower.report, log_error, tail

    def _log_rows(self) -> int:
        log = self._log_widget
        return (log.content_size.height if log is not None else 0) or 20

    # ------------------------------------------------------------------ messages (UI thread)
    def on_frame_ready(self, message: FrameReady) -> None:
        if self._stop.is_set():  # quitting: the widgets may already be gone
            return
        frame = message.frame
        self.frame = frame
        self.frames += 1
        with self.batch_update():
            self.panels.gpu.show(frame)
            self.panels.engine.show(frame, self.runstate.server)
            self.panels.sparks.show(frame)
            self.panels.diagnosis.show((*self.chain, *frame.findings))
            self.panels.phase.show(self._phase_status(), now=frame.t)
            self.panels.status.show(cpu=frame.self_cpu_percent, rss=frame.self_rss_bytes)
            if self.log_visible:
                self.panels.log.show(frame.log_tail, self._log_source())

    def on_runner_event_message(self, message: RunnerEventMessage) -> None:
        ev = message.event
        self.runstate = run_state.apply(self.runstate, ev, self.specs)
        if ev.kind == "phase_done" and ev.record is not None:
            self.chain = chain_findings(ev.record)
        cancelled = getattr(ev.record, "status", None) == "cancelled"
        if ev.kind in ("phase_failed", "error") and not cancelled:
            title = f"phase {ev.phase_name or ev.phase_index}"
            self.notify(ev.message or ev.kind, title=title, severity="error", markup=False)
        elif ev.kind == "session_done":
            self.notify(f"{ev.message} — press c to compare", title="plan finished", markup=False)
        self._show_phase()
        self.panels.engine.show(server=self.runstate.server)

    def on_replay_ended(self, message: ReplayEnded) -> None:
        self._show_phase()
        self.notify("end of the recording", title="replay", markup=False)

    @on(Worker.StateChanged)
    def worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures surface: a title and a one-line message, never a crash."""
        worker = event.worker
        if event.state == WorkerState.ERROR:
            error = worker.error
            self.notify(
                f"{type(error).__name__}: {error}",
                title=f"{worker.name or worker.group} failed",
                severity="error",
                timeout=10,
                markup=False,
            )
            if worker.group == "runner":
                self.runstate = dataclasses.replace(
                    self.runstate,
                    phase=dataclasses.replace(self.runstate.phase, running=False, note=f"error: {error}"),
                    server=ServerStatus("died", str(error))
                    if self.runstate.server.state == "starting"
                    else self.runstate.server,
                    active=False,
                    bench_running=False,
                )
                self._show_phase()
            elif worker.group == "poll" and not self._stop.is_set():
                self.set_timer(self.interval_s, self.start_polling)  # a probe bug must not freeze the screen
        elif (
            event.state in (WorkerState.SUCCESS, WorkerState.CANCELLED)
            and worker.group == "runner"
            and self.runstate.active
        ):
            self.runstate = dataclasses.replace(
                self.runstate, phase=dataclasses.replace(self.runstate.phase, running=False), active=False
            )
            self._show_phase()

    # ------------------------------------------------------------------ drawing helpers
    def _phase_status(self) -> Any:
        st = self.runstate.phase
        if self.replay is None:
            if st.mode == "attach" and st.server is None:
                url = self.monitor.engine_url
                note = f"to {url}" if url else "no server URL: start one with b / r"
                return dataclasses.replace(st, note=note)
            return st
        record = self.replay_record(self.frame.t) if self.frame is not None else None
        if record is not None:
            st = dataclasses.replace(
                st,
                server=record.server.get("name"),
                traffic=record.traffic.get("name"),
                phase_index=list(self.replay_records).index(record),
                phase_total=len(self.replay_records),
            )
        return dataclasses.replace(
            st,
            mode="replay",
            replay_pos=self.replay.position,
            replay_len=len(self.replay),
            replay_speed=self.replay_speed,
            replay_paused=self.replay_paused,
            note="end of recording" if self.replay.finished else st.note,
        )

    def _note(self, note: str) -> None:
        self.runstate = dataclasses.replace(
            self.runstate, phase=dataclasses.replace(self.runstate.phase, note=note)
        )
        self._show_phase()

    def _log_source(self) -> str | None:
        return str(self.runstate.log_path) if self.runstate.log_path else None

    def _show_phase(self) -> None:
        self.panels.phase.show(self._phase_status(), now=self.frame.t if self.frame else None)

    def _show_keys(self) -> None:
        keys = [(k.key, k.description) for k in self.key_help() if k.enabled]
        self.panels.status.show(keys=keys)

    def key_help(self) -> list[KeyHelp]:
        """The main screen's live bindings (what the footer and the help screen show)."""
        out: list[KeyHelp] = []
        seen: set[str] = set()
        for ab in self.screen.active_bindings.values():
            b = ab.binding
            ident = b.id or b.action
            if not b.show or ident in seen or b.system:
                continue
            seen.add(ident)
            key = b.key_display or self.get_key_display(b)
            out.append(KeyHelp(key, b.description, b.tooltip, ab.enabled))
        return out

    # ------------------------------------------------------------------ action gating
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in REPLAY_ACTIONS:
            return self.replay is not None
        if action in RUNNER_ACTIONS:
            return self.replay is None
        return True

    # ------------------------------------------------------------------ actions: presets and runs
    def action_switch_role(self, role: str) -> None:
        servers = self.catalog.by_role(role, self.device)  # type: ignore[arg-type]
        if not servers:
            msg = f"no {self.device} server preset with role {role!r}"
            self.notify(msg, title="presets", severity="warning", markup=False)
            return
        self.launch([self._spec(servers[0], None)], f"serve {servers[0].name}")

    def action_pick(self) -> None:
        self.push_screen(PickerScreen(self.catalog, self.device), self._picked)

    def _picked(self, pick: Pick | None) -> None:
        if pick is None:
            return
        if pick.kind == "server":
            chosen = self.catalog.get_server(pick.name)
            self.launch([self._spec(chosen, None)], f"serve {chosen.name}")
        elif pick.kind == "traffic":
            traffic = self.catalog.get_traffic(pick.name)
            server = self._current_server()
            if server is None:
                self.notify(
                    "pick a server first (b / a / t or p)", title="traffic", severity="warning", markup=False
                )
                return
            self.launch([self._spec(server, traffic)], f"run {traffic.name} on {server.name}")
        else:
            self.plan = self.catalog.get_plan(pick.name)  # r now runs this plan too
            self.action_run_plan()

    def action_run_plan(self) -> None:
        plan = self.plan or self.catalog.plans.get(self.device)
        if plan is None:
            msg = f"no plan: pass --plan or add a {self.device!r} plan"
            self.notify(msg, title="plan", severity="warning", markup=False)
            return
        phases = self.catalog.plan_phases(plan)
        specs = [self._spec(server, traffic, ph.name) for ph, server, traffic in phases]
        self.launch(specs, f"run plan ({len(specs)} phases)", baseline_index=plan.baseline_index)

    def action_stop(self) -> None:
        if self.runner is None or not self.runstate.active:
            self.notify("nothing is running", title="stop", markup=False)
            return
        self.runner.cancel()
        self._note("stopping")

    def _spec(
        self, server: ServerPreset, traffic: TrafficPreset | None, label: str | None = None
    ) -> PhaseSpec:
        from presets.runner import PhaseSpec

        name = label or (f"{server.name}-{traffic.name}" if traffic else server.name)
        return PhaseSpec(server, traffic, name)

    def _current_server(self) -> ServerPreset | None:
        name = self.runstate.phase.server
        if name and name in self.catalog.servers:
            return self.catalog.servers[name]
        servers = self.catalog.by_role("baseline", self.device)
        return servers[0] if servers else None

    def launch(self, specs: Sequence[PhaseSpec], what: str, *, baseline_index: int = 0) -> None:
        """Start phases; when a phase runs, ask first, then stop it before starting these."""
        if self.runner_factory is None:
            self.notify(
                "attach mode has no runner: start `llmopt-tui demo` or pass --vllm",
                title=what,
                severity="warning",
                markup=False,
            )
            return
        if self.runstate.active:
            question = f"A phase is running ({self.runstate.phase.server}). Stop it and {what}?"

            def answered(yes: bool | None) -> None:
                if yes:
                    self.run_worker(
                        self._replace(specs, baseline_index),
                        group="switch",
                        exclusive=True,
                        exit_on_error=False,
                        name="switch",
                    )

            self.push_screen(ConfirmScreen("Replace the running phase?", question), answered)
            return
        self._start_runner(specs, baseline_index)

    async def _replace(self, specs: Sequence[PhaseSpec], baseline_index: int) -> None:
        await self.stop_runner()
        self._start_runner(specs, baseline_index)

    async def stop_runner(self, timeout_s: float = 60.0) -> None:
        """Cancel the runner and wait (off the UI thread) until its children are gone."""
        runner, worker = self.runner, self.runner_worker
        if runner is not None:
            runner.cancel()
        if worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING):
            with contextlib.suppress(Exception):  # wait() re-raises the worker's error: reported already
                await asyncio.wait_for(worker.wait(), timeout_s)

    def _start_runner(self, specs: Sequence[PhaseSpec], baseline_index: int) -> None:
        assert self.runner_factory is not None
        runner = self.runner_factory(on_event=self._on_runner_event, baseline_index=baseline_index)
        self.runner = runner
        self.specs = tuple(specs)
        self.runstate = run_state.launched(
            dataclasses.replace(self.runstate, phase=dataclasses.replace(self.runstate.phase, mode="plan")),
            self.specs,
        )
        self.chain = ()
        phases = list(specs)
        self.runner_worker = self.run_worker(
            lambda: runner.run(phases), thread=True, group="runner", name="runner", exit_on_error=False
        )
        self._show_phase()

    def _on_runner_event(self, event: RunnerEvent) -> None:
        """Called in the runner's thread: hand over as a message, nothing else."""
        self.post_message(RunnerEventMessage(event))

    # ------------------------------------------------------------------ actions: views
    def action_compare(self) -> None:
        from tui.screens.comparison import ComparisonScreen

        records = self.replay_records or self.runstate.records
        baseline = self.plan.baseline_index if self.plan is not None else 0
        self.push_screen(ComparisonScreen(records, baseline))

    def action_toggle_log(self) -> None:
        self.log_visible = not self.log_visible
        log = self.panels.log
        log.display = self.log_visible
        self.panels.diagnosis.display = not self.log_visible
        log.show((), self._log_source())
        if self.replay is None:
            self._wake.set()  # fetch the tail now rather than at the next tick

    def action_details(self) -> None:
        self.push_screen(FindingsScreen(self.panels.diagnosis.findings))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_help()))

    def action_replay_pause(self) -> None:
        if self.replay is None:
            return
        if self.replay.finished:
            self.replay.position = 0
            self.monitor.window = type(self.monitor.window)()
        self.replay_paused = not self.replay_paused
        self._wake.set()
        self._show_phase()

    def action_replay_speed(self, factor: float) -> None:
        self.replay_speed = min(64.0, max(0.25, self.replay_speed * factor))
        self._wake.set()
        self._show_phase()

    async def action_quit(self) -> None:
        """Quit, stopping every child the runner started (the server must not outlive the screen)."""
        self._stop.set()
        self._wake.set()
        if self.runner is not None and self.runstate.active:
            self._note("stopping the server before quitting")
        await self.stop_runner()
        self.exit()

    # ------------------------------------------------------------------ replay records
    @staticmethod
    def _load_replay_records(replay: ReplaySource) -> list[Any]:
        from presets.results import load_session

        try:
            return load_session(replay.path.parent)
        except Exception:
            return []
