"""Pilot tests of the live screen: panels, every key, state changes, worker failures, message collapsing.

The Monitor is real (Window, Diagnoser, HostProbe, NvmlGpuSource); only the GPUs (FakeNvml) and the engine
(EngineSamples parsed from recorded /metrics pages) are stand-ins. Runner keys with a real PlanRunner are
in test_runner_keys.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from probes.diagnosis import Finding
from probes.monitor import Monitor
from probes.replay import ReplaySource
from probes.types import EngineSample
from tests.app.conftest import make_app, wait_for
from tests.app.support import SESSION, ScriptedEngine, gpu_source, make_monitor
from tui.app import FrameReady, LlmoptApp, ReplayEnded, chain_findings
from tui.screens.comparison import ComparisonScreen
from tui.screens.findings import FindingsScreen
from tui.screens.help import HelpScreen
from tui.widgets.diagnosis import DiagnosisPanel
from tui.widgets.engine import EnginePanel
from tui.widgets.gpu import GpuPanel
from tui.widgets.logtail import LogTail
from tui.widgets.phasebar import PhaseBar
from tui.widgets.sparks import SparkPanel
from tui.widgets.status import StatusLine


def text(app: LlmoptApp, kind: Any) -> str:
    return str(app.query_one(kind).plain)


async def test_live_screen_shows_gpu_engine_and_numbers() -> None:
    app = make_app(n_gpus=1)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.frames >= 4, what="4 frames")
        sparks = text(app, SparkPanel)
        # The e2e harness looks for these: labels and a number next to them.
        assert re.search(r"TPS total\s+\d", sparks), sparks
        assert re.search(r"TPS output\s+\d", sparks)
        assert re.search(r"TTFT mean\s+[\d.]+ms", sparks)
        gpu = text(app, GpuPanel)
        assert "0 NVIDIA L40S" in gpu and "P0" in gpu
        assert "300/350W" in gpu and "util 97%" in gpu
        assert "VRAM" in gpu and "/46.0G" in gpu
        assert "SM " in gpu and "MHz" in gpu
        engine = text(app, EnginePanel)
        assert "models/tiny-qwen3" in engine and "● up" in engine
        assert "run 2  wait 6" in engine  # the recorded mid-run page of the starved CPU server
        assert engine.splitlines()[2].endswith(" 80.0%")  # KV usage
        assert "max conc 3.00x" in engine and "KV cap 768 tok" in engine  # cache_config_info (0.32+)
        assert "mon 1.5% 80M" in text(app, StatusLine)
        assert app.query_one(GpuPanel).border_title == "GPU"


async def test_no_gpu_shows_reason_host_and_tree() -> None:
    app = make_app(n_gpus=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.frames >= 2)
        panel = app.query_one(GpuPanel)
        assert panel.border_title == "Host (no GPU)"
        lines = panel.plain.splitlines()
        assert lines[0].startswith("no GPU: NVML")
        assert "host CPU" in lines[1] and "cores" in lines[1]
        assert lines[2].startswith("RAM")
        assert "server tree" in panel.plain  # no server pid known: says so rather than inventing one


async def test_absent_metrics_read_nr_never_zero() -> None:
    app = make_app(monitor=make_monitor(1, ScriptedEngine(fail_after=0)))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.frames >= 2)
        engine = text(app, EnginePanel)
        assert "● unreachable" in engine
        assert "run n/r" in engine and "wait n/r" in engine and "preempt n/r" in engine
        assert "n/r" in engine.splitlines()[2]  # the KV line
        assert "connection refused" in engine
        sparks = text(app, SparkPanel)
        assert re.search(r"TPS total\s+n/r", sparks) and re.search(r"KV usage\s+n/r", sparks)
        assert not re.search(r"TPS total\s+0", sparks)


async def test_frames_collapse_when_the_ui_is_behind() -> None:
    app = make_app(autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.poll_once()
        await pilot.pause()
        first = app.frames
        frame = app.frame
        assert frame is not None
        for _ in range(5):  # five frames queued back to back: the UI draws only the newest
            app.post_message(FrameReady(frame))
        await pilot.pause()
        assert app.frames == first + 1
    assert FrameReady(frame).can_replace(FrameReady(frame))
    assert not FrameReady(frame).can_replace(ReplayEnded())


async def test_unchanged_frame_repaints_nothing() -> None:
    app = make_app(autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.poll_once()
        await pilot.pause()
        frame = app.frame
        assert frame is not None
        panels = [app.query_one(k) for k in (GpuPanel, EnginePanel, SparkPanel, DiagnosisPanel)]
        before = [p.repaints for p in panels]
        app.post_message(FrameReady(frame))  # the same data again
        await pilot.pause()
        assert [p.repaints for p in panels] == before


async def test_help_is_built_from_live_bindings() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = app.screen.query_one("#help-text").plain  # type: ignore[attr-defined]
        for key, desc in (
            ("b", "base"),
            ("a", "AWQ"),
            ("t", "tuned"),
            ("p", "pick"),
            ("r", "run"),
            ("s", "stop"),
            ("c", "compare"),
            ("l", "log"),
            ("d", "details"),
            ("q", "quit"),
        ):
            assert re.search(rf"^\s*{key}  {desc}", shown, re.M), (key, shown)
        assert "pause" not in shown and "faster" not in shown  # replay keys are off outside replay
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def test_every_binding_has_an_id_and_a_description() -> None:
    from tui.screens.comparison import ComparisonScreen
    from tui.screens.confirm import ConfirmScreen
    from tui.screens.picker import PickerScreen

    for owner in (LlmoptApp, HelpScreen, FindingsScreen, ComparisonScreen, ConfirmScreen, PickerScreen):
        for b in owner.BINDINGS:
            assert not isinstance(b, tuple), owner
            assert b.id and b.description, (owner.__name__, b)
    ids = [b.id for b in LlmoptApp.BINDINGS]  # type: ignore[union-attr]
    assert len(ids) == len(set(ids))


async def test_footer_lists_keys_and_fits_80_columns() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.frames >= 1)
        status = text(app, StatusLine)
        assert len(status) == 78 or len(status) <= 80
        assert status.startswith("b base a AWQ t tuned p pick r run s stop")
        assert status.rstrip().endswith("mon 1.5% 80M")


async def test_l_toggles_the_log_tail() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        log, diag = app.query_one(LogTail), app.query_one(DiagnosisPanel)
        assert not log.display and diag.display
        await pilot.press("l")
        assert log.display and not diag.display
        assert "no server log" in log.plain
        await pilot.press("l")
        assert not log.display and diag.display


async def test_log_tail_follows_the_phase_log(tmp_path: Path) -> None:
    import dataclasses

    log = tmp_path / "serve-0.log"
    log.write_text("INFO starting\n(EngineCore pid=1) ERROR boom: CUDA out of memory\n")
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.runstate = dataclasses.replace(app.runstate, log_path=log)
        await pilot.press("l")
        await wait_for(pilot, lambda: "boom" in app.query_one(LogTail).plain, what="log tail")
        panel = app.query_one(LogTail)
        assert panel.lines[-1][0][1] == "lp--crit"  # ERROR lines stand out (and say ERROR without colour)
        assert app.frame is not None and app.frame.log_error is not None


async def test_d_shows_finding_details() -> None:
    app = make_app(autostart=False)  # no poll thread: the panel keeps exactly this finding
    async with app.run_test(size=(80, 24)) as pilot:
        f = Finding(
            "kv_bound",
            "warn",
            "KV cache is the limit",
            ("KV usage 97 %", "waiting 4"),
            "Free memory for the KV cache.",
            "doc 1 step 4",
        )
        app.query_one(DiagnosisPanel).show((f,))
        await pilot.press("d")
        assert isinstance(app.screen, FindingsScreen)
        shown = app.screen.query_one("#findings-text").plain  # type: ignore[attr-defined]
        assert "WARN KV cache is the limit" in shown
        assert "• KV usage 97 %" in shown and "advice Free memory" in shown and "doc 1 step 4" in shown
        await pilot.press("escape")
        assert not isinstance(app.screen, FindingsScreen)


async def test_diagnosis_orders_by_severity_and_counts() -> None:
    app = make_app(autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        info = Finding("a", "info", "an info", (), "", "")
        crit = Finding("b", "crit", "server died", ("exit 1",), "", "")
        app.query_one(DiagnosisPanel).show((info, crit))
        await pilot.pause()
        lines = app.query_one(DiagnosisPanel).plain.splitlines()
        assert lines[0] == "CRIT server died" and lines[1].strip() == "exit 1" and lines[2] == "INFO an info"
        assert app.query_one(DiagnosisPanel).border_subtitle == "2 findings · d details"


async def test_c_with_no_phases_says_so() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("c")
        assert isinstance(app.screen, ComparisonScreen)
        assert "No finished phases yet" in app.screen.query_one("#compare-empty").plain  # type: ignore[attr-defined]
        await pilot.press("escape")
        assert not isinstance(app.screen, ComparisonScreen)


async def test_attach_mode_keys_explain_there_is_no_runner() -> None:
    app = make_app(n_gpus=0)
    async with app.run_test(size=(80, 24)) as pilot:
        for key in ("b", "a", "t", "r"):
            await pilot.press(key)
        assert [n[2] for n in app.notes] == ["warning"] * 4
        assert all("attach mode has no runner" in n[1] for n in app.notes)
        await pilot.press("s")
        assert app.notes[-1][:2] == ("stop", "nothing is running")


async def test_poll_failure_is_reported_and_polling_resumes() -> None:
    class Flaky(ScriptedEngine):
        def scrape(self) -> EngineSample:
            if self.ticks == 1:
                self.ticks += 1
                raise RuntimeError("scrape bug")
            return super().scrape()

    app = make_app(monitor=Monitor(Flaky(), gpu_source(1), __import__("probes.host").host.HostProbe()))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: any("scrape bug" in n[1] for n in app.notes), what="failure note")
        title, message, severity = next(n for n in app.notes if "scrape bug" in n[1])
        assert title == "poll failed" and message == "RuntimeError: scrape bug" and severity == "error"
        seen = app.frames
        await wait_for(pilot, lambda: app.frames > seen + 1, what="polling resumed")


async def test_quit_key_exits() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.frames >= 1)
        await pilot.press("q")
        await pilot.pause()
        assert app._exit
    assert app.return_code == 0


# ------------------------------------------------------------------------------------------ replay
def replay_app(speed: float = 1.0) -> Any:
    return make_app(n_gpus=0, replay=ReplaySource(SESSION), replay_speed=speed, interval_s=1.0)


async def test_replay_keys_pause_and_speed() -> None:
    app = replay_app(speed=4.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.frames >= 2)
        bar = app.query_one(PhaseBar)
        assert bar.plain.startswith("REPLAY ▶ playing ×4")
        await pilot.press("space")
        assert app.replay_paused and "⏸ paused" in bar.plain
        pos = app.replay.position
        await pilot.pause(0.3)
        assert app.replay.position == pos  # paused: the play head stays
        await pilot.press("plus")
        assert app.replay_speed == 8.0 and "×8" in bar.plain
        await pilot.press("minus", "minus")
        assert app.replay_speed == 2.0
        await pilot.press("space")
        await wait_for(pilot, lambda: app.replay.position > pos, what="resumed")
        await pilot.press("b")  # runner keys are off in replay
        assert app.notes == []


async def test_replay_plays_to_the_end_and_compares_the_recorded_phases() -> None:
    app = replay_app(speed=64.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.replay.finished and app.replay_paused, timeout=8, what="end")
        await pilot.pause()
        assert "end of recording" in app.query_one(PhaseBar).plain
        assert ("replay", "end of the recording", "information") in app.notes
        sparks = text(app, SparkPanel)
        assert re.search(r"waiting\s+\d", sparks)
        diag = text(app, DiagnosisPanel)
        assert "KV cache is the limit" in diag  # the starved run's diagnosis, replayed through the rules
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, ComparisonScreen)
        table = screen.query_one(DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        total = next(r for r in rows if r[0] == "Total TPS (tok/s)")
        assert total[1] == "2,458" and total[2] == "3,642 (x1.48)"
        assert str(table.columns[next(iter(table.columns))].label) == "metric"


def test_chain_findings_come_from_the_phase_record() -> None:
    from presets.results import load_session

    records = load_session(SESSION)
    assert chain_findings(records[0]) == ()
    chain = chain_findings(records[1])
    assert [f.id for f in chain] == ["change_gain"] and chain[0].severity == "info"
    assert "x1.48" in chain[0].title


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
async def test_layout_fits_small_and_large_terminals(size: tuple[int, int]) -> None:
    app = make_app(n_gpus=2)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.frames >= 2)
        sparks = app.query_one(SparkPanel)
        rows = 1 if size[1] < 32 else 3
        assert len(sparks.lines) == 8 * rows
        assert sparks.content_size.height >= 8 * rows
        for kind in (PhaseBar, GpuPanel, EnginePanel, SparkPanel, DiagnosisPanel, StatusLine):
            w = app.query_one(kind)
            assert w.region.right <= size[0] and w.region.bottom <= size[1], kind
        assert app.query_one(StatusLine).region.y == size[1] - 1
        gpu = text(app, GpuPanel)
        assert "0 NVIDIA L40S" in gpu and "1 NVIDIA L40S" in gpu
