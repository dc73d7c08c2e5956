"""Engine panel: model, scheduler gauges, KV usage, preemptions, prefix hits, capacity and server state.

It lives outside the GPU panel on purpose: a GPU-less host still has an engine to watch.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from tui import format as fmt
from tui.view import EngineView, Frame, ServerState
from tui.widgets.bars import meter
from tui.widgets.lines import Line, LinePanel, Span, line


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """The managed server's life as the runner reports it ("none" in attach mode)."""

    state: ServerState = "none"
    reason: str | None = None


_STATE_ROLE = {"ready": "lp--ok", "up": "lp--ok", "starting": "lp--warn", "died": "lp--crit"}


def state_badge(server: ServerStatus, engine: EngineView) -> Span:
    """What to call the server right now: the runner's word when it runs one, else the scrape result."""
    state = server.state if server.state != "none" else engine.scrape_state
    if state == "none":
        state = "no server"
    return (f"● {state}", _STATE_ROLE.get(state, "lp--dim"))


def _alert(value: float | None) -> str:
    """Queued requests or preemptions above zero are worth the eye."""
    return "lp--warn" if (value or 0) > 0 else "lp--value"


def engine_lines(
    e: EngineView, server: ServerStatus, width: int, height: int, log_error: str | None = None
) -> list[Line]:
    """The panel's lines; a dead server leads with why (the log's error, then the runner's)."""
    badge = state_badge(server, e)
    model = fmt.fit(e.model or (e.url or "no engine"), max(1, width - len(badge[0]) - 1))
    pad = " " * max(1, width - len(model) - len(badge[0]))
    kv_pct = fmt.pct(e.kv_usage, 1)
    cap = fmt.num(e.max_concurrency, ".2f", "x")
    kv_tok = f"{e.kv_tokens:,}" if e.kv_tokens is not None else fmt.NR
    dev = f" ({e.kv_device})" if e.kv_device else ""
    lines: list[Line] = [
        line((model, "lp--value"), pad, badge),
        line(
            ("run ", "lp--label"),
            (fmt.count(e.running), "lp--value"),
            ("  wait ", "lp--label"),
            (fmt.count(e.waiting), _alert(e.waiting)),
            ("  preempt ", "lp--label"),
            (fmt.num(e.preemptions_ps, ".1f", "/s"), _alert(e.preemptions_ps)),
        ),
        line(
            ("KV ", "lp--label"),
            *meter(e.kv_usage, max(4, width - 4 - len(kv_pct))),
            " ",
            (kv_pct, "lp--value"),
        ),
        line(
            ("prefix hit ", "lp--label"),
            (fmt.pct(e.prefix_hit_rate), "lp--value"),
            ("  max conc ", "lp--label"),
            (cap, "lp--value"),
        ),
        line(("KV cap ", "lp--label"), (f"{kv_tok} tok", "lp--value"), (dev, "lp--dim")),
    ]
    if server.state == "died":
        why = [text for text in (log_error, server.reason) if text]
        wrapped = [w for text in why for w in textwrap.wrap(text, max(10, width))] or ["no reason given"]
        return [lines[0], *(line((w, "lp--crit")) for w in wrapped), *lines[1:]][: max(1, height)]
    if e.error:
        lines.append(line((fmt.fit(e.error, width), "lp--warn")))
    elif e.url:
        lines.append(line((fmt.fit(e.url, width), "lp--dim")))
    return lines[: max(1, height)]


class EnginePanel(LinePanel):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Engine"
        self._frame: Frame | None = None
        self._server = ServerStatus()

    def show(self, frame: Frame | None = None, server: ServerStatus | None = None) -> None:
        if frame is not None:
            self._frame = frame
        if server is not None:
            self._server = server
        self.rebuild()

    def rebuild(self) -> None:
        if self._frame is None:
            return
        size = self.content_size
        f = self._frame
        self.set_lines(engine_lines(f.engine, self._server, max(20, size.width), size.height, f.log_error))
