"""NvmlGpuSource driven by the fake NVML module, plus the real pynvml on this machine."""

from __future__ import annotations

import ctypes.util
import inspect

import pynvml
import pytest

from probes import fake_nvml
from probes.fake_nvml import FakeNvml
from probes.gpu import NvmlGpuSource, cuda_version_str, decode_throttle, open_gpu_source

GiB = 1024**3


def test_reads_every_field_with_unit_conversions() -> None:
    nvml = FakeNvml(n_gpus=1, cuda_version=12040, driver_version="550.54.15")
    dev = nvml.devices[0]
    dev.power_w, dev.power_limit_w, dev.pstate = 331.5, 350.0, 0
    dev.util_gpu, dev.util_mem = 97, 64
    dev.mem_used = 44 * GiB
    dev.temperature_c, dev.sm_clock_mhz, dev.mem_clock_mhz = 71, 2520, 9001
    dev.energy_mj = 123_456_789
    dev.pcie_gen, dev.pcie_width = 4, 16

    snap = NvmlGpuSource(nvml).read()

    assert snap.available and snap.reason is None
    assert snap.driver_version == "550.54.15"
    assert snap.cuda_version == "12.4"
    (g,) = snap.devices
    assert g.index == 0 and g.name == "NVIDIA L40S" and g.uuid and g.uuid.startswith("GPU-")
    assert g.compute_capability == "8.9"
    assert g.pstate == 0
    assert g.power_w == pytest.approx(331.5)
    assert g.power_limit_w == pytest.approx(350.0)
    assert (g.util_gpu, g.util_mem) == (97.0, 64.0)
    assert (g.mem_total, g.mem_used, g.mem_free) == (46 * GiB, 44 * GiB, 2 * GiB)
    assert g.temperature_c == 71.0
    assert (g.sm_clock_mhz, g.mem_clock_mhz) == (2520, 9001)
    assert g.energy_j == pytest.approx(123_456.789)
    assert g.throttle_reasons == ()  # default fake state is "idle", which is not throttling
    assert g.nvlink_active == 0
    assert (g.pcie_gen, g.pcie_width) == (4, 16)


def test_state_changes_show_up_on_the_next_read_and_energy_advances() -> None:
    nvml = FakeNvml(n_gpus=2)
    src = NvmlGpuSource(nvml)
    first = src.read()
    nvml.set_busy(1, util=90, power_w=300.0)
    nvml.advance(2.0)
    second = src.read()
    assert first.devices[1].util_gpu == 0.0 and second.devices[1].util_gpu == 90.0
    assert second.devices[1].pstate == 0
    e0, e1 = first.devices[1].energy_j, second.devices[1].energy_j
    assert e0 is not None and e1 is not None
    assert e1 - e0 == pytest.approx(600.0)  # 300 W x 2 s
    assert second.devices[0].energy_j - first.devices[0].energy_j == pytest.approx(64.0)  # type: ignore[operator]
    assert nvml.calls["nvmlInit"] == 1


FIELD_OF = {
    "nvmlDeviceGetName": "name",
    "nvmlDeviceGetUUID": "uuid",
    "nvmlDeviceGetCudaComputeCapability": "compute_capability",
    "nvmlDeviceGetPerformanceState": "pstate",
    "nvmlDeviceGetPowerUsage": "power_w",
    "nvmlDeviceGetEnforcedPowerLimit": "power_limit_w",
    "nvmlDeviceGetUtilizationRates": "util_gpu",
    "nvmlDeviceGetMemoryInfo": "mem_total",
    "nvmlDeviceGetTemperature": "temperature_c",
    "nvmlDeviceGetTotalEnergyConsumption": "energy_j",
    "nvmlDeviceGetCurrPcieLinkGeneration": "pcie_gen",
    "nvmlDeviceGetCurrPcieLinkWidth": "pcie_width",
}


@pytest.mark.parametrize("func", sorted(FIELD_OF))
@pytest.mark.parametrize("code", [fake_nvml.NVML_ERROR_NOT_SUPPORTED, fake_nvml.NVML_ERROR_NO_PERMISSION])
def test_one_failing_function_gives_none_for_its_field_only(func: str, code: int) -> None:
    nvml = FakeNvml(n_gpus=2)
    nvml.fail(func, code, device=1)
    snap = NvmlGpuSource(nvml).read()
    assert snap.available
    good, bad = snap.devices
    assert getattr(bad, FIELD_OF[func]) is None
    assert getattr(good, FIELD_OF[func]) is not None
    others = [f for f in FIELD_OF.values() if f != FIELD_OF[func]]
    assert all(getattr(bad, f) is not None for f in others)


