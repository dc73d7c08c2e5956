"""Host probe: whole-machine CPU/RAM/load and one process tree (the vLLM server), via psutil.

psutil's ``cpu_percent()`` measures the time since the *previous* call on the same object, so the
probe keeps its ``psutil.Process`` objects between reads; a process seen for the first time
contributes 0 % on that read (it has no previous call yet). ``read()`` never raises.
"""

from __future__ import annotations

import os
import time

import psutil

from probes.types import HostSample, ProcessTree


class HostProbe:
    """Reads the machine and, optionally, the process tree rooted at a pid."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}
        self._cpu_count = psutil.cpu_count(logical=True)
        psutil.cpu_percent(interval=None)  # prime: the first real read then covers "since start"

    def read(self, tree_root_pid: int | None = None) -> HostSample:
        now = time.time()
        cpu: float | None
        try:
            cpu = psutil.cpu_percent(interval=None)
        except Exception:
            cpu = None
        ram_used = ram_total = None
        try:
            vm = psutil.virtual_memory()
            ram_total = int(vm.total)
            ram_used = int(vm.total - vm.available)  # what other programs cannot have, unlike vm.used
        except Exception:
            pass
        try:
            load1: float | None = os.getloadavg()[0]
        except (OSError, AttributeError):
            load1 = None
        tree = None
        if tree_root_pid is not None:
            try:
                tree = self._read_tree(tree_root_pid)
            except Exception:
                tree = None
        else:
            self._procs.clear()
        return HostSample(
            t=now,
            cpu_percent=cpu,
            cpu_count=self._cpu_count,
            ram_used=ram_used,
            ram_total=ram_total,
            load1=load1,
            tree=tree,
        )

    def _process(self, pid: int) -> tuple[psutil.Process, bool]:
        """The cached Process for pid (a reused pid gets a fresh one) and whether it is new."""
        proc = self._procs.get(pid)
        if proc is not None and proc.is_running():
            return proc, False
        proc = psutil.Process(pid)
        self._procs[pid] = proc
        return proc, True

    def _read_tree(self, root_pid: int) -> ProcessTree | None:
        try:
            root, _ = self._process(root_pid)
            if root.status() == psutil.STATUS_ZOMBIE:
                raise psutil.NoSuchProcess(root_pid)
            children = root.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            self._procs.clear()
            return None
        pids = [root_pid] + [c.pid for c in children]
        cpu = 0.0
        rss = 0
        seen: list[int] = []
        for pid in pids:
            try:
                proc, new = self._process(pid)
                with proc.oneshot():
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue  # exited, waiting for its parent to reap it
                    percent = proc.cpu_percent(interval=None)  # on a new object: primes, returns 0
                    cpu += 0.0 if new else percent
                    rss += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue  # exited between children() and now
            except psutil.AccessDenied:
                pass  # still part of the tree, just not measurable
            seen.append(pid)
        for gone in set(self._procs) - set(seen):
            del self._procs[gone]
        if root_pid not in seen:
            return None
        return ProcessTree(root_pid=root_pid, pids=tuple(seen), cpu_percent=cpu, rss_bytes=rss)
