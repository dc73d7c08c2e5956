"""A line-API panel: content is a tuple of lines of (text, role) spans, redrawn only where it changed.

Why not Static: ``Static.update`` re-parses markup and re-renders the whole widget every tick. Here a
tick that changes one number repaints one line, and a tick that changes nothing repaints nothing.
Roles name component classes, so colours come from the theme (tcss), never from code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

Span = tuple[str, str]  # (text, role); role "" = the widget's own style, else a component class
Line = tuple[Span, ...]

ROLES = (
    "lp--dim",
    "lp--label",
    "lp--value",
    "lp--ok",
    "lp--warn",
    "lp--crit",
    "lp--accent",
    "lp--key",
    "lp--bar-weights",
    "lp--bar-kv",
    "lp--bar-other",
    "lp--bar-used",
    "lp--bar-free",
    "lp--spark",
)


def line(*spans: Span | str) -> Line:
    """Build a line; a bare string is a span in the default role."""
    return tuple((s, "") if isinstance(s, str) else s for s in spans)


def line_text(ln: Line) -> str:
    return "".join(text for text, _ in ln)


class LinePanel(Widget):
    """Base for every live panel (see module docstring)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = set(ROLES)

    DEFAULT_CSS = """
    LinePanel { height: auto; }
    LinePanel > .lp--dim { color: $text-muted; }
    LinePanel > .lp--label { color: $text-muted; }
    LinePanel > .lp--value { color: $text; text-style: bold; }
    LinePanel > .lp--ok { color: $text-success; }
    LinePanel > .lp--warn { color: $text-warning; text-style: bold; }
    LinePanel > .lp--crit { color: $text-error; text-style: bold reverse; }
    LinePanel > .lp--accent { color: $text-accent; }
    LinePanel > .lp--key { color: $text-accent; text-style: bold; }
    LinePanel > .lp--bar-weights { color: $primary; }
    LinePanel > .lp--bar-kv { color: $success; }
    LinePanel > .lp--bar-other { color: $warning; }
    LinePanel > .lp--bar-used { color: $primary; }
    LinePanel > .lp--bar-free { color: $text-disabled; }
    LinePanel > .lp--spark { color: $accent; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: tuple[Line, ...] = ()
        self._role_styles: dict[str, Style] = {}
        self._built_size: Size | None = None
        self.repaints = 0  # lines repainted so far (tests assert that unchanged ticks cost nothing)

    @property
    def lines(self) -> tuple[Line, ...]:
        return self._lines

    @property
    def plain(self) -> str:
        """The panel's text without styles (tests and the log view read it)."""
        return "\n".join(line_text(ln) for ln in self._lines)

    def rebuild(self) -> None:
        """Recompute the lines for the current size (subclasses that lay out by size override this)."""

    def on_resize(self, event: events.Resize) -> None:
        self.rebuild()

    def _check_size(self) -> None:
        # A border change (breakpoint classes) can change the content size without a Resize event.
        if self.content_size != self._built_size:
            self.rebuild()

    def set_lines(self, lines: Sequence[Line]) -> bool:
        """Replace the content; repaint only the lines that differ. Returns whether anything changed."""
        self._built_size = self.content_size
        new = tuple(lines)
        old = self._lines
        if new == old:
            return False
        self._lines = new
        if len(new) != len(old) and self.styles.height is not None and self.styles.height.is_auto:
            self.repaints += len(new)
            self.refresh(layout=True)
            return True
        width = max(1, self.content_size.width)
        dirty = [
            Region(0, y, width, 1)
            for y in range(max(len(new), len(old)))
            if y >= len(new) or y >= len(old) or new[y] != old[y]
        ]
        self.repaints += len(dirty)
        if dirty:
            self.refresh(*dirty)
        return True

    def _style(self, role: str) -> Style:
        style = self._role_styles.get(role)
        if style is None:
            style = self.rich_style if not role else self.get_component_rich_style(role)
            self._role_styles[role] = style
        return style

    def notify_style_update(self) -> None:
        self._role_styles.clear()
        super().notify_style_update()
        if self.is_mounted:
            self.call_after_refresh(self._check_size)

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        if y >= len(self._lines):
            return Strip.blank(width, self._style(""))
        segments = [Segment(text, self._style(role)) for text, role in self._lines[y] if text]
        return Strip(segments).crop(0, width)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)
