"""Bottom line: the keys (from the live bindings) and what this monitor itself costs (CPU %, RSS).

A monitor that slows the server it measures is a bug, so its own cost is always on screen.
"""

from __future__ import annotations

from collections.abc import Sequence

from tui import format as fmt
from tui.widgets.lines import Line, LinePanel, Span, line


def status_line(keys: Sequence[tuple[str, str]], cpu: float | None, rss: int | None, width: int) -> Line:
    right = f" mon {fmt.num(cpu, '.1f', '%')} {fmt.gib(rss)}"
    room = max(0, width - len(right))
    spans: list[Span] = []
    used = 0
    for key, desc in keys:
        piece = len(key) + 1 + len(desc) + 1
        if used + piece > room:
            break
        spans += [(key, "lp--key"), (f" {desc} ", "lp--dim")]
        used += piece
    spans.append((" " * (room - used), ""))
    spans.append((right, "lp--label"))
    return line(*spans)


class StatusLine(LinePanel):
    DEFAULT_CSS = "StatusLine { height: 1; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._keys: tuple[tuple[str, str], ...] = ()
        self._cpu: float | None = None
        self._rss: int | None = None

    def show(
        self,
        keys: Sequence[tuple[str, str]] | None = None,
        cpu: float | None = None,
        rss: int | None = None,
    ) -> None:
        if keys is not None:
            self._keys = tuple(keys)
        if cpu is not None:
            self._cpu = cpu
        if rss is not None:
            self._rss = rss
        self.set_lines([status_line(self._keys, self._cpu, self._rss, max(10, self.content_size.width))])

    def rebuild(self) -> None:
        self.show()
