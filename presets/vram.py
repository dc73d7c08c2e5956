"""After a stop, wait until the GPU memory the server held is free again (the documents' phase rule:
an old server must be stopped and its VRAM seen free before the next one starts)."""

from __future__ import annotations

import time
from collections.abc import Callable

from probes.types import GpuSnapshot

SLACK_BYTES = 512 * 1024**2  # what may stay above the pre-start level (driver caches, other tenants)


def vram_used(snap: GpuSnapshot) -> int | None:
    """Total used VRAM over every GPU, or None when NVML cannot tell (no GPU, a field missing)."""
    if not snap.available or not snap.devices:
        return None
    used = [dev.mem_used for dev in snap.devices]
    return None if any(u is None for u in used) else sum(u for u in used if u is not None)


def wait_vram_released(
    read: Callable[[], GpuSnapshot],
    baseline: int,
    *,
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[int, float]:
    """Poll until used VRAM is back within SLACK_BYTES of ``baseline`` (the level before the server started).

    Returns (bytes still held above the baseline, 0 when released; seconds waited).
    """
    t0 = clock()
    while True:
        used = vram_used(read())
        left = 0 if used is None else max(0, used - baseline)
        if left <= SLACK_BYTES or clock() - t0 >= timeout_s:
            return (0 if left <= SLACK_BYTES else left), clock() - t0
        sleep(poll_s)
