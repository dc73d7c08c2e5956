"""Sparkline drawing as plain strings, kept apart from the widget (as Textual's own sparkline does).

Eighth blocks ``▁▂▃▄▅▆▇█`` give 8 levels per text row; a line ``rows`` tall has ``8 * rows`` levels.
A missing value (None) is a blank column, a reported zero is the lowest block: "not reported" and
"zero" must look different.
"""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"


def levels(values: Sequence[float | None], rows: int, top: float | None = None) -> list[int | None]:
    """Each value's height in eighths of a row (1..8*rows), None stays None.

    ``top`` is the value drawn full height (None: the largest value seen; an all-zero series is flat).
    """
    rows = max(1, rows)
    full = 8 * rows
    present = [v for v in values if v is not None]
    scale = top if top is not None and top > 0 else max(present, default=0.0)
    out: list[int | None] = []
    for v in values:
        if v is None:
            out.append(None)
        elif scale <= 0 or v <= 0:
            out.append(1)
        else:
            out.append(max(1, min(full, round(v / scale * full))))
    return out


def draw(values: Sequence[float | None], width: int, rows: int = 1, top: float | None = None) -> list[str]:
    """The last ``width`` values as ``rows`` strings of exactly ``width`` cells, top row first.

    Shorter histories are right-aligned (the newest value is always at the right edge).
    """
    width = max(0, width)
    rows = max(1, rows)
    tail = list(values[-width:]) if width else []
    lv = levels(tail, rows, top)
    pad = width - len(lv)
    lines: list[str] = []
    for row in range(rows - 1, -1, -1):
        base = 8 * row
        cells = [" "] * pad
        for level in lv:
            cells.append(" " if level is None else BLOCKS[max(0, min(8, level - base))])
        lines.append("".join(cells))
    return lines
