"""Snapshot tests (pytest-textual-snapshot): the main screen at 80x24 and 120x40, the comparison and help
screens, fed from the deterministic recorded session tests/fixtures/sessions/cpu-demo (make_fixture.py).

Every sample is pushed synchronously (no poll thread, fixed monitor CPU/RSS), so the pictures depend on the
data alone. Update after an intended change with: pytest tests/app/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from probes.replay import ReplaySource
from tests.app.conftest import make_app
from tests.app.support import SESSION


def recorded_app(n_gpus: int = 0) -> Any:
    return make_app(n_gpus=n_gpus, replay=ReplaySource(SESSION), autostart=False)


async def play_all(pilot: Pilot[Any]) -> None:
    app: Any = pilot.app
    for _ in range(len(app.replay)):
        app.poll_once()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_main_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(recorded_app(), terminal_size=size, run_before=play_all)


def test_comparison_screen(snap_compare: Any) -> None:
    async def before(pilot: Pilot[Any]) -> None:
        await play_all(pilot)
        await pilot.press("c")
        await pilot.pause(0.2)  # plotext draws at the final size once layout settled

    assert snap_compare(recorded_app(), terminal_size=(100, 34), run_before=before)


def test_help_screen(snap_compare: Any) -> None:
    async def before(pilot: Pilot[Any]) -> None:
        await play_all(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(recorded_app(), terminal_size=(80, 24), run_before=before)
