"""Number → short text for the screen; one place so every panel says "n/r" the same way.

A value the server did not report is never drawn as 0: it is ``NR`` ("not reported").
"""

from __future__ import annotations

NR = "n/r"
GIB = 1024**3
MIB = 1024**2


def num(value: float | None, fmt: str = ".0f", unit: str = "") -> str:
    """``value`` formatted with ``fmt`` and ``unit``, or NR."""
    if value is None:
        return NR
    return f"{value:{fmt}}{unit}"


def tps(value: float | None) -> str:
    """Tokens per second, 3-4 significant digits (``1234``, ``56.7``, ``8.91``, ``12.3k``)."""
    if value is None:
        return NR
    if value >= 100_000:
        return f"{value / 1000:.0f}k"
    if value >= 10_000:
        return f"{value / 1000:.1f}k"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def seconds_ms(value: float | None) -> str:
    """A latency given in seconds, shown in ms (``104ms``) or s (``2.31s``)."""
    if value is None:
        return NR
    ms = value * 1000.0
    if ms >= 10_000:
        return f"{value:.1f}s"
    if ms >= 1000:
        return f"{value:.2f}s"
    if ms >= 100:
        return f"{ms:.0f}ms"
    if ms >= 10:
        return f"{ms:.1f}ms"
    return f"{ms:.2f}ms"


def pct(fraction: float | None, digits: int = 0) -> str:
    """A 0..1 fraction as a percentage."""
    if fraction is None:
        return NR
    return f"{fraction * 100:.{digits}f}%"


def gib(n_bytes: float | None, digits: int = 1) -> str:
    """Bytes in GiB (``27.5G``); small sizes in MiB."""
    if n_bytes is None:
        return NR
    if n_bytes < GIB:
        return f"{n_bytes / MIB:.0f}M"
    return f"{n_bytes / GIB:.{digits}f}G"


def count(value: float | None) -> str:
    """A gauge that counts things (requests); integral when it is."""
    if value is None:
        return NR
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.1f}"


def duration(seconds: float | None) -> str:
    """Elapsed time as ``m:ss`` or ``h:mm:ss``."""
    if seconds is None:
        return NR
    s = max(0, int(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells with an ellipsis (ASCII-width text assumed)."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"
