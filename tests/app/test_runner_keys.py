"""The keys that start and stop servers (b / a / t, p, r, s, q), with the real PlanRunner and real child
processes: the stand-in vllm (stub_vllm.py) serves /health and a recorded /metrics page on a free port.
No vLLM here (unit tests must not start one); tests/integration does the same with the real server."""

from __future__ import annotations

from pathlib import Path

import psutil
from textual.widgets import DataTable, OptionList

from tests.app.conftest import cpu_catalog, make_app, runner_factory, wait_for
from tests.app.support import make_monitor
from tui.screens.comparison import ComparisonScreen
from tui.screens.confirm import ConfirmScreen
from tui.screens.picker import PickerScreen
from tui.widgets.engine import EnginePanel
from tui.widgets.phasebar import PhaseBar


def gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def app_with_runner(tmp_path: Path, stub: Path, *, die: bool = False):  # type: ignore[no-untyped-def]
    monitor = make_monitor(0)
    monitor.set_engine(None)  # nothing to watch until a server is up
    return make_app(
        n_gpus=0,
        monitor=monitor,
        catalog=cpu_catalog(die=die),
        factory=runner_factory(monitor, stub, tmp_path / "results"),
        interval_s=0.1,
    )


async def test_preset_keys_serve_replace_after_confirm_and_stop(tmp_path: Path, stub_vllm: Path) -> None:
    app = app_with_runner(tmp_path, stub_vllm)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("b")
        await wait_for(pilot, lambda: app.runstate.server.state == "ready", what="baseline ready")
        first = app.runner.server.pid if app.runner and app.runner.server else None
        assert first is not None and not gone(first)
        bar = app.query_one(PhaseBar).plain
        assert "server cpu-starved" in bar and "traffic serve only" in bar
        await wait_for(pilot, lambda: "● ready" in app.query_one(EnginePanel).plain, what="engine ready")
        await wait_for(pilot, lambda: "max conc 3.00x" in app.query_one(EnginePanel).plain, what="log report")

        await pilot.press("a")  # a phase runs: the app asks before replacing it
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen) and app.runstate.phase.server == "cpu-starved"
        await pilot.press("a")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: app.runstate.phase.server == "cpu-roomy" and app.runstate.server.state == "ready",
            what="roomy ready",
        )
        assert gone(first)  # the old server was stopped before the new one started
        second = app.runner.server.pid if app.runner and app.runner.server else None

        await pilot.press("s")
        await wait_for(pilot, lambda: not app.runstate.active, what="stopped")
        assert gone(second)
        assert app.runstate.server.state == "stopped"


async def test_r_runs_the_plan_then_c_compares(tmp_path: Path, stub_vllm: Path) -> None:
    app = app_with_runner(tmp_path, stub_vllm)
    app.plan = app.catalog.get_plan("cpu")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: app.runstate.phase.phase_total == 2, what="plan launched")
        await wait_for(
            pilot,
            lambda: len(app.runstate.records) == 2 and not app.runstate.active,
            timeout=20,
            what="plan done",
        )
        assert [r.status for r in app.runstate.records] == ["ok", "ok"]
        assert "plan finished" in [n[0] for n in app.notes]
        assert [f.id for f in app.chain] == ["change_noop"]  # same recorded bench twice: no change
        assert app.runstate.phase.requests_done == 8.0 and app.runstate.phase.requests_total == 8
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, ComparisonScreen)
        seen = app.frames
        await wait_for(pilot, lambda: app.frames > seen + 1, what="frames while comparing")  # no crash
        assert app.screen is screen
        table = screen.query_one(DataTable)
        heads = [str(c.label) for c in table.columns.values()]
        assert heads == ["metric", "cpu-starved-quick (base)", "cpu-roomy-quick"]
        total = [str(c) for c in table.get_row_at(2)]
        assert total[0] == "Total TPS (tok/s)" and total[2].endswith("(x1.00)")


async def test_server_death_shows_died_with_reason(tmp_path: Path, stub_vllm: Path) -> None:
    app = app_with_runner(tmp_path, stub_vllm, die=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        await wait_for(pilot, lambda: app.runstate.server.state == "died", what="died")
        await wait_for(pilot, lambda: not app.runstate.active, what="runner finished")

        def flowing() -> str:
            return " ".join(app.query_one(EnginePanel).plain.split())

        await wait_for(pilot, lambda: "out of memory" in flowing(), what="the log's reason")
        engine = app.query_one(EnginePanel).plain
        first, *rest = engine.splitlines()
        assert first.endswith("● died")
        why = " ".join(" ".join(rest).split())
        assert why.index("CUDA out of memory") < why.index("vllm serve exited with code 1")  # log first
        assert any(n[2] == "error" and "exited with code 1" in n[1] for n in app.notes)


async def test_p_picks_a_server_and_q_stops_it_before_quitting(tmp_path: Path, stub_vllm: Path) -> None:
    app = app_with_runner(tmp_path, stub_vllm)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("p")
        picker = app.screen
        assert isinstance(picker, PickerScreen)
        options = picker.query_one(OptionList)
        options.highlighted = options.get_option_index("server:cpu-tuned")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.runstate.server.state == "ready", what="tuned ready")
        assert app.runstate.phase.server == "cpu-tuned"
        pid = app.runner.server.pid if app.runner and app.runner.server else None
        await pilot.press("q")
        await wait_for(pilot, lambda: gone(pid), timeout=15, what="server stopped by quit")
