"""A module-like stand-in for ``pynvml`` with settable per-device state.

It exists so the *real* ``NvmlGpuSource`` code path runs everywhere: in unit tests, in benches and
behind ``--fake-gpus N`` on a machine without an NVIDIA GPU. It is a ``ModuleType`` subclass whose
function and constant names are exactly those of nvidia-ml-py (checked against 13.x), and its
errors carry the same numeric codes, so code written against it cannot drift from the real API.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar

GiB = 1024**3

# --- constants, same names and values as pynvml -------------------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999

NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_NVLINK_MAX_LINKS = 36
NVML_PSTATE_UNKNOWN = 32
nvmlMemory_v2 = 0x2000028

nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonApplicationsClocksSetting = 0x2
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonHwSlowdown = 0x8
nvmlClocksEventReasonSyncBoost = 0x10
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlClocksEventReasonHwThermalSlowdown = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksEventReasonDisplayClockSetting = 0x100

_ERROR_NAMES = {
    NVML_ERROR_UNINITIALIZED: ("Uninitialized", "Uninitialized"),
    NVML_ERROR_INVALID_ARGUMENT: ("InvalidArgument", "Invalid Argument"),
    NVML_ERROR_NOT_SUPPORTED: ("NotSupported", "Not Supported"),
    NVML_ERROR_NO_PERMISSION: ("NoPermission", "Insufficient Permissions"),
    NVML_ERROR_ALREADY_INITIALIZED: ("AlreadyInitialized", "Already Initialized"),
    NVML_ERROR_NOT_FOUND: ("NotFound", "Not Found"),
    NVML_ERROR_DRIVER_NOT_LOADED: ("DriverNotLoaded", "Driver Not Loaded"),
    NVML_ERROR_TIMEOUT: ("Timeout", "Timeout"),
    NVML_ERROR_LIBRARY_NOT_FOUND: ("LibraryNotFound", "NVML Shared Library Not Found"),
    NVML_ERROR_FUNCTION_NOT_FOUND: ("FunctionNotFound", "Function Not Found"),
    NVML_ERROR_GPU_IS_LOST: ("GpuIsLost", "GPU is lost"),
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: (
        "LibRmVersionMismatch",
        "RM has detected an NVML/RM version mismatch.",
    ),
    NVML_ERROR_UNKNOWN: ("Unknown", "Unknown Error"),
}


class NVMLError(Exception):
    """Like pynvml's: ``NVMLError(code)`` builds the subclass for that code; ``.value`` is the code."""

    _by_value: ClassVar[dict[int, type[NVMLError]]] = {}
    value: int

    def __new__(cls, value: int = NVML_ERROR_UNKNOWN) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._by_value.get(value, NVMLError)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, value: int = NVML_ERROR_UNKNOWN) -> None:
        super().__init__(value)

    def __str__(self) -> str:
        return _ERROR_NAMES.get(self.value, ("", f"NVML Error with code {self.value}"))[1]


def _error_class(code: int, suffix: str) -> type[NVMLError]:
    def new(cls: type[NVMLError], *_args: object) -> NVMLError:
        obj = Exception.__new__(cls)
        obj.value = code
        return obj

    def init(self: NVMLError, *_args: object) -> None:
        Exception.__init__(self, code)

    cls = type(f"NVMLError_{suffix}", (NVMLError,), {"__new__": new, "__init__": init})
    NVMLError._by_value[code] = cls
    return cls


NVMLError_Uninitialized = _error_class(NVML_ERROR_UNINITIALIZED, "Uninitialized")
NVMLError_InvalidArgument = _error_class(NVML_ERROR_INVALID_ARGUMENT, "InvalidArgument")
NVMLError_NotSupported = _error_class(NVML_ERROR_NOT_SUPPORTED, "NotSupported")
NVMLError_NoPermission = _error_class(NVML_ERROR_NO_PERMISSION, "NoPermission")
NVMLError_AlreadyInitialized = _error_class(NVML_ERROR_ALREADY_INITIALIZED, "AlreadyInitialized")
NVMLError_NotFound = _error_class(NVML_ERROR_NOT_FOUND, "NotFound")
NVMLError_DriverNotLoaded = _error_class(NVML_ERROR_DRIVER_NOT_LOADED, "DriverNotLoaded")
NVMLError_Timeout = _error_class(NVML_ERROR_TIMEOUT, "Timeout")
NVMLError_LibraryNotFound = _error_class(NVML_ERROR_LIBRARY_NOT_FOUND, "LibraryNotFound")
NVMLError_FunctionNotFound = _error_class(NVML_ERROR_FUNCTION_NOT_FOUND, "FunctionNotFound")
NVMLError_GpuIsLost = _error_class(NVML_ERROR_GPU_IS_LOST, "GpuIsLost")
NVMLError_LibRmVersionMismatch = _error_class(NVML_ERROR_LIB_RM_VERSION_MISMATCH, "LibRmVersionMismatch")
NVMLError_Unknown = _error_class(NVML_ERROR_UNKNOWN, "Unknown")


