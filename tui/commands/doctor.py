"""`llmopt-tui doctor`: the documents' step 1 pre-flight, as one screen of facts.

GPUs via NVML (or why there are none, and the host instead), the vLLM executable and its version, and whether
a server answers at --url and what it serves. Exit 0 when the tool is usable: vLLM can be launched here, or a
server answers to be watched.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from presets.vllm_env import VllmNotFound, find_vllm, vllm_version
from probes.gpu import open_gpu_source
from probes.host import HostProbe
from probes.metrics import MetricsScraper
from probes.types import GpuDevice, GpuSnapshot, HostSample

GIB = 1024**3


def _gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / GIB:.1f}"


def _fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def gpu_lines(snap: GpuSnapshot) -> list[str]:
    if not snap.available:
        return [f"GPU     no NVIDIA GPU: {snap.reason}"]
    lines = [
        f"GPU     driver {snap.driver_version or 'n/a'}, CUDA {snap.cuda_version or 'n/a'}, "
        f"{len(snap.devices)} device(s)"
    ]
    for dev in snap.devices:
        lines.append(_device_line(dev))
    return lines


def _device_line(dev: GpuDevice) -> str:
    pstate = "n/a" if dev.pstate is None else f"P{dev.pstate}"
    return (
        f"  [{dev.index}] {dev.name or 'n/a'} (cc {dev.compute_capability or 'n/a'})  {pstate}  "
        f"power {_fmt(dev.power_w, ' W')}/{_fmt(dev.power_limit_w, ' W')}  util {_fmt(dev.util_gpu, ' %')}  "
        f"VRAM used {_gib(dev.mem_used)} / free {_gib(dev.mem_free)} / total {_gib(dev.mem_total)} GiB"
    )


def host_line(host: HostSample) -> str:
    return (
        f"Host    {host.cpu_count or '?'} CPUs, {_fmt(host.cpu_percent, ' %', 1)} busy, "
        f"RAM {_gib(host.ram_used)}/{_gib(host.ram_total)} GiB, load {_fmt(host.load1, '', 2)}"
    )


def run_doctor(url: str, vllm: str | None, as_json: bool) -> int:
    report: dict[str, Any] = {"url": url}
    lines: list[str] = []

    gpu = open_gpu_source()
    try:
        snap = gpu.read()
    finally:
        gpu.close()
    report["gpu"] = asdict(snap)
    lines += gpu_lines(snap)
    if not snap.available:
        probe = HostProbe()
        time.sleep(0.25)  # CPU % is measured between two reads
        host = probe.read()
        report["host"] = asdict(host)
        lines.append(host_line(host))

    try:
        exe = find_vllm(vllm)
        version = vllm_version(exe)
        report["vllm"] = {"path": str(exe), "version": version}
        lines.append(f"vLLM    {exe} ({version or 'version unknown: `vllm --version` failed'})")
        can_launch = version is not None
    except VllmNotFound as exc:
        report["vllm"] = {"path": None, "error": str(exc)}
        lines.append(f"vLLM    {exc}")
        can_launch = False

    scraper = MetricsScraper(url)
    try:
        health = scraper.health()
        models = scraper.models() if health == 200 else []
        sample = scraper.scrape() if health == 200 else None
    finally:
        scraper.close()
    answering = health == 200
    report["server"] = {
        "health": health,
        "models": models,
        "engines": sample.engines if sample else None,
        "metrics_state": sample.state if sample else None,
    }
    if answering:
        lines.append(
            f"Server  {url}: healthy, serving {', '.join(models) or 'no model listed'}"
            + (f", {sample.engines} engine(s)" if sample and sample.ok else "")
        )
    elif health is None:
        lines.append(
            f"Server  {url}: not answering (nothing listens there); "
            "start one with `llmopt-tui run` or pass --url"
        )
    else:
        lines.append(f"Server  {url}: /health answered {health}")

    usable = can_launch or answering
    report["usable"] = usable
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print("\n".join(lines))
        if not usable:
            print("Not usable yet: no working vLLM to launch and no server to watch.")
    return 0 if usable else 1
