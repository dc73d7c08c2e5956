"""`llmopt-tui run`: phases headless — one progress line per step, the comparison table at the end.

SIGTERM, SIGHUP and Ctrl-C cancel the runner: every child is stopped and every finished phase stays on disk
(an SSH session that drops must not leave a server holding the GPU).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from presets.catalog import Catalog, load_catalog
from presets.results import SessionStore, build_comparison
from presets.runner import PhaseSpec, PlanRunner, RunnerEvent
from presets.schema import PresetError, lint
from presets.vllm_env import find_vllm, tiny_model_path
from probes.gpu import open_gpu_source
from probes.host import HostProbe
from probes.monitor import Monitor
from probes.replay import sample_to_dict


def phases_from_args(catalog: Catalog, args: argparse.Namespace) -> tuple[list[PhaseSpec], int]:
    """The phases the command line asks for, and the baseline index; PresetError when a name is unknown."""
    dataset = {"dataset_path": args.dataset_path} if args.dataset_path else {}
    if args.plan:
        plan = catalog.get_plan(args.plan)
        specs = [
            PhaseSpec(
                None if args.url else server, traffic.replace(**dataset) if dataset else traffic, phase.name
            )
            for phase, server, traffic in catalog.plan_phases(plan)
        ]
        return specs, plan.baseline_index
    if not args.traffic:
        raise PresetError(None, "--traffic", "give --plan P, or --server S ... with --traffic T")
    traffic = catalog.get_traffic(args.traffic)
    if dataset:
        traffic = traffic.replace(**dataset)
    if args.url and not args.server:
        return [PhaseSpec(None, traffic, f"attached-{traffic.name}")], 0
    if not args.server:
        raise PresetError(None, "--server", "give at least one --server (or --url to attach)")
    return [PhaseSpec(catalog.get_server(name), traffic, f"{name}-{traffic.name}") for name in args.server], 0


def with_port(phases: list[PhaseSpec], port: int | None) -> list[PhaseSpec]:
    """--port moves every launched server (presets default to 8000)."""
    if port is None:
        return phases
    return [
        PhaseSpec(p.server.model_copy(update={"port": port}) if p.server else None, p.traffic, p.label)
        for p in phases
    ]


def print_event(event: RunnerEvent) -> None:
    if event.kind == "bench_progress":
        return
    stamp = time.strftime("%H:%M:%S", time.localtime(event.t))
    print(f"[{stamp}] {event.message}", flush=True)
    if event.kind == "phase_failed" and event.record is not None:
        for line in event.record.log_tail[-8:]:
            print(f"           | {line}", flush=True)


def run_headless(args: argparse.Namespace) -> int:
    catalog = load_catalog([Path(p) for p in args.presets], tiny_model=str(tiny_model_path()))
    phases, baseline = phases_from_args(catalog, args)
    phases = with_port(phases, args.port)
    for phase in phases:
        if phase.server is not None and phase.traffic is not None:
            for warning in lint(phase.server, phase.traffic):
                print(f"lint: {phase.label}: {warning}", file=sys.stderr)
    exe = find_vllm(args.vllm)  # attach mode still runs `vllm bench serve`
    store = SessionStore(Path(args.out))
    session = store.new_session({"command": "run", "phases": [p.label for p in phases]})
    monitor = Monitor(None, open_gpu_source(), HostProbe())
    monitor.on_sample = lambda sample: store.append_sample(sample_to_dict(sample))
    runner = PlanRunner(
        vllm_exe=exe,
        store=store,
        on_event=print_event,
        monitor=monitor,
        attach_url=args.url,
        baseline_index=baseline,
    )
    print(f"session {session}", flush=True)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        print(
            f"received {signal.Signals(signum).name}: stopping children, keeping finished phases", flush=True
        )
        runner.cancel()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        records = runner.run(phases)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        monitor.close()
        store.close()
    if records:
        table = build_comparison(records, min(baseline, len(records) - 1))
        print()
        print(table.to_markdown())
        for ext, text in (("md", table.to_markdown()), ("csv", table.to_csv()), ("json", table.to_json())):
            (session / f"comparison.{ext}").write_text(text)
    if runner.cancelled:
        return 130
    return 0 if records and all(r.status == "ok" for r in records) else 1
