"""GPU panel: one block per GPU; with no GPU, why not, plus host CPU/RAM and the server's process tree."""

from __future__ import annotations

from probes.types import GpuDevice, GpuSnapshot, HostSample, MemoryReport
from tui import format as fmt
from tui.view import Frame
from tui.widgets.bars import meter, split_bar
from tui.widgets.lines import Line, LinePanel, line

GIB = float(1024**3)


def _vram_split(dev: GpuDevice, memory: MemoryReport | None) -> tuple[float, float, float] | None:
    """(weights, kv, other) bytes when the server log says and this GPU can hold them; else None."""
    if memory is None or dev.mem_used is None or memory.kv_device == "CPU":
        return None
    if memory.weights_gib is None or memory.kv_memory_gib is None:
        return None
    weights = memory.weights_gib * GIB
    kv = memory.kv_memory_gib * GIB
    if dev.mem_used < weights + kv:
        return None  # this GPU does not hold that server (or the numbers are per another rank)
    return weights, kv, dev.mem_used - weights - kv


def _pstate(dev: GpuDevice) -> str:
    return f"P{dev.pstate}" if dev.pstate is not None else "P?"


def _power(dev: GpuDevice) -> str:
    cap = f"/{dev.power_limit_w:.0f}" if dev.power_limit_w is not None else ""
    return f"{fmt.num(dev.power_w)}{cap}W" if dev.power_w is not None else f"{fmt.NR}{cap}W"


def _vram_text(dev: GpuDevice) -> str:
    used = fmt.gib(dev.mem_used)
    total = fmt.gib(dev.mem_total)
    return f"{used}/{total}"


def _vram_bar(dev: GpuDevice, memory: MemoryReport | None, width: int) -> Line:
    label = _vram_text(dev)
    bar_w = max(4, width - len("VRAM ") - len(label) - 1)
    if dev.mem_total is None or dev.mem_used is None:
        return line(("VRAM ", "lp--label"), *meter(None, bar_w), " ", (label, "lp--value"))
    split = _vram_split(dev, memory)
    if split is None:
        parts = [(float(dev.mem_used), "lp--bar-used")]
    else:
        w, kv, other = split
        parts = [(w, "lp--bar-weights"), (kv, "lp--bar-kv"), (other, "lp--bar-other")]
    bar = split_bar(parts, float(dev.mem_total), bar_w)
    return line(("VRAM ", "lp--label"), *bar, " ", (label, "lp--value"))


def device_lines(dev: GpuDevice, memory: MemoryReport | None, width: int) -> list[Line]:
    """The full block for one GPU: name, P-state, power/cap, util, temperature, VRAM, split, clocks."""
    name = fmt.fit(f"{dev.index} {dev.name or 'GPU'}", max(1, width - 4))
    lines = [
        line((name, "lp--value"), " " * max(1, width - len(name) - 3), (_pstate(dev), "lp--accent")),
        line(
            ("pwr ", "lp--label"),
            (_power(dev), "lp--value"),
            ("  util ", "lp--label"),
            (fmt.num(dev.util_gpu, ".0f", "%"), "lp--value"),
            ("  ", ""),
            (fmt.num(dev.temperature_c, ".0f", "°C"), "lp--value"),
        ),
        _vram_bar(dev, memory, width),
    ]
    split = _vram_split(dev, memory)
    if split is not None:
        w, kv, other = split
        lines.append(
            line(
                ("█", "lp--bar-weights"),
                (f"weights {fmt.gib(w)} ", ""),
                ("▓", "lp--bar-kv"),
                (f"KV {fmt.gib(kv)} ", ""),
                ("▒", "lp--bar-other"),
                (f"other {fmt.gib(other)}", ""),
            )
        )
    clocks = line(
        ("SM ", "lp--label"),
        (fmt.num(dev.sm_clock_mhz, "d", "MHz"), "lp--value"),
        ("  mem ", "lp--label"),
        (fmt.num(dev.mem_clock_mhz, "d", "MHz"), "lp--value"),
    )
    if dev.throttle_reasons:
        clocks += (("  throttle " + ",".join(dev.throttle_reasons), "lp--warn"),)
    lines.append(clocks)
    return lines


