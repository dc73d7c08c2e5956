"""GPU probe: NVIDIA GPUs through NVML (nvidia-ml-py), surviving every field a GPU cannot report.

Each read asks NVML for every GpuDevice field through one wrapper that turns a per-field
``NVMLError`` (NotSupported on consumer cards, NoPermission in containers, GpuIsLost ...) into
``None``; only "cannot use NVML at all" (no library, driver not loaded) makes the whole snapshot
unavailable, and then every read says why, with a hint. The NVML module is injected so the very
same code runs against ``probes.fake_nvml`` in tests and in ``--fake-gpus`` demos.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from probes.types import GpuDevice, GpuSnapshot

# NVML error codes (identical in pynvml and fake_nvml; kept here so messages work without either).
_LIBRARY_NOT_FOUND = 12
_DRIVER_NOT_LOADED = 9
_NO_PERMISSION = 4
_LIB_RM_VERSION_MISMATCH = 18
_NOT_SUPPORTED = 3
_NOT_SUPPORTED_MARK = object()  # what _query returns for NotSupported where that means "none"

# Clock-event ("throttle") reason bits -> names. Idle and application-clock bits mean "not throttling".
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
NOT_THROTTLING_MASK = 0x1 | 0x2  # gpu_idle, applications_clocks_setting

_INIT_REASONS = {
    _LIBRARY_NOT_FOUND: "NVML not found: no NVIDIA driver on this host (libnvidia-ml.so.1 missing). "
    "Hint: install the NVIDIA driver, or use --fake-gpus N for a demo.",
    _DRIVER_NOT_LOADED: "NVML: the NVIDIA driver is not loaded (libnvidia-ml.so.1 present, kernel module "
    "not running). Hint: run nvidia-smi; load the driver (modprobe nvidia) or reboot.",
    _LIB_RM_VERSION_MISMATCH: "NVML: driver/library version mismatch (driver upgraded without a reboot). "
    "Hint: reboot, or reload the nvidia kernel modules.",
    _NO_PERMISSION: "NVML: permission denied opening the GPUs. "
    "Hint: check access to /dev/nvidia* (container started with --gpus?).",
}
NO_PYNVML_REASON = (
    "NVML not available: the nvidia-ml-py package (pynvml) is not installed. Hint: pip install nvidia-ml-py."
)
NO_GPUS_REASON = "NVML reports no GPUs on this host. Hint: in a container, start it with --gpus all."


class GpuSource(Protocol):
    """Anything that can report the GPUs: NVML here, a DCGM exporter elsewhere."""

    def read(self) -> GpuSnapshot: ...

    def close(self) -> None: ...


def decode_throttle(mask: int) -> tuple[str, ...]:
    """Active throttle reasons by name; unknown bits are kept as hex so nothing is silently dropped."""
    names: list[str] = []
    rest = mask & ~NOT_THROTTLING_MASK
    for bit, name in THROTTLE_BITS:
        if rest & bit:
            names.append(name)
            rest &= ~bit
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return tuple(names)


def cuda_version_str(version: int) -> str:
    """NVML's integer CUDA driver version (12040) as "12.4"."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def _text(value: Any) -> str | None:
    """Older pynvml returns bytes, newer str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else None


def _num(value: Any, scale: float = 1.0) -> float | None:
    return float(value) * scale if isinstance(value, int | float) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


class NvmlGpuSource:
    """Reads every GPU through NVML. ``read()`` never raises."""

    def __init__(self, nvml: ModuleType | None = None) -> None:
        self._nvml = nvml
        self._started = False
        self._closed = False
        self._reason: str | None = None
        self._handles: list[Any] = []
        self._static: dict[int, dict[str, Any]] = {}
        self._driver: str | None = None
        self._cuda: str | None = None
        self._mem_v2 = hasattr(nvml, "nvmlMemory_v2") if nvml is not None else True

    # --- the single error wrapper -------------------------------------------------------------
    def _query(self, func: str, *args: Any, not_supported: Any = None) -> Any:
        """Call ``nvml.<func>(*args)``; any NVML error, or a function this pynvml lacks, gives None.

        ``not_supported`` is returned instead for NVML_ERROR_NOT_SUPPORTED, where that means something
        (NVLink: "no links" rather than "unknown").
        """
        fn: Callable[..., Any] | None = getattr(self._nvml, func, None)
        if not callable(fn):
            return None
        nvml_error: type[BaseException] = getattr(self._nvml, "NVMLError", Exception)
        try:
            value = fn(*args)
        except nvml_error as err:
            return not_supported if getattr(err, "value", None) == _NOT_SUPPORTED else None
        except (UnicodeDecodeError, OSError, ValueError, TypeError):
            return None
        return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value

    # --- lifecycle ----------------------------------------------------------------------------
    def _start(self) -> None:
        """nvmlInit once; remember the reason if NVML cannot be used at all."""
        self._started = True
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                self._reason = NO_PYNVML_REASON
                return
            self._nvml = pynvml
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            code = getattr(err, "value", None)
            self._reason = _INIT_REASONS.get(code) if isinstance(code, int) else None
            if self._reason is None:
                self._reason = (
                    f"NVML init failed: {err} (code {code}). Hint: run nvidia-smi to check the driver."
                )
            return
        except OSError as err:  # a broken libnvidia-ml.so can fail in the loader itself
            self._reason = f"NVML init failed: {err}. Hint: reinstall the NVIDIA driver."
            return
        count = self._query("nvmlDeviceGetCount")
        if not count:
            self._reason = NO_GPUS_REASON if count == 0 else "NVML could not count the GPUs."
            return
        self._handles = [self._query("nvmlDeviceGetHandleByIndex", i) for i in range(int(count))]
        self._driver = _text(self._query("nvmlSystemGetDriverVersion"))
        cuda = self._query("nvmlSystemGetCudaDriverVersion")
        if not isinstance(cuda, int):
            cuda = self._query("nvmlSystemGetCudaDriverVersion_v2")
        self._cuda = cuda_version_str(cuda) if isinstance(cuda, int) and cuda > 0 else None

    def close(self) -> None:
        if self._started and self._reason is None and not self._closed and self._nvml is not None:
            self._query("nvmlShutdown")
        self._closed = True

    @property
    def reason(self) -> str | None:
        """Why NVML cannot be used (None while it can, or before the first read)."""
        return self._reason

    # --- reading --------------------------------------------------------------------------------
    def read(self) -> GpuSnapshot:
        now = time.time()
        if self._closed:
            return GpuSnapshot(t=now, available=False, reason="GPU source closed")
        try:
            if not self._started:
                self._start()
            if self._reason is not None:
                return GpuSnapshot(t=now, available=False, reason=self._reason)
            devices = tuple(self._read_device(i, h) for i, h in enumerate(self._handles))
        except Exception as err:  # never raise into the UI: report it as a state
            return GpuSnapshot(t=now, available=False, reason=f"NVML read failed: {err!r}")
        return GpuSnapshot(
            t=now,
            available=True,
            driver_version=self._driver,
            cuda_version=self._cuda,
            devices=devices,
        )

    def _static_fields(self, index: int, h: Any) -> dict[str, Any]:
        """Name, UUID, compute capability and NVLink count do not change while we run: read once."""
        cached = self._static.get(index)
        if cached is not None and None not in cached.values():
            return cached
        cc = self._query("nvmlDeviceGetCudaComputeCapability", h)
        fields = {
            "name": _text(self._query("nvmlDeviceGetName", h)),
            "uuid": _text(self._query("nvmlDeviceGetUUID", h)),
            "compute_capability": f"{cc[0]}.{cc[1]}" if isinstance(cc, tuple) and len(cc) == 2 else None,
            "nvlink_active": self._nvlink_active(h),
        }
        self._static[index] = fields
        return fields

    def _nvlink_active(self, h: Any) -> int | None:
        limit = getattr(self._nvml, "NVML_NVLINK_MAX_LINKS", 18)
        enabled = getattr(self._nvml, "NVML_FEATURE_ENABLED", 1)
        states = []
        for link in range(limit):
            state = self._query("nvmlDeviceGetNvLinkState", h, link, not_supported=_NOT_SUPPORTED_MARK)
            if link == 0 and state is _NOT_SUPPORTED_MARK:
                return 0  # PCIe-only card: skip asking about the other links
            states.append(state)
        if all(s is None for s in states):
            return None  # could not tell (permission, lost GPU ...)
        # Links past the device's last one answer with an error; only "enabled" counts as active.
        return sum(1 for s in states if isinstance(s, int) and s == enabled)

    def _read_device(self, index: int, h: Any) -> GpuDevice:
        if h is None:
            return GpuDevice(index=index)
        q = self._query
        nvml = self._nvml
        mem = None
        if self._mem_v2:  # v2 reports "used" without driver-reserved memory, as nvidia-smi does
            mem = q("nvmlDeviceGetMemoryInfo", h, getattr(nvml, "nvmlMemory_v2", None))
            self._mem_v2 = mem is not None
        if mem is None:
            mem = q("nvmlDeviceGetMemoryInfo", h)
        util = q("nvmlDeviceGetUtilizationRates", h)
        reasons = q("nvmlDeviceGetCurrentClocksEventReasons", h)
        if not isinstance(reasons, int):
            reasons = q("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        pstate = _int(q("nvmlDeviceGetPerformanceState", h))
        static = self._static_fields(index, h)
        return GpuDevice(
            index=index,
            name=static["name"],
            uuid=static["uuid"],
            compute_capability=static["compute_capability"],
            pstate=pstate if pstate is not None and 0 <= pstate <= 15 else None,
            power_w=_num(q("nvmlDeviceGetPowerUsage", h), 1e-3),
            power_limit_w=_num(q("nvmlDeviceGetEnforcedPowerLimit", h), 1e-3),
            util_gpu=_num(getattr(util, "gpu", None)),
            util_mem=_num(getattr(util, "memory", None)),
            mem_used=_int(getattr(mem, "used", None)),
            mem_free=_int(getattr(mem, "free", None)),
            mem_total=_int(getattr(mem, "total", None)),
            temperature_c=_num(q("nvmlDeviceGetTemperature", h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))),
            sm_clock_mhz=_int(q("nvmlDeviceGetClockInfo", h, getattr(nvml, "NVML_CLOCK_SM", 1))),
            mem_clock_mhz=_int(q("nvmlDeviceGetClockInfo", h, getattr(nvml, "NVML_CLOCK_MEM", 2))),
            throttle_reasons=decode_throttle(reasons) if isinstance(reasons, int) else None,
            energy_j=_num(q("nvmlDeviceGetTotalEnergyConsumption", h), 1e-3),
            nvlink_active=static["nvlink_active"],
            pcie_gen=_int(q("nvmlDeviceGetCurrPcieLinkGeneration", h)),
            pcie_width=_int(q("nvmlDeviceGetCurrPcieLinkWidth", h)),
        )


def open_gpu_source(fake_gpus: int = 0) -> GpuSource:
    """The real NVML source, or ``fake_gpus`` fake L40S cards (demo / tests) when > 0."""
    if fake_gpus > 0:
        from probes.fake_nvml import FakeNvml

        return NvmlGpuSource(FakeNvml(n_gpus=fake_gpus))
    return NvmlGpuSource()
