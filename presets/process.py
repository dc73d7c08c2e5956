"""Supervised child processes: start in their own session, stop without leaving orphans.

Rules from ARCHITECTURE.md: argv lists (never a shell string), each child in its own process session, output
to a per-phase log file, stop = SIGTERM to the main PID, wait, then SIGKILL to the whole group, then confirm
that no process of the tree survives. SIGTERM to the main PID first matters: vLLM shuts its engine down
cleanly that way, while a group-wide SIGTERM makes the engine log EngineDeadError.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil


@dataclass(frozen=True, slots=True)
class StopReport:
    exit_code: int | None
    stop_s: float  # from the first signal until the main process was gone
    children_gone_s: float  # from the first signal until no process of the tree was left
    killed: bool  # SIGKILL was needed
    survivors: tuple[int, ...]  # pids still alive at the end (should be empty)


class ServerFailed(Exception):
    """The server died or never became healthy; str() is one line, ``log_tail`` has the evidence."""

    def __init__(self, message: str, log_tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.log_tail = list(log_tail)


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on host:port (checked by binding, as the server would)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # uvicorn sets SO_REUSEADDR, so a port held only by TIME_WAIT sockets of a stopped server is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def tail_lines(path: Path, n: int = 20) -> list[str]:
    """The last n lines of a log file, cheaply (reads at most the last 64 KiB)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [ln for ln in data.splitlines() if ln.strip()][-n:]


class ManagedProcess:
    """One child program in its own session, its output appended to a log file."""

    def __init__(self, argv: Sequence[str], log_path: Path, env: Mapping[str, str]) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._env = dict(env)
        self._proc: subprocess.Popen[bytes] | None = None
        self._known: dict[int, psutil.Process] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env,
                start_new_session=True,
            )

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def poll(self) -> int | None:
        """Exit code when the main process ended, else None."""
        return self._proc.poll() if self._proc else None

    def wait(self, timeout: float | None = None) -> int | None:
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def remember_tree(self) -> None:
        """Record every descendant now, so that stop() can confirm each one is gone (re-parented too)."""
        if self._proc is None:
            return
        with self._lock, contextlib.suppress(psutil.Error):
            root = psutil.Process(self._proc.pid)
            for proc in [root, *root.children(recursive=True)]:
                self._known.setdefault(proc.pid, proc)

    def alive_tree(self) -> list[int]:
        """Pids of the tree (known descendants and the process group) that are still running."""
        alive = [pid for pid, proc in self._known.items() if _running(proc)]
        if self._proc is not None:
            alive += [p.pid for p in _group_members(self._proc.pid) if p.pid not in self._known]
        return sorted(set(alive))

    def stop(self, term_timeout_s: float = 20.0, kill_timeout_s: float = 5.0) -> StopReport:
        """SIGTERM the main pid, wait, SIGKILL the group, and confirm that the whole tree is gone."""
        if self._proc is None:
            return StopReport(None, 0.0, 0.0, False, ())
        self.remember_tree()
        t0 = time.monotonic()
        killed = False
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(term_timeout_s)
            except subprocess.TimeoutExpired:
                killed = True
        stop_s = time.monotonic() - t0
        # Children get a moment to follow their parent, then the group and every known pid are killed.
        deadline = time.monotonic() + (0.5 if killed else 5.0)
        while self.alive_tree() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive_tree() or self._proc.poll() is None:
            killed = True
            self._kill_everything()
            deadline = time.monotonic() + kill_timeout_s
            while self.alive_tree() and time.monotonic() < deadline:
                time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(kill_timeout_s)
        return StopReport(
            exit_code=self._proc.poll(),
            stop_s=stop_s,
            children_gone_s=time.monotonic() - t0,
            killed=killed,
            survivors=tuple(self.alive_tree()),
        )

    def _kill_everything(self) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        for proc in self._known.values():
            with contextlib.suppress(psutil.Error):
                proc.kill()


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and _running(proc):
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


class VllmServer:
    """A `vllm serve` child: started, watched until /health says 200, stopped cleanly."""

    def __init__(
        self, argv: Sequence[str], *, host: str, port: int, log_path: Path, env: Mapping[str, str]
    ) -> None:
        self.process = ManagedProcess(argv, log_path, env)
        self.host = host
        self.port = port
        self.log_path = log_path
        self._client: httpx.Client | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def start(self) -> None:
        if port_in_use(self.host, self.port):
            raise ServerFailed(
                f"port {self.port} on {self.host} is already in use: stop what listens there or pick another"
            )
        self.process.start()

    def wait_ready(self, timeout_s: float, cancel: threading.Event | None = None) -> float:
        """Poll GET /health until 200; return seconds waited. Raise ServerFailed on death, 503 or timeout."""
        t0 = time.monotonic()
        with httpx.Client(timeout=httpx.Timeout(2.0, connect=1.0)) as client:
            while True:
                code = self.process.poll()
                if code is not None:
                    raise ServerFailed(
                        f"vllm serve exited with code {code} before it was ready (log: {self.log_path})",
                        tail_lines(self.log_path),
                    )
                if cancel is not None and cancel.is_set():
                    raise ServerFailed("cancelled while the server was starting")
                try:
                    status = client.get(f"{self.url}/health").status_code
                except httpx.HTTPError:
                    status = None
                if status == 200:
                    self.process.remember_tree()
                    return time.monotonic() - t0
                if status == 503:
                    raise ServerFailed(
                        "vllm serve reports its engine dead (/health 503)", tail_lines(self.log_path)
                    )
                if time.monotonic() - t0 > timeout_s:
                    raise ServerFailed(
                        f"vllm serve not healthy after {timeout_s:.0f} s (log: {self.log_path})",
                        tail_lines(self.log_path),
                    )
                time.sleep(0.5)

    def health(self) -> int | None:
        """GET /health status, or None when nothing answers (one kept-alive connection, not one per call)."""
        if self._client is None:
            self._client = httpx.Client(timeout=httpx.Timeout(2.0, connect=1.0))
        try:
            return self._client.get(f"{self.url}/health").status_code
        except httpx.HTTPError:
            return None

    def stop(self) -> StopReport:
        if self._client is not None:
            self._client.close()
            self._client = None
        return self.process.stop()
