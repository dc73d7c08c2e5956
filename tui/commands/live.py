"""The live screen: `llmopt-tui` (attach), `llmopt-tui demo` (the CPU plan, live) and `llmopt-tui replay`."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from presets.catalog import load_catalog
from presets.results import SessionStore
from presets.runner import PlanRunner, RunnerEvent
from presets.vllm_env import VllmNotFound, find_vllm, tiny_model_path
from probes.gpu import open_gpu_source
from probes.host import HostProbe
from probes.metrics import MetricsScraper
from probes.monitor import Monitor
from probes.replay import ReplaySource, sample_to_dict

if TYPE_CHECKING:
    from tui.app import LlmoptApp


def make_runner_factory(
    exe: Path, store: SessionStore, monitor: Monitor, command: str
) -> Callable[..., PlanRunner]:
    """Runners for the app's keys; the first one opens the session folder and starts recording samples."""

    def factory(*, on_event: Callable[[RunnerEvent], None], baseline_index: int = 0) -> PlanRunner:
        if store.dir is None:
            store.new_session({"command": command})
            monitor.on_sample = lambda sample: store.append_sample(sample_to_dict(sample))
        return PlanRunner(
            vllm_exe=exe,
            store=store,
            on_event=on_event,
            monitor=monitor,
            tick_interval_s=None,
            baseline_index=baseline_index,
        )

    return factory


def quit_on_hangup(app: LlmoptApp) -> None:
    """SIGHUP / SIGTERM (the SSH session dropped) quit like `q`: every child is stopped first."""

    def handler(_signum: int, _frame: object) -> None:
        loop = asyncio.get_event_loop()
        loop.call_soon_threadsafe(lambda: asyncio.ensure_future(app.action_quit()))

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, handler)


def run_live(args: argparse.Namespace) -> int:
    from tui.app import LlmoptApp

    command = args.command or "attach"
    demo = command == "demo"
    replay = ReplaySource(Path(args.session)) if command == "replay" else None
    catalog = load_catalog([Path(p) for p in getattr(args, "presets", [])], tiny_model=str(tiny_model_path()))
    gpu = open_gpu_source(getattr(args, "fake_gpus", 0))
    has_gpu = gpu.read().available
    url = None if (demo or replay) else args.url
    monitor = Monitor(MetricsScraper(url) if url else None, gpu, HostProbe())
    runner_factory: Callable[..., PlanRunner] | None = None
    store: SessionStore | None = None
    if replay is None:
        try:
            exe = find_vllm(getattr(args, "vllm", None))
        except VllmNotFound:
            if demo:
                raise
            exe = None  # attach and watch only: the keys that launch say why they cannot
        if exe is not None:
            store = SessionStore(Path(args.out))
            runner_factory = make_runner_factory(exe, store, monitor, command)
    plan = catalog.plans.get(getattr(args, "plan", None) or ("gpu" if has_gpu else "cpu"))
    app = LlmoptApp(
        monitor,
        catalog=catalog,
        runner_factory=runner_factory,
        plan=plan,
        interval_s=getattr(args, "interval", 1.0),
        replay=replay,
        gpu_host=has_gpu,
        replay_speed=getattr(args, "speed", 1.0),
        start_plan=demo,
    )
    quit_on_hangup(app)
    try:
        app.run()
    finally:
        runner = app.runner
        if runner is not None:
            runner.cancel()
            runner.stop_server(-1, "exit")
        monitor.close()
        if store is not None:
            store.close()
    return int(app.return_code or 0)