def test_memory_and_utilisation_fields_go_missing_together() -> None:
    nvml = FakeNvml()
    nvml.fail("nvmlDeviceGetMemoryInfo")
    nvml.fail("nvmlDeviceGetUtilizationRates")
    (g,) = NvmlGpuSource(nvml).read().devices
    assert (g.mem_used, g.mem_free, g.mem_total, g.util_gpu, g.util_mem) == (None,) * 5
    assert g.power_w == 32.0


def test_clock_failure_affects_both_clocks_and_missing_driver_info_is_none() -> None:
    nvml = FakeNvml()
    nvml.fail("nvmlDeviceGetClockInfo")
    nvml.fail("nvmlSystemGetDriverVersion")
    nvml.remove("nvmlSystemGetCudaDriverVersion")
    snap = NvmlGpuSource(nvml).read()
    assert snap.available and snap.driver_version is None and snap.cuda_version is None
    assert snap.devices[0].sm_clock_mhz is None and snap.devices[0].mem_clock_mhz is None


def test_lost_handle_gives_an_empty_device_not_a_crash() -> None:
    nvml = FakeNvml(n_gpus=2)
    nvml.fail("nvmlDeviceGetHandleByIndex", fake_nvml.NVML_ERROR_GPU_IS_LOST, device=0)
    snap = NvmlGpuSource(nvml).read()
    assert snap.available
    assert snap.devices[0] == type(snap.devices[0])(index=0)
    assert snap.devices[1].name == "NVIDIA L40S"


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        (0x0, ()),
        (0x1, ()),  # gpu_idle
        (0x2, ()),  # applications clocks setting
        (0x1 | 0x4, ("sw_power_cap",)),
        (0x4 | 0x40, ("sw_power_cap", "hw_thermal_slowdown")),
        (0x8 | 0x20 | 0x80, ("hw_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown")),
        (0x10 | 0x100, ("sync_boost", "display_clock_setting")),
        (0x400 | 0x1, ("0x400",)),  # unknown bits are shown, not dropped
    ],
)
def test_throttle_bitmask_decoding(mask: int, names: tuple[str, ...]) -> None:
    assert decode_throttle(mask) == names
    nvml = FakeNvml()
    nvml.devices[0].throttle = mask
    assert NvmlGpuSource(nvml).read().devices[0].throttle_reasons == names


def test_throttle_falls_back_to_the_old_function() -> None:
    nvml = FakeNvml()
    nvml.devices[0].throttle = 0x4
    nvml.remove("nvmlDeviceGetCurrentClocksEventReasons")  # an older pynvml
    assert NvmlGpuSource(nvml).read().devices[0].throttle_reasons == ("sw_power_cap",)
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1

    nvml2 = FakeNvml()
    nvml2.devices[0].throttle = 0x40
    nvml2.fail("nvmlDeviceGetCurrentClocksEventReasons", fake_nvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    assert NvmlGpuSource(nvml2).read().devices[0].throttle_reasons == ("hw_thermal_slowdown",)

    nvml3 = FakeNvml()
    nvml3.fail("nvmlDeviceGetCurrentClocksEventReasons")
    nvml3.fail("nvmlDeviceGetCurrentClocksThrottleReasons")
    assert NvmlGpuSource(nvml3).read().devices[0].throttle_reasons is None


def test_nvlink_counts_enabled_links_and_is_read_once() -> None:
    nvml = FakeNvml(n_gpus=2, nvlink_links=12)
    nvml.devices[1].nvlink[3] = False
    nvml.devices[1].nvlink[7] = False
    src = NvmlGpuSource(nvml)
    snap = src.read()
    assert [d.nvlink_active for d in snap.devices] == [12, 10]
    calls = nvml.calls["nvmlDeviceGetNvLinkState"]
    assert calls == 2 * fake_nvml.NVML_NVLINK_MAX_LINKS
    src.read()
    assert nvml.calls["nvmlDeviceGetNvLinkState"] == calls  # topology is cached


def test_nvlink_not_supported_is_zero_links_other_errors_unknown() -> None:
    pcie = FakeNvml()
    assert NvmlGpuSource(pcie).read().devices[0].nvlink_active == 0
    assert pcie.calls["nvmlDeviceGetNvLinkState"] == 1  # stops at link 0

    denied = FakeNvml(nvlink_links=4)
    denied.fail("nvmlDeviceGetNvLinkState", fake_nvml.NVML_ERROR_NO_PERMISSION)
    assert NvmlGpuSource(denied).read().devices[0].nvlink_active is None


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (fake_nvml.NVML_ERROR_LIBRARY_NOT_FOUND, ["NVML not found", "libnvidia-ml.so.1", "Hint"]),
        (fake_nvml.NVML_ERROR_DRIVER_NOT_LOADED, ["driver is not loaded", "Hint"]),
        (fake_nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, ["version mismatch", "reboot"]),
        (fake_nvml.NVML_ERROR_NO_PERMISSION, ["permission denied", "/dev/nvidia"]),
        (fake_nvml.NVML_ERROR_UNKNOWN, ["NVML init failed", "Unknown Error", "999"]),
    ],
)
def test_init_failure_is_an_unavailable_snapshot_with_a_reason(code: int, words: list[str]) -> None:
    nvml = FakeNvml()
    nvml.fail_init(code)
    src = NvmlGpuSource(nvml)
    snaps = [src.read(), src.read()]
    for snap in snaps:
        assert not snap.available and snap.devices == ()
        assert snap.reason is not None
        for word in words:
            assert word in snap.reason
    assert nvml.calls["nvmlInit"] == 1  # once, not on every read
    assert src.reason == snaps[0].reason
    src.close()
    assert nvml.calls["nvmlShutdown"] == 0  # never initialised, nothing to shut down


