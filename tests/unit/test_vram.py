"""VRAM release after a stop, read through the real NVML code path over the fake pynvml module."""

from __future__ import annotations

from presets.vram import SLACK_BYTES, vram_used, wait_vram_released
from probes.fake_nvml import FakeNvml
from probes.gpu import NvmlGpuSource
from probes.types import GpuSnapshot

GIB = 1024**3


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, s: float) -> None:
        self.now += s


def test_released_after_a_few_polls() -> None:
    nvml = FakeNvml(n_gpus=2)
    source = NvmlGpuSource(nvml)
    for dev in nvml.devices:
        dev.mem_used = 1 * GIB
    baseline = vram_used(source.read())
    assert baseline == 2 * GIB
    nvml.devices[0].mem_used = 30 * GIB  # the stopped server's memory, freed on the third read
    reads = 0

    def read() -> GpuSnapshot:
        nonlocal reads
        reads += 1
        if reads == 3:
            nvml.devices[0].mem_used = 1 * GIB
        return source.read()

    clock = Clock()
    left, waited = wait_vram_released(read, baseline, sleep=clock.sleep, clock=lambda: clock.now)
    assert (left, waited, reads) == (0, 1.0, 3)


def test_not_released_reports_what_is_held() -> None:
    nvml = FakeNvml(n_gpus=1)
    source = NvmlGpuSource(nvml)
    nvml.devices[0].mem_used = 1 * GIB
    baseline = vram_used(source.read())
    assert baseline is not None
    nvml.devices[0].mem_used = 19 * GIB  # an orphan holds 18 GiB
    clock = Clock()
    left, waited = wait_vram_released(
        source.read, baseline, timeout_s=5, sleep=clock.sleep, clock=lambda: clock.now
    )
    assert left == 18 * GIB and waited == 5.0


def test_small_remainder_counts_as_released_and_no_gpu_is_unknown() -> None:
    nvml = FakeNvml(n_gpus=1)
    source = NvmlGpuSource(nvml)
    nvml.devices[0].mem_used = 2 * GIB
    baseline = 2 * GIB - SLACK_BYTES // 2
    assert wait_vram_released(source.read, baseline)[0] == 0
    assert vram_used(GpuSnapshot(t=0.0, available=False, reason="no GPU")) is None
