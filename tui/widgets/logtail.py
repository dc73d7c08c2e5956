"""Log tail (key l): the newest lines of the current phase's ``vllm serve`` log, errors highlighted."""

from __future__ import annotations

from collections.abc import Sequence

from tui import format as fmt
from tui.widgets.lines import Line, LinePanel, line


def tail_lines(lines: Sequence[str], width: int, height: int, source: str | None) -> list[Line]:
    if not lines:
        what = f"no log lines yet ({source})" if source else "no server log: no server started from here"
        return [line((what, "lp--dim"))]
    out: list[Line] = []
    for text in list(lines)[-max(1, height) :]:
        text = text.rstrip("\n").replace("\t", "    ")
        role = "lp--crit" if ("ERROR" in text or "Traceback" in text) else ""
        role = role or ("lp--warn" if "WARNING" in text else "")
        out.append(line((fmt.fit(text, width), role)))
    return out


class LogTail(LinePanel):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Server log"
        self._raw: tuple[str, ...] = ()
        self._source: str | None = None

    def show(self, lines: Sequence[str], source: str | None = None) -> None:
        self._raw = tuple(lines)
        if source is not None:
            self._source = source
        self.rebuild()

    def rebuild(self) -> None:
        size = self.content_size
        self.border_subtitle = self._source or ""
        self.set_lines(tail_lines(self._raw, max(20, size.width), size.height, self._source))
