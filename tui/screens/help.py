"""Help (key ?): built from the bindings that are live on the main screen, so it can never go stale."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from tui.widgets.lines import Line, LinePanel, line


@dataclass(frozen=True, slots=True)
class KeyHelp:
    key: str
    description: str
    detail: str
    enabled: bool = True


def help_lines(keys: Sequence[KeyHelp], width: int = 76) -> list[Line]:
    """Key, description, then the longer detail wrapped under itself; disabled keys dimmed."""
    kw = max((len(k.key) for k in keys), default=1)
    dw = max((len(k.description) for k in keys), default=1)
    indent = kw + dw + 4
    out: list[Line] = [
        line(("Keys", "lp--value"), ("  (dimmed: not available right now)", "lp--dim")),
        line(),
    ]
    for k in keys:
        role = "lp--key" if k.enabled else "lp--dim"
        detail = k.detail if k.detail and k.detail != k.description else ""
        wrapped = textwrap.wrap(detail, max(10, width - indent)) or [""]
        out.append(
            line(
                (f"{k.key:>{kw}}", role),
                "  ",
                (f"{k.description:<{dw}}", "lp--value"),
                "  ",
                (wrapped[0], "lp--dim"),
            )
        )
        out += [line(" " * indent, (more, "lp--dim")) for more in wrapped[1:]]
    out += [line(), line(("escape / ? / q closes this screen", "lp--dim"))]
    return out


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_help", "Close", id="help.close"),
        Binding("question_mark", "dismiss_help", "Close", id="help.close2", show=False),
        Binding("q", "dismiss_help", "Close", id="help.close3", show=False),
    ]

    def __init__(self, keys: Sequence[KeyHelp]) -> None:
        super().__init__()
        self._keys = tuple(keys)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="modal-box"):
            yield LinePanel(id="help-text")

    def on_mount(self) -> None:
        box = self.query_one("#help-box")
        box.border_title = "Help"
        width = max(30, min(110, self.app.size.width * 9 // 10) - 4)
        self.query_one("#help-text", LinePanel).set_lines(help_lines(self._keys, width))

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
