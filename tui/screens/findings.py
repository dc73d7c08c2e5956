"""Finding details (key d): every finding with all its evidence, the advice and where the idea comes from."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from tui.widgets.diagnosis import ROLE, ordered
from tui.widgets.lines import Line, LinePanel, line

if TYPE_CHECKING:
    from probes.diagnosis import Finding


def detail_lines(findings: Sequence[Finding], width: int = 76) -> list[Line]:
    if not findings:
        return [line(("No findings: nothing looks wrong, or there is no data yet.", "lp--dim"))]
    out: list[Line] = []
    for f in ordered(findings):
        out.append(line((f"{f.severity.upper():<4}", ROLE.get(f.severity, "")), " ", (f.title, "lp--value")))
        for ev in f.evidence:
            out.append(line(("  • ", "lp--dim"), ev))
        for i, text in enumerate(textwrap.wrap(f.advice, max(20, width - 9))):
            out.append(line(("  advice " if i == 0 else "         ", "lp--label"), text))
        if f.source:
            out.append(line(("  source ", "lp--label"), (f.source, "lp--dim"), (f"  [{f.id}]", "lp--dim")))
        out.append(line())
    return out


class FindingsScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="findings.close"),
        Binding("d", "close", "Close", id="findings.close2", show=False),
        Binding("q", "close", "Close", id="findings.close3", show=False),
    ]

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__()
        self._findings = tuple(findings)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="findings-box", classes="modal-box"):
            yield LinePanel(id="findings-text")

    def on_mount(self) -> None:
        box = self.query_one("#findings-box", VerticalScroll)
        box.border_title = f"Findings ({len(self._findings)})"
        box.border_subtitle = "↑↓ scroll · esc close"
        box.focus()
        width = max(40, self.app.size.width - 8)
        self.query_one("#findings-text", LinePanel).set_lines(detail_lines(self._findings, width))

    def action_close(self) -> None:
        self.dismiss(None)
