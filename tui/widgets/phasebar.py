"""Phase bar: what runs now (server preset, traffic), how far it got, for how long; or the replay position."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tui import format as fmt
from tui.widgets.bars import meter
from tui.widgets.lines import Line, LinePanel, Span

Mode = Literal["attach", "plan", "replay"]


@dataclass(frozen=True, slots=True)
class PhaseStatus:
    """The app's idea of the current phase, built from runner events on the UI thread."""

    mode: Mode = "attach"
    server: str | None = None  # server preset name
    traffic: str | None = None  # traffic preset name (None: serve only)
    phase_index: int | None = None  # 0-based
    phase_total: int | None = None
    started_t: float | None = None  # sample time the phase started
    requests_done: float | None = None
    requests_total: int | None = None
    running: bool = False
    note: str = ""  # the last runner message / replay state
    replay_pos: int | None = None
    replay_len: int | None = None
    replay_speed: float = 1.0
    replay_paused: bool = False


def _sep() -> Span:
    return (" │ ", "lp--dim")


def phase_line(st: PhaseStatus, now: float | None, width: int) -> Line:
    spans: list[Span] = []
    if st.mode == "replay":
        state = "⏸ paused" if st.replay_paused else "▶ playing"
        spans += [("REPLAY ", "lp--accent"), (state, "lp--value"), (f" ×{st.replay_speed:g}", "lp--value")]
        if st.replay_pos is not None:
            total = f"/{st.replay_len}" if st.replay_len is not None else ""
            spans += [_sep(), (f"sample {st.replay_pos}{total}", "")]
        if st.server is not None:
            where = f"phase {st.phase_index + 1}/{st.phase_total}" if st.phase_index is not None else "phase"
            spans += [_sep(), (where, "lp--label"), (" ", ""), (st.server, "lp--value")]
            if st.traffic:
                spans += [(" + ", "lp--dim"), (st.traffic, "lp--value")]
    else:
        if st.phase_index is not None:
            total = f"/{st.phase_total}" if st.phase_total else ""
            spans += [("phase ", "lp--label"), (f"{st.phase_index + 1}{total}", "lp--value"), _sep()]
        if st.mode == "attach" and st.server is None:
            spans += [("attached", "lp--accent")]  # the note says to what
        else:
            spans += [("server ", "lp--label"), (st.server or "-", "lp--value"), _sep()]
            spans += [("traffic ", "lp--label"), (st.traffic or "serve only", "lp--value")]
        if st.requests_total:
            done = st.requests_done or 0.0
            frac = min(1.0, done / st.requests_total)
            spans += [_sep(), *meter(frac, 10), (f" {frac * 100:3.0f}%", "lp--value")]
        if st.started_t is not None and now is not None:
            spans += [_sep(), (fmt.duration(now - st.started_t), "lp--value")]
    if st.note:
        spans += [_sep(), (st.note, "lp--dim")]
    # Cut to width, keeping whole spans while they fit.
    out: list[Span] = []
    used = 0
    for text, role in spans:
        if used + len(text) > width:
            out.append((fmt.fit(text, width - used), role))
            break
        out.append((text, role))
        used += len(text)
    return tuple(out)


class PhaseBar(LinePanel):
    DEFAULT_CSS = "PhaseBar { height: 1; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._status = PhaseStatus()
        self._now: float | None = None

    @property
    def status(self) -> PhaseStatus:
        return self._status

    def show(self, status: PhaseStatus | None = None, now: float | None = None) -> None:
        if status is not None:
            self._status = status
        if now is not None:
            self._now = now
        self.set_lines([phase_line(self._status, self._now, max(10, self.content_size.width))])

    def rebuild(self) -> None:
        self.show()
