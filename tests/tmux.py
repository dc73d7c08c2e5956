"""A real terminal for end-to-end tests and the TUI benchmark: a detached tmux session of a fixed size."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def screen(name: str) -> str:
    return tmux("capture-pane", "-p", "-t", name)


@contextmanager
def tmux_session(name: str, command: str, size: tuple[int, int] = (120, 40)) -> Iterator[int]:
    """``command`` (a shell line) in a detached session of ``size``; yields the pane's pid, kills it after."""
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is missing: `make setup` installs it")
    cols, rows = str(size[0]), str(size[1])
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", name, "-x", cols, "-y", rows, command], check=True, env=env
    )
    tmux("resize-window", "-t", name, "-x", cols, "-y", rows)  # a tmux server started earlier may differ
    try:
        yield int(tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip())
    finally:
        tmux("kill-session", "-t", name)
