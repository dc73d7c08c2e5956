#!/usr/bin/env python3
"""Check the REAL NVML path on a GPU machine: print every field of every GPU, twice, 1 s apart.

Usage: python scripts/gpu_check.py [--interval 1.0]
Exit status: 0 when NVML works and reports at least one GPU, 1 when the snapshot is unavailable,
2 when some device reported no value for a field that every datacenter GPU has.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes.gpu import NvmlGpuSource
from probes.types import GpuSnapshot

# Fields any recent NVIDIA datacenter GPU (A100/H100/H200/L40S) reports; None here is a probe bug.
EXPECTED = ("name", "uuid", "compute_capability", "pstate", "power_w", "power_limit_w", "util_gpu",
            "mem_used", "mem_total", "temperature_c", "sm_clock_mhz", "mem_clock_mhz",
            "throttle_reasons", "energy_j", "nvlink_active", "pcie_gen", "pcie_width")  # fmt: skip


def show(label: str, snap: GpuSnapshot) -> None:
    print(f"== {label}: available={snap.available} driver={snap.driver_version} cuda={snap.cuda_version}")
    if snap.reason:
        print(f"   reason: {snap.reason}")
    for dev in snap.devices:
        print(f"-- GPU {dev.index}")
        for f in dataclasses.fields(dev):
            print(f"   {f.name:18} {getattr(dev, f.name)!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()

    src = NvmlGpuSource()
    t0 = time.perf_counter()
    first = src.read()
    t_first = time.perf_counter() - t0
    show("read 1", first)
    if not first.available:
        src.close()
        return 1
    time.sleep(args.interval)
    t0 = time.perf_counter()
    second = src.read()
    t_second = time.perf_counter() - t0
    show("read 2", second)
    src.close()

    print(f"== read cost: first {t_first * 1000:.1f} ms (init + static), second {t_second * 1000:.1f} ms")
    dt = second.t - first.t
    status = 0
    for a, b in zip(first.devices, second.devices, strict=False):
        if a.energy_j is not None and b.energy_j is not None and dt > 0:
            de = b.energy_j - a.energy_j
            print(f"GPU {a.index}: energy +{de:.3f} J in {dt:.3f} s = {de / dt:.1f} W average "
                  f"(instant power {b.power_w} W)")  # fmt: skip
        else:
            print(f"GPU {a.index}: energy not reported")
        missing = [name for name in EXPECTED if getattr(b, name) is None]
        if missing:
            print(f"GPU {a.index}: MISSING {', '.join(missing)}")
            status = 2
    if not second.available or not second.devices:
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
