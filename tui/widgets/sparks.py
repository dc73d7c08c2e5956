"""All sparklines in one line-API widget: label, current value, history.

One widget instead of eight Sparkline widgets: one layout node, one refresh per tick, strips built
from plain strings (see tui.sparkdraw). The worker reads ``spark_width`` to ask the window for just
as many points as fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tui import format as fmt
from tui.sparkdraw import draw
from tui.view import SPARKS, Frame, SparkSpec
from tui.widgets.lines import Line, LinePanel, line

LABEL_W = 10
VALUE_W = 9


def value_text(spec: SparkSpec, value: float | None) -> str:
    if spec.unit == "tps":
        return fmt.tps(value)
    if spec.unit == "s":
        return fmt.seconds_ms(value)
    if spec.unit == "frac":
        return fmt.pct(value, 1)
    return fmt.count(value)


IDLE = "—"


def spark_lines(
    series: Mapping[str, Sequence[float | None]] | None,
    width: int,
    height: int,
    specs: tuple[SparkSpec, ...] = SPARKS,
    reported: frozenset[str] = frozenset(),
) -> list[Line]:
    """``rows`` text rows per metric, where rows = height // number of metrics (at least 1).

    An empty current value reads "n/r" when the server does not expose the metric and "—" when it does
    but nothing happened in the last tick (no request finished: a latency has no value, not a zero).
    """
    rows = max(1, height // len(specs)) if height > 0 else 1
    spark_w = max(1, width - LABEL_W - VALUE_W - 2)
    out: list[Line] = []
    for spec in specs:
        values = series.get(spec.metric, ()) if series is not None else ()
        current = values[-1] if values else None
        value = IDLE if current is None and spec.metric in reported else value_text(spec, current)
        role = "lp--value" if current is not None else "lp--dim"
        drawn = draw(values, spark_w, rows, spec.top)
        for i, row in enumerate(drawn):
            if i == 0:
                out.append(
                    line(
                        (f"{spec.label:<{LABEL_W}}", "lp--label"),
                        (f"{value:>{VALUE_W}} ", role),
                        (" ", ""),
                        (row, "lp--spark"),
                    )
                )
            else:
                out.append(line(" " * (LABEL_W + VALUE_W + 2), (row, "lp--spark")))
    return out


class SparkPanel(LinePanel):
    """Throughput, latency and queue history (``Window.series``)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Live"
        self._series: dict[str, tuple[float | None, ...]] | None = None
        self._reported: frozenset[str] = frozenset()
        self.spark_width = 60  # read by the poll worker (a plain int: safe to read from a thread)

    def show(self, frame: Frame) -> None:
        self._series = dict(frame.series)
        self._reported = frame.reported
        self.rebuild()

    def rebuild(self) -> None:
        size = self.content_size
        self.spark_width = max(1, size.width - LABEL_W - VALUE_W - 2)
        width = max(LABEL_W + VALUE_W + 3, size.width)
        self.set_lines(spark_lines(self._series, width, size.height, reported=self._reported))