def medium_lines(dev: GpuDevice, memory: MemoryReport | None, width: int) -> list[Line]:
    """Two lines per GPU: everything but clocks, for a few GPUs in a short panel."""
    stats = (
        f" {_pstate(dev)} {fmt.num(dev.util_gpu, '.0f', '%'):>4} {_power(dev)} "
        f"{fmt.num(dev.temperature_c, '.0f', '°C')}"
    )
    name = fmt.fit(f"{dev.index} {dev.name or 'GPU'}", max(1, width - len(stats)))
    return [line((name, "lp--value"), (stats, "")), _vram_bar(dev, memory, width)]


def compact_line(dev: GpuDevice, width: int) -> Line:
    """One GPU in one line, for many GPUs in a short panel."""
    head = f"{dev.index} {_pstate(dev)} "
    util = fmt.num(dev.util_gpu, ".0f", "%")
    tail = f" {util:>4} {_power(dev)} {_vram_text(dev)} {fmt.num(dev.temperature_c, '.0f', '°C')}"
    frac = dev.mem_used / dev.mem_total if dev.mem_used is not None and dev.mem_total else None
    bar_w = max(0, min(12, width - len(head) - len(tail)))
    return line((head, "lp--value"), *meter(frac, bar_w), (tail, ""))


def host_lines(reason: str | None, host: HostSample | None, width: int) -> list[Line]:
    """No GPU: say why, then what the host and the server's process tree use."""
    lines: list[Line] = [line((fmt.fit(f"no GPU: {reason or 'not read yet'}", width), "lp--warn"))]
    if host is None:
        lines.append(line(("host: ", "lp--label"), (fmt.NR, "lp--dim")))
        return lines
    cores = f" of {host.cpu_count} cores" if host.cpu_count else ""
    lines.append(
        line(
            ("host CPU ", "lp--label"),
            (fmt.num(host.cpu_percent, ".0f", "%"), "lp--value"),
            (cores, "lp--dim"),
            ("  load ", "lp--label"),
            (fmt.num(host.load1, ".2f"), "lp--value"),
        )
    )
    ram = f"{fmt.gib(host.ram_used)}/{fmt.gib(host.ram_total)}"
    frac = host.ram_used / host.ram_total if host.ram_used is not None and host.ram_total else None
    lines.append(
        line(("RAM  ", "lp--label"), *meter(frac, max(4, width - 6 - len(ram))), " ", (ram, "lp--value"))
    )
    tree = host.tree
    if tree is None:
        lines.append(line(("server tree ", "lp--label"), ("none", "lp--dim")))
    else:
        lines.append(
            line(
                ("server pid ", "lp--label"),
                (str(tree.root_pid), "lp--value"),
                (f"  {len(tree.pids)} procs", "lp--dim"),
            )
        )
        lines.append(
            line(
                ("  CPU ", "lp--label"),
                (f"{tree.cpu_percent:.0f}%", "lp--value"),
                ("  RSS ", "lp--label"),
                (fmt.gib(tree.rss_bytes), "lp--value"),
            )
        )
    return lines


def gpu_panel_lines(
    gpu: GpuSnapshot | None, host: HostSample | None, memory: MemoryReport | None, width: int, height: int
) -> list[Line]:
    if gpu is None or not gpu.available or not gpu.devices:
        reason = gpu.reason if gpu is not None else None
        if gpu is not None and gpu.available and not gpu.devices:
            reason = reason or "NVML reports 0 devices"
        return host_lines(reason, host, width)
    height = max(height, 1)
    blocks = [device_lines(d, memory, width) for d in gpu.devices]
    if sum(len(b) for b in blocks) <= height:
        return [ln for b in blocks for ln in b]
    if 2 * len(gpu.devices) <= height:
        return [ln for d in gpu.devices for ln in medium_lines(d, memory, width)]
    lines = [compact_line(d, width) for d in gpu.devices]
    if len(lines) > height:
        hidden = len(lines) - height + 1
        lines = [*lines[: height - 1], line((f"+{hidden} more GPUs (wider / taller terminal)", "lp--dim"))]
    return lines


class GpuPanel(LinePanel):
    """Per-GPU status; the host instead when there is no GPU."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._frame: Frame | None = None
        self.border_title = "GPU"

    def show(self, frame: Frame) -> None:
        self._frame = frame
        self.rebuild()

    def rebuild(self) -> None:
        f = self._frame
        if f is None:
            return
        has_gpu = f.gpu is not None and f.gpu.available and bool(f.gpu.devices)
        self.border_title = "GPU" if has_gpu else "Host (no GPU)"
        size = self.content_size
        self.set_lines(gpu_panel_lines(f.gpu, f.host, f.memory, max(20, size.width), size.height))