def test_zero_gpus_is_unavailable() -> None:
    snap = NvmlGpuSource(FakeNvml(n_gpus=0)).read()
    assert not snap.available and snap.reason and "no GPUs" in snap.reason


def test_unexpected_exception_becomes_a_state_not_a_crash() -> None:
    nvml = FakeNvml()

    def boom(handle: object) -> int:
        raise RuntimeError("driver hiccup")

    nvml.nvmlDeviceGetPowerUsage = boom  # type: ignore[method-assign]
    snap = NvmlGpuSource(nvml).read()
    assert not snap.available and snap.reason and "driver hiccup" in snap.reason


def test_bytes_from_older_pynvml_are_decoded() -> None:
    nvml = FakeNvml(bytes_strings=True, name="Tesla V100-SXM2-16GB", compute_capability=(7, 0))
    snap = NvmlGpuSource(nvml).read()
    assert snap.driver_version == "550.54.15"
    assert snap.devices[0].name == "Tesla V100-SXM2-16GB"
    assert isinstance(snap.devices[0].uuid, str)
    assert snap.devices[0].compute_capability == "7.0"


def test_close_shuts_nvml_down_once_and_later_reads_say_closed() -> None:
    nvml = FakeNvml()
    src = NvmlGpuSource(nvml)
    assert src.read().available
    src.close()
    src.close()
    assert nvml.calls["nvmlShutdown"] == 1
    snap = src.read()
    assert not snap.available and snap.reason == "GPU source closed"


def test_cuda_version_format() -> None:
    assert cuda_version_str(12040) == "12.4"
    assert cuda_version_str(11080) == "11.8"
    assert cuda_version_str(13000) == "13.0"


def test_open_gpu_source_fake() -> None:
    snap = open_gpu_source(fake_gpus=4).read()
    assert snap.available and [d.index for d in snap.devices] == [0, 1, 2, 3]
    assert all(d.mem_total == 46 * GiB for d in snap.devices)


def test_fake_matches_the_real_pynvml_api() -> None:
    """Every nvml* function and constant the fake offers exists in pynvml with the same shape."""
    fake = FakeNvml()
    names = [n for n in dir(FakeNvml) if n.startswith("nvml") and callable(getattr(fake, n))]
    assert len(names) >= 20
    for name in names:
        real = getattr(pynvml, name)
        real_params = list(inspect.signature(real).parameters)
        fake_params = list(inspect.signature(getattr(fake, name)).parameters)
        assert fake_params == real_params, name
    for name in dir(fake_nvml):
        if name.startswith(("NVML_", "nvmlClocksEventReason", "nvmlMemory_v2")):
            assert getattr(fake_nvml, name) == getattr(pynvml, name), name
    for code in (3, 9, 12, 18):
        err = fake.NVMLError(code)
        real_err = pynvml.NVMLError(code)
        assert err.value == code
        assert type(err).__name__ == type(real_err).__name__
        assert str(err) == str(real_err)
        assert isinstance(err, fake.NVMLError)


def test_real_pynvml_on_this_machine_never_raises() -> None:
    src = NvmlGpuSource()  # the real pynvml
    snap = src.read()
    src.close()
    if ctypes.util.find_library("nvidia-ml") is None:
        assert snap.available is False
        assert snap.reason and "libnvidia-ml.so.1" in snap.reason
        assert snap.devices == ()
    else:  # a GPU machine: the same call must produce devices or a reason
        assert snap.available or snap.reason
