"""Fixtures for the app tests: apps built from real parts (see support.py), a catalog of CPU presets on free
ports, and the stand-in vllm executable the real PlanRunner drives."""

from __future__ import annotations

import asyncio
import functools
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from presets.catalog import Catalog
from presets.process import free_port
from presets.results import SessionStore
from presets.runner import PlanRunner
from presets.schema import Plan, PlanPhase, Role, ServerPreset, TrafficPreset
from probes.monitor import Monitor
from tests.app.support import make_monitor
from tui.app import LlmoptApp

STUB = Path(__file__).with_name("stub_vllm.py")
FIXED_STATS = (1.5, 80 * 1024 * 1024)


class RecordingApp(LlmoptApp):
    """The real app, remembering what it told the user (notifications are transient toasts)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notes: list[tuple[str, str, str]] = []  # (title, message, severity)

    def notify(self, message: str, *, title: str = "", severity: str = "information", **kw: Any) -> None:
        self.notes.append((title, message, severity))
        super().notify(message, title=title, severity=severity, **kw)  # type: ignore[arg-type]


async def wait_for(
    pilot: Pilot[Any], cond: Callable[[], bool], timeout: float = 10.0, what: str = ""
) -> None:
    """Let the app run until ``cond()`` holds; fail with ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await pilot.pause(0.02)


def cpu_catalog(die: bool = False) -> Catalog:
    """The three CPU roles on free loopback ports, quick traffic and a two-phase plan."""

    def server(name: str, role: Role) -> ServerPreset:
        env = {"STUB_VLLM_DIE": "1"} if die else {}
        return ServerPreset(
            name=name,
            role=role,
            model="models/tiny-qwen3",
            device="cpu",
            port=free_port(),
            startup_timeout_s=20.0,
            env=env,
        )

    servers = {
        s.name: s
        for s in (
            server("cpu-starved", "baseline"),
            server("cpu-roomy", "freed-memory"),
            server("cpu-tuned", "tuned"),
        )
    }
    traffic = {"quick": TrafficPreset(name="quick", num_prompts=8, max_concurrency=4, ignore_eos=True)}
    plan = Plan(
        name="cpu",
        phases=[
            PlanPhase(server="cpu-starved", traffic="quick"),
            PlanPhase(server="cpu-roomy", traffic="quick"),
        ],
    )
    return Catalog(servers=servers, traffic=traffic, plans={"cpu": plan})


@pytest.fixture
def stub_vllm(tmp_path: Path) -> Path:
    exe = tmp_path / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STUB}" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def runner_factory(monitor: Monitor, exe: Path, results: Path) -> Callable[..., PlanRunner]:
    """What tui.cli gives the app: a PlanRunner bound to one session store; the app ticks the monitor."""
    store = SessionStore(results)
    store.new_session()
    return functools.partial(PlanRunner, vllm_exe=exe, store=store, monitor=monitor, tick_interval_s=None)


def make_app(
    *,
    n_gpus: int = 1,
    monitor: Monitor | None = None,
    catalog: Catalog | None = None,
    factory: Callable[..., PlanRunner] | None = None,
    interval_s: float = 0.05,
    **kw: Any,
) -> RecordingApp:
    return RecordingApp(
        monitor or make_monitor(n_gpus),
        catalog=catalog or cpu_catalog(),
        runner_factory=factory,
        plan=None,
        interval_s=interval_s,
        gpu_host=n_gpus > 0,
        self_stats=lambda: FIXED_STATS,
        **kw,
    )
