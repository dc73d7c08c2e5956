"""Comparison (key c): the phase table with ratios vs the baseline, and TPS / TTFT per phase as bar charts.

Metrics are rows and phases are columns, as the documents lay out their tables: three to five phases fit
in 80 columns, twelve metrics would not. A missing number stays missing ("—"), in the table and the chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable
from textual_plotext import PlotextPlot

from presets.results import COLUMNS, Comparison, build_comparison
from tui import format as fmt
from tui.widgets.diagnosis import ROLE
from tui.widgets.lines import Line, LinePanel, line


def comparison_of(records: Sequence[Any], baseline_index: int) -> Comparison:
    base = baseline_index if 0 <= baseline_index < len(records) else 0
    return build_comparison(list(records), base)


def table_rows(comp: Comparison) -> tuple[list[str], list[list[str]]]:
    """(column headers, rows): the first column names the metric, then one column per phase."""
    heads = ["metric"] + [
        f"{r.name} (base)" if i == comp.baseline_index else r.name for i, r in enumerate(comp.rows)
    ]
    rows = [
        ["server", *(r.server or "—" for r in comp.rows)],
        ["traffic", *(r.traffic or "—" for r in comp.rows)],
    ]
    if any(r.status != "ok" for r in comp.rows):
        rows.append(["status", *(r.status for r in comp.rows)])
    for col in COLUMNS:
        cells = [comp.cell(r, col, i != comp.baseline_index) for i, r in enumerate(comp.rows)]
        rows.append([col.title, *cells])
    return heads, rows


def chart_points(comp: Comparison, key: str) -> tuple[list[str], list[float]]:
    """Phases that have a value for ``key`` (the others are left out, not drawn as zero)."""
    names: list[str] = []
    values: list[float] = []
    for i, r in enumerate(comp.rows):
        v = r.values.get(key)
        if v is not None:
            names.append(f"{i + 1}:{r.server or r.name}"[:14])  # short: long labels collide on the axis
            values.append(v)
    return names, values


def why_lines(records: Sequence[Any], width: int) -> list[Line]:
    """The runner's between-phase explanation (the causal chain) for each phase that has one."""
    from tui.app import chain_findings  # the app module owns the record → Finding mapping

    out: list[Line] = []
    for r in records:
        for f in chain_findings(r):
            out.append(line((f"{f.severity.upper():<4} ", ROLE.get(f.severity, "")), (f.title, "lp--value")))
            if f.evidence:
                out.append(line("     ", (fmt.fit(f.evidence[0], max(10, width - 5)), "lp--dim")))
    return out


class ComparisonScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="compare.close"),
        Binding("c", "close", "Back", id="compare.close2", show=False),
        Binding("q", "close", "Back", id="compare.close3", show=False),
    ]

    def __init__(self, records: Sequence[Any], baseline_index: int = 0) -> None:
        super().__init__()
        self._records = tuple(records)
        self.comparison = comparison_of(records, baseline_index)

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-box"):
            if not self.comparison.rows:
                yield LinePanel(id="compare-empty")
            else:
                yield DataTable(id="compare-table", zebra_stripes=True, cursor_type="row")
                yield LinePanel(id="compare-why")
                with Horizontal(id="compare-charts"):
                    yield PlotextPlot(id="chart-tps")
                    yield PlotextPlot(id="chart-ttft")
            yield LinePanel(id="compare-help")

    def on_mount(self) -> None:
        self.query_one("#compare-help", LinePanel).set_lines(
            [line(("esc", "lp--key"), (" back  ", "lp--dim"), ("↑↓←→", "lp--key"), (" move", "lp--dim"))]
        )
        if not self.comparison.rows:
            self.query_one("#compare-empty", LinePanel).set_lines(
                [line(("No finished phases yet: press r to run the plan, then come back with c.", "lp--dim"))]
            )
            return
        table = self.query_one(DataTable)
        heads, rows = table_rows(self.comparison)
        table.add_columns(*heads)
        for row in rows:
            table.add_row(*row)
        table.border_title = "Phases (ratios vs the baseline)"
        self.query_one("#compare-why", LinePanel).set_lines(why_lines(self._records, self.app.size.width - 2))
        table.focus()
        self._chart("#chart-tps", "total_tps", "Total TPS (tok/s)")
        self._chart("#chart-ttft", "ttft_mean_ms", "Mean TTFT (ms)")

    def _chart(self, selector: str, key: str, title: str) -> None:
        plot = self.query_one(selector, PlotextPlot)
        names, values = chart_points(self.comparison, key)
        plt = plot.plt
        plt.clear_data()
        plt.title(title)
        if values:
            plt.bar(names, values)
        plot.refresh()

    def action_close(self) -> None:
        self.dismiss(None)
