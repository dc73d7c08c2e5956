"""Diagnosis panel: findings by severity, each with the numbers that made it fire.

Severity is spelled out (CRIT / WARN / INFO), not only coloured, so it reads under NO_COLOR.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tui import format as fmt
from tui.widgets.lines import Line, LinePanel, line

if TYPE_CHECKING:
    from probes.diagnosis import Finding

RANK = {"crit": 0, "warn": 1, "info": 2}
ROLE = {"crit": "lp--crit", "warn": "lp--warn", "info": "lp--accent"}


def ordered(findings: Sequence[Finding]) -> list[Finding]:
    """Most severe first; stable otherwise (the caller's order: chain findings lead within a severity)."""
    return sorted(findings, key=lambda f: RANK.get(f.severity, 3))


def finding_lines(findings: Sequence[Finding], width: int, height: int) -> list[Line]:
    """One title line per finding, then evidence under each while lines remain."""
    if not findings:
        return [line(("no findings: nothing to diagnose yet", "lp--dim"))]
    items = ordered(findings)
    budget = max(1, height)
    if len(items) > budget:
        shown, hidden = items[: budget - 1], len(items) - budget + 1
    else:
        shown, hidden = items, 0
    spare = budget - len(shown) - (1 if hidden else 0)
    out: list[Line] = []
    for f in shown:
        tag = f"{f.severity.upper():<4}"
        title = fmt.fit(f.title, max(1, width - 5))
        out.append(line((tag, ROLE.get(f.severity, "")), " ", (title, "lp--value")))
        for ev in f.evidence:
            if spare <= 0:
                break
            out.append(line("     ", (fmt.fit(ev, max(1, width - 5)), "lp--dim")))
            spare -= 1
    if hidden:
        out.append(line((f"+{hidden} more (d: details)", "lp--dim")))
    return out


class DiagnosisPanel(LinePanel):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Diagnosis"
        self._findings: tuple[Finding, ...] = ()

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self._findings

    def show(self, findings: Sequence[Finding]) -> None:
        self._findings = tuple(findings)
        self.rebuild()

    def rebuild(self) -> None:
        size = self.content_size
        n = len(self._findings)
        self.border_subtitle = f"{n} finding{'s' if n != 1 else ''} · d details" if n else ""
        self.set_lines(finding_lines(self._findings, max(20, size.width), size.height))
