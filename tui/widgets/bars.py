"""Horizontal bars made of spans. Each part has its own character so a bar reads without colour."""

from __future__ import annotations

from collections.abc import Sequence

from tui.widgets.lines import Span

CHARS = {
    "lp--bar-weights": "█",
    "lp--bar-kv": "▓",
    "lp--bar-other": "▒",
    "lp--bar-used": "█",
    "lp--bar-free": "░",
}


def split_bar(parts: Sequence[tuple[float, str]], total: float, width: int) -> list[Span]:
    """``[(amount, role), ...]`` out of ``total`` as ``width`` cells, the rest shown free.

    Cells are given by cumulative rounding so parts never sum past the width.
    """
    width = max(0, width)
    spans: list[Span] = []
    if total <= 0 or width == 0:
        return [("░" * width, "lp--bar-free")] if width else []
    acc = 0.0
    used_cells = 0
    for amount, role in parts:
        acc += max(0.0, amount)
        end = min(width, round(acc / total * width))
        n = end - used_cells
        if n > 0:
            spans.append((CHARS.get(role, "█") * n, role))
            used_cells = end
    if used_cells < width:
        spans.append(("░" * (width - used_cells), "lp--bar-free"))
    return spans


def meter(fraction: float | None, width: int, role: str = "lp--bar-used") -> list[Span]:
    """A 0..1 gauge; None draws a dim dotted bar (not reported, not empty)."""
    if fraction is None:
        return [("·" * max(0, width), "lp--dim")]
    return split_bar([(min(1.0, max(0.0, fraction)), role)], 1.0, width)
