"""Runner events → what the screen says about the run. A pure reducer, so every transition is testable.

The app keeps one ``RunState`` (replaced, never mutated) and the phase list it launched; each RunnerEvent
yields the next state. The poll worker reads the state's ``context()`` for the diagnosis rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from probes.diagnosis import DiagnosisContext
from tui.widgets.engine import ServerStatus
from tui.widgets.phasebar import Mode, PhaseStatus

if TYPE_CHECKING:
    from presets.schema import ServerPreset, TrafficPreset


class EventLike(Protocol):
    """The fields of presets.runner.RunnerEvent this reducer reads."""

    @property
    def kind(self) -> str: ...
    @property
    def phase_index(self) -> int: ...
    @property
    def phase_name(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def log_path(self) -> Path | None: ...
    @property
    def record(self) -> Any: ...
    @property
    def t(self) -> float: ...


class SpecLike(Protocol):
    """The fields of presets.runner.PhaseSpec this reducer reads."""

    @property
    def server(self) -> ServerPreset | None: ...
    @property
    def traffic(self) -> TrafficPreset | None: ...
    @property
    def label(self) -> str: ...


@dataclass(frozen=True, slots=True)
class RunState:
    phase: PhaseStatus = field(default_factory=PhaseStatus)
    server: ServerStatus = field(default_factory=ServerStatus)
    bench_running: bool = False
    active: bool = False  # a runner is working (serving or benching)
    client_concurrency: int | None = None
    fixed_output_len: bool = False
    tensor_parallel: int | None = None
    log_path: Path | None = None
    records: tuple[Any, ...] = ()  # PhaseRecord, in finishing order

    def context(self) -> DiagnosisContext:
        return DiagnosisContext(
            phase_running=self.bench_running,
            client_concurrency=self.client_concurrency if self.bench_running else None,
            fixed_output_len=self.fixed_output_len,
            server_state=self.server.state,
            server_error=self.server.reason if self.server.state == "died" else None,
            tensor_parallel=self.tensor_parallel,
        )


def initial(mode: Mode) -> RunState:
    return RunState(phase=PhaseStatus(mode=mode))


def launched(state: RunState, specs: Sequence[SpecLike]) -> RunState:
    """A new runner took over: forget the previous run's phase, keep finished records."""
    first = specs[0] if specs else None
    return dataclasses.replace(
        state,
        phase=dataclasses.replace(
            state.phase,
            server=first.server.name if first and first.server else "attached",
            traffic=first.traffic.name if first and first.traffic else None,
            phase_index=None,
            phase_total=len(specs),
            started_t=None,
            requests_done=None,
            requests_total=None,
            running=True,
            note="starting",
        ),
        server=ServerStatus("starting"),
        active=True,
        bench_running=False,
    )


def apply(state: RunState, ev: EventLike, specs: Sequence[SpecLike]) -> RunState:
    """The state after one runner event."""
    spec = specs[ev.phase_index] if 0 <= ev.phase_index < len(specs) else None
    ph = state.phase
    kind = ev.kind
    note = ev.message or kind.replace("_", " ")
    if kind == "phase_start":
        traffic = spec.traffic if spec is not None else None
        return dataclasses.replace(
            state,
            phase=dataclasses.replace(
                ph,
                server=spec.server.name if spec and spec.server else ph.server,
                traffic=traffic.name if traffic else None,
                phase_index=ev.phase_index,
                phase_total=len(specs) or ph.phase_total,
                started_t=ev.t,
                requests_done=None,
                requests_total=None,
                running=True,
                note=note,
            ),
            active=True,
            client_concurrency=traffic.max_concurrency if traffic else None,
            fixed_output_len=bool(traffic.ignore_eos) if traffic else False,
            tensor_parallel=spec.server.tensor_parallel_size if spec and spec.server else None,
            log_path=None,
        )
    if kind == "server_starting":
        return dataclasses.replace(
            state,
            phase=dataclasses.replace(ph, note=note),
            server=ServerStatus("starting"),
            log_path=ev.log_path or state.log_path,
        )
    if kind == "server_ready":
        return dataclasses.replace(
            state,
            phase=dataclasses.replace(ph, note=note),
            server=ServerStatus("ready"),
            log_path=ev.log_path or state.log_path,
        )
    if kind == "bench_start":
        total = spec.traffic.num_prompts if spec is not None and spec.traffic is not None else None
        return dataclasses.replace(
            state,
            phase=dataclasses.replace(ph, requests_done=0.0, requests_total=total, note=note),
            bench_running=True,
        )
    if kind == "bench_progress":
        progress = getattr(ev, "progress", None)
        if progress is None:
            return state
        done, total = progress
        phase = dataclasses.replace(ph, requests_done=float(done), requests_total=total or ph.requests_total)
        return dataclasses.replace(state, phase=phase)
    if kind == "bench_done":
        done = float(ph.requests_total) if ph.requests_total else ph.requests_done
        return dataclasses.replace(
            state, phase=dataclasses.replace(ph, requests_done=done, note=note), bench_running=False
        )
    if kind == "phase_done":
        records = (*state.records, ev.record) if ev.record is not None else state.records
        return dataclasses.replace(
            state, phase=dataclasses.replace(ph, note=note), records=records, bench_running=False
        )
    if kind == "phase_failed":
        records = (*state.records, ev.record) if ev.record is not None else state.records
        if getattr(ev.record, "status", None) == "cancelled":  # the user stopped it: not a death
            return dataclasses.replace(
                state, phase=dataclasses.replace(ph, note="cancelled"), records=records, bench_running=False
            )
        reason = getattr(ev.record, "error", None) or ev.message or None
        return dataclasses.replace(
            state,
            phase=dataclasses.replace(ph, note=f"failed: {reason}" if reason else "failed"),
            server=ServerStatus("died", reason),
            records=records,
            bench_running=False,
        )
    if kind == "server_stopped":
        server = state.server if state.server.state == "died" else ServerStatus("stopped")
        return dataclasses.replace(state, phase=dataclasses.replace(ph, note=note), server=server)
    if kind in ("session_done", "cancelled"):
        return dataclasses.replace(
            state,
            phase=dataclasses.replace(ph, running=False, note=note),
            active=False,
            bench_running=False,
        )
    if kind == "error":
        return dataclasses.replace(
            state,
            phase=dataclasses.replace(ph, running=False, note=f"error: {ev.message}"),
            server=ServerStatus("died", ev.message) if state.server.state == "starting" else state.server,
            active=False,
            bench_running=False,
        )
    return dataclasses.replace(state, phase=dataclasses.replace(ph, note=note))
