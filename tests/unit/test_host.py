"""HostProbe against real processes spawned here."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from probes.host import HostProbe

# A parent that busy-loops for up to 20 s and has a sleeping child of its own (a two-level tree).
BUSY_WITH_CHILD = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
def stop(*_):
    child.kill()
    child.wait()  # reap it here: PID 1 in a container may never reap orphans
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print(child.pid, flush=True)
end = time.time() + 20
x = 0
while time.time() < end:
    x += 1
"""


@pytest.fixture
def busy_tree() -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc = subprocess.Popen([sys.executable, "-c", BUSY_WITH_CHILD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child_pid = int(proc.stdout.readline())
    try:
        yield proc, child_pid
    finally:
        proc.terminate()  # its handler kills and reaps the child
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_machine_fields() -> None:
    sample = HostProbe().read()
    assert sample.cpu_count == psutil.cpu_count(logical=True)
    assert sample.ram_total == psutil.virtual_memory().total
    assert sample.ram_used is not None and 0 < sample.ram_used < sample.ram_total
    assert sample.load1 == pytest.approx(os.getloadavg()[0], abs=2.0)
    assert sample.cpu_percent is not None and 0.0 <= sample.cpu_percent <= 100.0
    assert sample.tree is None
    assert abs(sample.t - time.time()) < 5


def test_tree_sums_cpu_and_rss_over_root_and_children(busy_tree: tuple[subprocess.Popen[str], int]) -> None:
    proc, child_pid = busy_tree
    probe = HostProbe()
    first = probe.read(proc.pid)
    assert first.tree is not None
    assert set(first.tree.pids) == {proc.pid, child_pid}
    assert first.tree.pids[0] == proc.pid
    assert first.tree.cpu_percent == 0.0  # nothing to compare against yet
    time.sleep(0.6)
    second = probe.read(proc.pid)
    tree = second.tree
    assert tree is not None and tree.root_pid == proc.pid
    # The busy loop uses most of one core (percent of ONE core); the sleeping child ~0.
    assert 25.0 < tree.cpu_percent < 210.0
    rss = sum(psutil.Process(p).memory_info().rss for p in (proc.pid, child_pid))
    assert tree.rss_bytes == pytest.approx(rss, rel=0.2)
    assert tree.rss_bytes > 10 * 1024**2  # two Python interpreters


def test_child_exit_shrinks_the_tree_and_root_exit_gives_none(
    busy_tree: tuple[subprocess.Popen[str], int],
) -> None:
    proc, child_pid = busy_tree
    probe = HostProbe()
    assert probe.read(proc.pid).tree is not None
    psutil.Process(child_pid).kill()
    deadline = time.time() + 5
    while time.time() < deadline:
        tree = probe.read(proc.pid).tree
        assert tree is not None
        if tree.pids == (proc.pid,):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the killed child stayed in the tree")
    proc.terminate()
    proc.wait(timeout=5)
    assert probe.read(proc.pid).tree is None


def test_unknown_pid_gives_no_tree_and_no_exception() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    sample = HostProbe().read(gone.pid)
    assert sample.tree is None
    assert sample.ram_total is not None
