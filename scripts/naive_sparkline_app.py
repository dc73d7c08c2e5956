"""Baseline for the CPU benchmark: the naive way to draw six live sparklines in Textual.

Six ``textual.widgets.Sparkline`` widgets with labels, fed random data at 1 Hz by assigning a new list
(what the Textual docs suggest). The benchmark runs it next to ``llmopt-tui`` at the same terminal size and
compares the CPU % of one core each costs; reference/vllm.md measured 5.8-7.3 % for this app.

    python scripts/naive_sparkline_app.py [--interval 1.0] [--points 120]
"""

from __future__ import annotations

import argparse
import random
from collections import deque

from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Label, Sparkline

NAMES = ("total TPS", "output TPS", "TTFT mean", "TTFT p99", "ITL mean", "ITL p99")


class NaiveSparklineApp(App[None]):
    CSS = """
    Horizontal { height: 3; }
    Label { width: 14; }
    Sparkline { width: 1fr; }
    """

    def __init__(self, interval_s: float = 1.0, points: int = 120, seed: int = 0) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.rng = random.Random(seed)
        self.data = [deque([0.0] * points, maxlen=points) for _ in NAMES]

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            for i, name in enumerate(NAMES):
                with Horizontal():
                    yield Label(name)
                    yield Sparkline(list(self.data[i]), id=f"s{i}")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(self.interval_s, self.tick)

    def tick(self) -> None:
        for i, series in enumerate(self.data):
            series.append(self.rng.random() * 100.0)
            self.query_one(f"#s{i}", Sparkline).data = list(series)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--points", type=int, default=120)
    args = parser.parse_args()
    NaiveSparklineApp(args.interval, args.points).run()


if __name__ == "__main__":
    main()
