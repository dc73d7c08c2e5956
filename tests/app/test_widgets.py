"""The pure parts of the TUI: drawing, formatting, panel lines, the view model and the run-state reducer.
Exact strings: a panel that says the wrong number (or 0 for "not reported") must fail here."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from presets.results import build_comparison, load_session
from presets.runner import PhaseSpec, RunnerEvent
from presets.schema import ServerPreset, TrafficPreset
from probes.diagnosis import Finding
from probes.types import GpuDevice, GpuSnapshot, HostSample, MemoryReport, ProcessTree, Sample
from probes.window import Window
from tests.app.support import SESSION, grown, page
from tui import format as fmt
from tui import state
from tui.screens.comparison import chart_points, table_rows
from tui.screens.help import KeyHelp, help_lines
from tui.sparkdraw import draw, levels
from tui.view import EngineView, build_frame, engine_view
from tui.widgets.bars import meter, split_bar
from tui.widgets.diagnosis import finding_lines
from tui.widgets.engine import ServerStatus, engine_lines
from tui.widgets.gpu import gpu_panel_lines
from tui.widgets.lines import Line, line_text
from tui.widgets.logtail import tail_lines
from tui.widgets.phasebar import PhaseStatus, phase_line
from tui.widgets.sparks import spark_lines
from tui.widgets.status import status_line

GIB = 1024**3


def texts(lines: list[Line]) -> list[str]:
    return [line_text(ln) for ln in lines]


# ------------------------------------------------------------------------------------------ sparkdraw
def test_sparkline_blocks_missing_zero_and_scale() -> None:
    assert draw([None, 0.0, 1.0, 2.0, 4.0], 5) == [" ▁▂▄█"]  # None blank, reported 0 the lowest block
    assert draw([4.0], 4) == ["   █"]  # short history: right-aligned, newest at the edge
    assert draw([1.0, 2.0, 3.0], 2) == ["▅█"]  # only what fits; scaled to the visible maximum
    assert draw([0.5], 1, top=1.0) == ["▄"]  # a fixed full scale (KV usage 0..1)
    assert draw([0.0, 0.0], 2) == ["▁▁"]  # all zero: flat, not empty
    assert draw([], 3) == ["   "]


def test_sparkline_multi_row() -> None:
    assert draw([8.0, 4.0, 6.0], 3, rows=2, top=8.0) == ["█ ▄", "███"]
    assert levels([None, 8.0, 1.0], rows=2, top=8.0) == [None, 16, 2]


# ------------------------------------------------------------------------------------------ format
@pytest.mark.parametrize(
    ("func", "value", "expected"),
    [
        (fmt.tps, 1234.4, "1234"),
        (fmt.tps, 56.78, "56.8"),
        (fmt.tps, 8.912, "8.91"),
        (fmt.tps, 12345.0, "12.3k"),
        (fmt.tps, None, "n/r"),
        (fmt.seconds_ms, 0.1044, "104ms"),
        (fmt.seconds_ms, 0.0494, "49.4ms"),
        (fmt.seconds_ms, 0.0019, "1.90ms"),
        (fmt.seconds_ms, 2.3, "2.30s"),
        (fmt.seconds_ms, None, "n/r"),
        (fmt.count, 3.0, "3"),
        (fmt.count, 2.5, "2.5"),
        (fmt.count, None, "n/r"),
        (fmt.duration, 83.0, "1:23"),
        (fmt.duration, 3723.0, "1:02:03"),
    ],
)
def test_format(func: Any, value: float | None, expected: str) -> None:
    assert func(value) == expected


def test_format_sizes_and_fractions() -> None:
    assert fmt.pct(0.729, 1) == "72.9%" and fmt.pct(None) == "n/r"
    assert fmt.gib(41.2 * GIB) == "41.2G" and fmt.gib(512 * 1024**2) == "512M"
    assert fmt.fit("abcdef", 4) == "abc…" and fmt.fit("abc", 4) == "abc" and fmt.fit("x", 0) == ""


# ------------------------------------------------------------------------------------------ bars
def test_split_bar_cells_and_meter() -> None:
    spans = split_bar([(1.0, "lp--bar-weights"), (1.0, "lp--bar-kv")], 4.0, 8)
    assert spans == [("██", "lp--bar-weights"), ("▓▓", "lp--bar-kv"), ("░░░░", "lp--bar-free")]
    assert meter(None, 5) == [("·····", "lp--dim")]  # not reported: dotted, not an empty bar
    assert meter(0.5, 4) == [("██", "lp--bar-used"), ("░░", "lp--bar-free")]
    assert sum(len(t) for t, _ in split_bar([(3.0, "a"), (3.0, "b"), (3.0, "c")], 9.0, 10)) == 10


# ------------------------------------------------------------------------------------------ engine
NONE_ENGINE = EngineView(
    None, "unreachable", "connection refused", None, None, None, None, None, None, None, None, None
)


def test_engine_lines_say_nr_for_absent_metrics() -> None:
    lines = texts(engine_lines(NONE_ENGINE, ServerStatus(), 40, 6))
    assert lines[0].endswith("● unreachable")
    assert lines[1] == "run n/r  wait n/r  preempt n/r"
    assert lines[2].startswith("KV ·") and lines[2].endswith(" n/r")
    assert lines[3] == "prefix hit n/r  max conc n/r"
    assert lines[4] == "KV cap n/r tok"
    assert lines[5] == "connection refused"


def test_engine_lines_show_reported_zeros_and_runner_state() -> None:
    e = replace(
        NONE_ENGINE,
        scrape_state="up",
        error=None,
        model="m",
        running=0.0,
        waiting=0.0,
        kv_usage=0.0,
        preemptions_ps=0.0,
        prefix_hit_rate=0.0,
        max_concurrency=1.76,
        kv_tokens=72064,
        kv_device="GPU",
    )
    lines = texts(engine_lines(e, ServerStatus("starting"), 40, 6))
    assert lines[0].endswith("● starting")  # the runner's word wins over the scrape's "up"
    assert lines[1] == "run 0  wait 0  preempt 0.0/s"
    assert lines[2].endswith(" 0.0%") and lines[3] == "prefix hit 0%  max conc 1.76x"
    assert lines[4] == "KV cap 72,064 tok (GPU)"


def test_engine_lines_lead_with_why_a_server_died() -> None:
    lines = texts(engine_lines(NONE_ENGINE, ServerStatus("died", "exit code 1"), 40, 4, "CUDA out of memory"))
    assert lines[0].endswith("● died") and lines[1:3] == ["CUDA out of memory", "exit code 1"]
    assert len(lines) == 4


def _window(*samples: Sample) -> Window:
    w = Window()
    for s in samples:
        w.push(s)
    return w


def test_engine_view_rates_and_capacity_sources() -> None:
    base = page("vllm-cpu-0.32-loaded.txt")
    a, b = grown(base, 100.0, 1.0), grown(base, 101.0, 2.0)
    w = _window(Sample(100.0, engine=a), Sample(101.0, engine=b))
    view = engine_view(w, b, None)
    assert view.prefix_hit_rate == pytest.approx(896 / 25637)
    assert view.preemptions_ps == 0.0 and view.max_concurrency == 1024.0 and view.kv_tokens == 2097152
    report = MemoryReport(max_concurrency=3.0, kv_tokens=768, kv_device="CPU")
    view = engine_view(w, b, report)
    assert (view.max_concurrency, view.kv_tokens, view.kv_device) == (3.0, 768, "CPU")  # the log wins
    down = replace(b, state="unreachable")
    assert engine_view(w, down, None).running is None and engine_view(w, down, None).prefix_hit_rate is None


def test_build_frame_series_and_finished() -> None:
    base = page("vllm-cpu-0.32-starved-midrun.txt")
    samples = [Sample(100.0 + i, engine=grown(base, 100.0 + i, 1.0 + i)) for i in range(5)]
    frame = build_frame(samples[-1], _window(*samples), spark_width=3)
    assert set(frame.series) >= {"total_tps", "output_tps", "ttft_mean", "kv_usage", "waiting"}
    assert all(len(v) == 3 for v in frame.series.values())
    assert frame.series["total_tps"][-1] == pytest.approx(8719.0 + 4159.0)
    assert frame.finished_total == pytest.approx(5 * sum(base.finished.values()))


# ------------------------------------------------------------------------------------------ gpu
def dev(**kw: Any) -> GpuDevice:
    base: dict[str, Any] = dict(
        index=0,
        name="NVIDIA L40S",
        pstate=0,
        power_w=285.0,
        power_limit_w=350.0,
        util_gpu=97.0,
        mem_used=int(41.2 * GIB),
        mem_total=46 * GIB,
        temperature_c=72.0,
        sm_clock_mhz=2520,
        mem_clock_mhz=9001,
    )
    return GpuDevice(**{**base, **kw})


def test_gpu_block_with_vram_split_from_the_log() -> None:
    snap = GpuSnapshot(0.0, True, devices=(dev(),))
    report = MemoryReport(weights_gib=27.5, kv_memory_gib=11.0)
    lines = gpu_panel_lines(snap, None, report, 50, 10)
    t = texts(lines)
    assert t[0].startswith("0 NVIDIA L40S") and t[0].endswith("P0")
    assert t[1] == "pwr 285/350W  util 97%  72°C"
    assert t[3] == "█weights 27.5G ▓KV 11.0G ▒other 2.7G"
    assert t[4] == "SM 2520MHz  mem 9001MHz"
    roles = [role for _, role in lines[2]]
    assert roles[1:5] == ["lp--bar-weights", "lp--bar-kv", "lp--bar-other", "lp--bar-free"]


def test_gpu_split_only_when_this_gpu_can_hold_it() -> None:
    snap = GpuSnapshot(0.0, True, devices=(dev(mem_used=4 * GIB),))
    t = texts(gpu_panel_lines(snap, None, MemoryReport(weights_gib=27.5, kv_memory_gib=11.0), 50, 10))
    assert not any("weights" in x for x in t)


def test_gpu_tiers_and_missing_fields() -> None:
    many = GpuSnapshot(0.0, True, devices=tuple(dev(index=i) for i in range(8)))
    t = texts(gpu_panel_lines(many, None, None, 40, 6))
    assert len(t) == 6 and t[-1] == "+3 more GPUs (wider / taller terminal)"
    two = GpuSnapshot(0.0, True, devices=(dev(), dev(index=1)))
    assert len(gpu_panel_lines(two, None, None, 56, 7)) == 4  # two lines per GPU when the block won't fit
    bare = GpuSnapshot(0.0, True, devices=(GpuDevice(index=0),))
    t = texts(gpu_panel_lines(bare, None, None, 40, 10))
    assert t[1] == "pwr n/rW  util n/r  n/r" and "VRAM ·" in t[2] and t[2].endswith("n/r/n/r")


def test_no_gpu_lines_show_host_and_tree() -> None:
    host = HostSample(0.0, 23.0, 2, 3 * GIB, 8 * GIB, 1.25, ProcessTree(42, (42, 43), 105.0, int(3.3 * GIB)))
    t = texts(gpu_panel_lines(GpuSnapshot(0.0, False, reason="NVML not found: no driver"), host, None, 40, 6))
    assert t == [
        "no GPU: NVML not found: no driver",
        "host CPU 23% of 2 cores  load 1.25",
        t[2],
        "server pid 42  2 procs",
        "  CPU 105%  RSS 3.3G",
    ]
    assert t[2].startswith("RAM  ") and t[2].endswith("3.0G/8.0G")


# ------------------------------------------------------------------------------------------ others
def test_spark_lines_label_value_and_rows() -> None:
    series = {"total_tps": (100.0, 200.0), "kv_usage": (0.5,)}
    lines = texts(spark_lines(series, 40, 16))
    assert len(lines) == 16  # 8 metrics x 2 rows
    assert lines[0].startswith("TPS total       200 ") and lines[0].endswith(" █")  # 100 is half: bottom row
    assert lines[1].endswith("██")
    kv = lines[12]
    assert kv.startswith("KV usage      50.0%")
    assert texts(spark_lines(None, 40, 8))[2].startswith("TTFT mean       n/r")


def test_diagnosis_lines_budget() -> None:
    fs = [Finding(str(i), "warn", f"w{i}", ("e1", "e2"), "", "") for i in range(4)]
    assert texts(finding_lines(fs, 40, 3)) == ["WARN w0", "WARN w1", "+2 more (d: details)"]
    assert texts(finding_lines(fs[:1], 40, 3)) == ["WARN w0", "     e1", "     e2"]
    assert texts(finding_lines([], 40, 3)) == ["no findings: nothing to diagnose yet"]


def test_status_line_fits_and_keeps_the_cost_visible() -> None:
    keys = [("b", "base"), ("a", "AWQ"), ("q", "quit")]
    t = line_text(status_line(keys, 2.25, 80 * 1024**2, 40))
    assert len(t) == 40 and t.startswith("b base a AWQ q quit") and t.endswith("mon 2.2% 80M")
    t = line_text(status_line(keys, None, None, 20))
    assert len(t) == 20 and t.endswith("mon n/r n/r") and t.startswith("b base ")


def test_phase_line_plan_and_replay() -> None:
    st = PhaseStatus(
        mode="plan",
        server="cpu-roomy",
        traffic="cpu-random",
        phase_index=1,
        phase_total=3,
        started_t=100.0,
        requests_done=50,
        requests_total=200,
    )
    t = line_text(phase_line(st, 183.0, 120))
    assert t == "phase 2/3 │ server cpu-roomy │ traffic cpu-random │ ██░░░░░░░░  25% │ 1:23"
    assert len(line_text(phase_line(st, 183.0, 30))) == 30
    rp = PhaseStatus(mode="replay", replay_pos=5, replay_len=60, replay_speed=2.0, replay_paused=True)
    assert line_text(phase_line(rp, None, 80)) == "REPLAY ⏸ paused ×2 │ sample 5/60"


def test_log_tail_marks_errors() -> None:
    lines = tail_lines(["INFO ok", "WARNING hm", "ERROR bad"], 40, 2, "serve-0.log")
    assert texts(lines) == ["WARNING hm", "ERROR bad"] and [ln[0][1] for ln in lines] == [
        "lp--warn",
        "lp--crit",
    ]
    assert texts(tail_lines([], 40, 2, None)) == ["no server log: no server started from here"]


def test_help_lines_wrap_details() -> None:
    t = texts(
        help_lines([KeyHelp("c", "compare", "a long detail " * 4), KeyHelp("?", "help", "", False)], 40)
    )
    assert t[2].startswith("c  compare  a long detail") and t[3].startswith(" " * 12 + "a long")
    assert t[-3].startswith("?  help")


def test_comparison_rows_and_chart_points() -> None:
    comp = build_comparison(load_session(SESSION))
    heads, rows = table_rows(comp)
    assert heads == ["metric", "cpu-starved-cpu-random (base)", "cpu-roomy-cpu-random"]
    assert rows[2] == ["Total TPS (tok/s)", "2,458", "3,642 (x1.48)"]
    names, values = chart_points(comp, "total_tps")
    assert names == ["1:cpu-starved", "2:cpu-roomy"] and values[1] == pytest.approx(3641.8, 0.01)
    assert chart_points(comp, "weights_gib") == ([], [])  # CPU: no weights line, nothing drawn as 0


# ------------------------------------------------------------------------------------------ run state
@dataclass
class Rec:
    status: str
    error: str | None = None
    findings: tuple[Any, ...] = ()


def ev(kind: str, i: int = 0, **kw: Any) -> RunnerEvent:
    return RunnerEvent(kind, i, "p", kw.pop("message", ""), t=kw.pop("t", 10.0), **kw)  # type: ignore[arg-type]


def test_run_state_walks_a_phase(tmp_path: Path) -> None:
    server = ServerPreset(name="cpu-roomy", model="m", device="cpu", args=["--tensor-parallel-size", "2"])
    traffic = TrafficPreset(name="quick", num_prompts=8, max_concurrency=4, ignore_eos=True)
    specs = [PhaseSpec(server, traffic, "roomy-quick")]
    s = state.launched(state.initial("plan"), specs)
    assert s.active and s.server.state == "starting" and s.phase.phase_total == 1
    s = state.apply(s, ev("phase_start", t=50.0), specs)
    assert (s.phase.server, s.phase.traffic, s.phase.phase_index, s.phase.started_t) == (
        "cpu-roomy",
        "quick",
        0,
        50.0,
    )
    assert s.client_concurrency == 4 and s.fixed_output_len and s.tensor_parallel == 2
    s = state.apply(s, ev("server_starting", log_path=tmp_path / "serve-0.log"), specs)
    assert s.server.state == "starting" and s.log_path == tmp_path / "serve-0.log"
    s = state.apply(s, ev("server_ready"), specs)
    assert s.server.state == "ready" and not s.bench_running
    s = state.apply(s, ev("bench_start", log_path=tmp_path / "bench-0.log"), specs)
    assert s.bench_running and s.phase.requests_total == 8 and s.log_path == tmp_path / "serve-0.log"
    ctx = s.context()
    assert (
        ctx.phase_running
        and ctx.client_concurrency == 4
        and ctx.fixed_output_len
        and ctx.server_state == "ready"
    )
    s = state.apply(s, ev("bench_progress", progress=(3, 8)), specs)
    assert s.phase.requests_done == 3.0
    s = state.apply(s, ev("bench_done"), specs)
    assert not s.bench_running and s.phase.requests_done == 8.0
    s = state.apply(s, ev("phase_done", record=Rec("ok")), specs)
    assert len(s.records) == 1
    s = state.apply(s, ev("server_stopped"), specs)
    assert s.server.state == "stopped"
    s = state.apply(s, ev("session_done", -1, message="1 phase(s) recorded"), specs)
    assert not s.active and not s.phase.running and s.phase.note == "1 phase(s) recorded"


def test_run_state_failure_versus_cancel() -> None:
    server = ServerPreset(name="x", model="m", device="cpu")
    specs = [PhaseSpec(server, None, "x")]
    s = state.apply(state.launched(state.initial("plan"), specs), ev("server_starting"), specs)
    died = state.apply(s, ev("phase_failed", record=Rec("failed", "exit code 1")), specs)
    assert died.server == ServerStatus("died", "exit code 1")
    assert state.apply(died, ev("server_stopped"), specs).server.state == "died"  # a death stays a death
    stopped = state.apply(s, ev("phase_failed", record=Rec("cancelled", "cancelled by the user")), specs)
    assert stopped.server.state == "starting" and stopped.phase.note == "cancelled"
    err = state.apply(s, ev("error", message="boom"), specs)
    assert err.server == ServerStatus("died", "boom") and not err.active


def test_idle_latency_reads_dash_and_absent_metric_reads_nr() -> None:
    """A server that exposes TTFT but finished nothing this tick shows "—"; one without the family, "n/r"."""
    from probes.metrics import parse_metrics
    from tui.view import reported_metrics
    from tui.widgets.lines import line_text
    from tui.widgets.sparks import IDLE, spark_lines

    idle = parse_metrics((Path(__file__).parents[1] / "fixtures/metrics/vllm-cpu-0.32-idle.txt").read_text())
    reported = reported_metrics(idle)
    assert {"ttft_mean", "itl_p99", "total_tps", "kv_usage", "waiting"} <= reported
    assert reported_metrics(None) == frozenset()
    series: dict[str, tuple[float | None, ...]] = {"ttft_mean": (None,)}

    def ttft_row(rep: frozenset[str]) -> str:
        return next(t for t in map(line_text, spark_lines(series, 60, 8, reported=rep)) if "TTFT mean" in t)

    assert IDLE in ttft_row(reported) and fmt.NR not in ttft_row(reported)
    assert fmt.NR in ttft_row(frozenset())
