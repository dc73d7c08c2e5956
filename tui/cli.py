"""The `llmopt-tui` command: the live screen by default, and headless faces of the same parts.

Headless commands never import Textual, so `doctor`, `snapshot`, `memory`, `run` and `compare` start fast
and work in scripts. Every failure a user can cause ends as one line on stderr and a non-zero exit, never a
traceback (set LLMOPT_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

DEFAULT_URL = "http://127.0.0.1:8000"


def _version() -> str:
    try:
        return version("llmopt-tui")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmopt-tui",
        description="Terminal monitor and tuning bench for vLLM servers. With no command: the live screen, "
        "attached to --url and the local GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"llmopt-tui {_version()}")
    _add_live_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="run the CPU plan on the tiny local model, live")
    _add_live_options(demo)

    replay = sub.add_parser("replay", help="play a recorded session (samples.jsonl) through the screen")
    replay.add_argument("session", help="a session folder under llmopt-results/ (or its samples.jsonl)")
    replay.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1.0)")

    doctor = sub.add_parser("doctor", help="pre-flight: GPUs (NVML), host, vLLM executable, server at --url")
    doctor.add_argument("--url", default=DEFAULT_URL, help=f"server to check (default {DEFAULT_URL})")
    doctor.add_argument(
        "--vllm", help="path of the vllm executable (default: $LLMOPT_VLLM, .venv-vllm, PATH)"
    )
    doctor.add_argument("--json", action="store_true", help="print JSON")

    snap = sub.add_parser(
        "snapshot", help="one sample of GPUs, host and engine, with rates over a short window"
    )
    snap.add_argument("--url", default=DEFAULT_URL, help=f"vLLM server (default {DEFAULT_URL})")
    snap.add_argument("--window", type=float, default=2.0, help="seconds between the first and last scrape")
    snap.add_argument("--json", action="store_true", help="print JSON (keys documented in docs/json.md)")
    snap.add_argument("--fake-gpus", type=int, default=0, help=argparse.SUPPRESS)

    memory = sub.add_parser("memory", help="the memory report of a `vllm serve` log")
    memory.add_argument("logfile")
    memory.add_argument("--json", action="store_true", help="print JSON")

    run = sub.add_parser(
        "run", help="run phases headless: vllm serve + vllm bench serve, then the comparison"
    )
    run.add_argument("--plan", help="a plan name (see `llmopt-tui presets`)")
    run.add_argument("--server", action="append", default=[], help="server preset (repeatable)")
    run.add_argument("--traffic", help="traffic preset for --server phases")
    run.add_argument("--url", help="attach mode: run the traffic against this server, launch nothing")
    run.add_argument("--port", type=int, help="port for every launched server (default: the preset's)")
    run.add_argument("--out", default="llmopt-results", help="results folder (default llmopt-results)")
    run.add_argument("--presets", action="append", default=[], help="user preset folder (overrides builtins)")
    run.add_argument("--vllm", help="path of the vllm executable")
    run.add_argument("--dataset-path", help="dataset file for sharegpt traffic")

    compare = sub.add_parser("compare", help="rebuild the comparison table from sessions or bench JSON files")
    compare.add_argument("paths", nargs="+")
    compare.add_argument("--format", choices=("md", "csv", "json"), default="md")

    presets = sub.add_parser("presets", help="list server, traffic and plan presets")
    presets.add_argument("--presets", action="append", default=[], help="user preset folder")
    return parser


def _add_live_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=DEFAULT_URL, help=f"vLLM server to watch (default {DEFAULT_URL})")
    parser.add_argument(
        "--presets", action="append", default=[], help="user preset folder (overrides builtins)"
    )
    parser.add_argument("--plan", help="plan that `r` runs (default: gpu or cpu by host)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    parser.add_argument("--vllm", help="path of the vllm executable")
    parser.add_argument("--out", default="llmopt-results", help="results folder (default llmopt-results)")
    parser.add_argument("--fake-gpus", type=int, default=0, help=argparse.SUPPRESS)


def dispatch(args: argparse.Namespace) -> int:
    command = args.command
    if command == "doctor":
        from tui.commands.doctor import run_doctor

        return run_doctor(args.url, args.vllm, args.json)
    if command == "snapshot":
        from tui.commands.snapshot import run_snapshot

        return run_snapshot(args.url, args.window, args.json, args.fake_gpus)
    if command == "memory":
        from tui.commands.memory import run_memory

        return run_memory(args.logfile, args.json)
    if command == "run":
        from tui.commands.run import run_headless

        return run_headless(args)
    if command == "compare":
        from tui.commands.compare import run_compare

        return run_compare(args.paths, args.format)
    if command == "presets":
        from tui.commands.compare import run_list_presets

        return run_list_presets(args.presets)
    from tui.commands.live import run_live

    return run_live(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from presets.schema import PresetError

    try:
        return dispatch(args)
    except PresetError as exc:  # a bad preset file or name: exit 2, like a usage error
        print(f"llmopt-tui: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `llmopt-tui doctor | head`: the reader left, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("llmopt-tui: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the one place that turns any failure into one line
        if os.environ.get("LLMOPT_DEBUG"):
            raise
        print(f"llmopt-tui: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