@dataclass
class FakeDevice:
    """Mutable state of one fake GPU; tests and the demo set these fields directly."""

    index: int
    name: str = "NVIDIA L40S"
    uuid: str = ""
    compute_capability: tuple[int, int] = (8, 9)
    pstate: int = 8
    power_w: float = 32.0
    power_limit_w: float = 350.0
    util_gpu: int = 0
    util_mem: int = 0
    mem_total: int = 46 * GiB
    mem_used: int = 512 * 1024**2
    temperature_c: int = 35
    sm_clock_mhz: int = 210
    mem_clock_mhz: int = 405
    throttle: int = nvmlClocksEventReasonGpuIdle
    energy_mj: int = 1_000_000
    nvlink: list[bool] = field(default_factory=list)  # per link: active?
    pcie_gen: int = 4
    pcie_width: int = 16


@dataclass(frozen=True)
class FakeHandle:
    index: int


@dataclass(frozen=True)
class FakeMemory:
    total: int
    free: int
    used: int


@dataclass(frozen=True)
class FakeUtilization:
    gpu: int
    memory: int


class FakeNvml(ModuleType):
    """``pynvml`` look-alike. Functions raise ``NVMLError`` subclasses just as the real ones do.

    ``fail_init(code)`` makes ``nvmlInit`` fail (e.g. ``NVML_ERROR_LIBRARY_NOT_FOUND``);
    ``fail(func, code, device=None)`` makes one function raise for one or all devices;
    ``remove(func)`` makes the function absent, like an older pynvml; ``calls`` counts calls.
    """

    def __init__(
        self,
        n_gpus: int = 1,
        name: str = "NVIDIA L40S",
        mem_total: int = 46 * GiB,
        power_limit_w: float = 350.0,
        compute_capability: tuple[int, int] = (8, 9),
        driver_version: str = "550.54.15",
        cuda_version: int = 12040,
        nvlink_links: int = 0,
        bytes_strings: bool = False,
    ) -> None:
        super().__init__("fake_nvml", __doc__)
        # Module-level names (constants, error classes) become attributes, as on the real module.
        for key, value in globals().items():
            if key.startswith(("NVML_", "NVMLError", "nvmlClocks", "nvmlMemory")):
                setattr(self, key, value)
        self.devices = [
            FakeDevice(
                index=i,
                name=name,
                uuid=f"GPU-fake0000-0000-0000-0000-{i:012d}",
                compute_capability=compute_capability,
                power_limit_w=power_limit_w,
                mem_total=mem_total,
                nvlink=[True] * nvlink_links,
            )
            for i in range(n_gpus)
        ]
        self.driver_version = driver_version
        self.cuda_version = cuda_version
        self.bytes_strings = bytes_strings
        self.calls: Counter[str] = Counter()
        self.initialized = 0
        self._init_error: int | None = None
        self._failures: dict[tuple[str, int | None], int] = {}
        self._removed: set[str] = set()

    # --- test controls -----------------------------------------------------------------------
    def fail_init(self, code: int = NVML_ERROR_LIBRARY_NOT_FOUND) -> None:
        self._init_error = code

    def fail(self, func: str, code: int = NVML_ERROR_NOT_SUPPORTED, device: int | None = None) -> None:
        self._failures[(func, device)] = code

    def remove(self, func: str) -> None:
        self._removed.add(func)

    def advance(self, seconds: float) -> None:
        """Let time pass: every device's energy counter grows by power x time."""
        for dev in self.devices:
            dev.energy_mj += round(dev.power_w * seconds * 1000)

    def set_busy(self, index: int, util: int = 97, power_w: float | None = None) -> None:
        """A convenience for demos: a device running a batch (P0, high util and power)."""
        dev = self.devices[index]
        dev.util_gpu, dev.util_mem, dev.pstate = util, max(util - 30, 0), 0
        dev.power_w = power_w if power_w is not None else dev.power_limit_w * 0.95
        dev.sm_clock_mhz, dev.mem_clock_mhz, dev.throttle = 2520, 9001, 0

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in ModuleType.__getattribute__(self, "_removed"):
            raise AttributeError(name)
        return ModuleType.__getattribute__(self, name)

    # --- plumbing ----------------------------------------------------------------------------
    def _enter(self, func: str, handle: FakeHandle | None = None) -> FakeDevice | None:
        self.calls[func] += 1
        if func != "nvmlInit" and not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        dev_index = handle.index if handle is not None else None
        code = self._failures.get((func, dev_index), self._failures.get((func, None)))
        if code is not None:
            raise NVMLError(code)
        return self.devices[handle.index] if handle is not None else None

    def _text(self, value: str) -> str | bytes:
        return value.encode() if self.bytes_strings else value

    # --- the pynvml surface the probe uses -----------------------------------------------------
    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if self._init_error is not None:
            raise NVMLError(self._init_error)
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialized = max(0, self.initialized - 1)

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._enter("nvmlSystemGetDriverVersion")
        return self._text(self.driver_version)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.devices):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        code = self._failures.get(("nvmlDeviceGetHandleByIndex", index))
        if code is not None:
            raise NVMLError(code)
        return FakeHandle(index)

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str | bytes:
        return self._text(self._dev("nvmlDeviceGetName", handle).name)

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str | bytes:
        return self._text(self._dev("nvmlDeviceGetUUID", handle).uuid)

    def nvmlDeviceGetCudaComputeCapability(self, handle: FakeHandle) -> tuple[int, int]:
        return self._dev("nvmlDeviceGetCudaComputeCapability", handle).compute_capability

    def nvmlDeviceGetPerformanceState(self, handle: FakeHandle) -> int:
        return self._dev("nvmlDeviceGetPerformanceState", handle).pstate

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        return round(self._dev("nvmlDeviceGetPowerUsage", handle).power_w * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        return round(self._dev("nvmlDeviceGetEnforcedPowerLimit", handle).power_limit_w * 1000)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> FakeUtilization:
        dev = self._dev("nvmlDeviceGetUtilizationRates", handle)
        return FakeUtilization(gpu=dev.util_gpu, memory=dev.util_mem)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> FakeMemory:
        dev = self._dev("nvmlDeviceGetMemoryInfo", handle)
        if version is not None and version != nvmlMemory_v2:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        used = min(dev.mem_used, dev.mem_total)
        return FakeMemory(total=dev.mem_total, free=dev.mem_total - used, used=used)

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        dev = self._dev("nvmlDeviceGetTemperature", handle)
        if sensor != NVML_TEMPERATURE_GPU:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return dev.temperature_c

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, type: int) -> int:  # `type`: pynvml's own name
        dev = self._dev("nvmlDeviceGetClockInfo", handle)
        if type == NVML_CLOCK_MEM:
            return dev.mem_clock_mhz
        if type in (NVML_CLOCK_SM, NVML_CLOCK_GRAPHICS):
            return dev.sm_clock_mhz
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        return self._dev("nvmlDeviceGetCurrentClocksEventReasons", handle).throttle

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        return self._dev("nvmlDeviceGetCurrentClocksThrottleReasons", handle).throttle

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeHandle) -> int:
        return self._dev("nvmlDeviceGetTotalEnergyConsumption", handle).energy_mj

    def nvmlDeviceGetNvLinkState(self, device: FakeHandle, link: int) -> int:
        dev = self._dev("nvmlDeviceGetNvLinkState", device)
        if not dev.nvlink:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(dev.nvlink):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return NVML_FEATURE_ENABLED if dev.nvlink[link] else NVML_FEATURE_DISABLED

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: FakeHandle) -> int:
        return self._dev("nvmlDeviceGetCurrPcieLinkGeneration", handle).pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: FakeHandle) -> int:
        return self._dev("nvmlDeviceGetCurrPcieLinkWidth", handle).pcie_width

    def _dev(self, func: str, handle: FakeHandle) -> FakeDevice:
        dev = self._enter(func, handle)
        assert dev is not None
        return dev
