"""Samples to JSON lines and back: what a session records in samples.jsonl and `replay` plays.

The dict shape is the dataclasses' own fields (asdict), so the file documents itself and a recorded session
replays through exactly the same window, diagnosis and screen as a live one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from probes.types import (
    EngineSample,
    GpuDevice,
    GpuSnapshot,
    Histogram,
    HostSample,
    ProcessTree,
    Sample,
)


def sample_to_dict(sample: Sample) -> dict[str, Any]:
    data = asdict(sample)
    engine = data.get("engine")
    if engine is not None:
        engine["counters"] = dict(engine["counters"])
        engine["finished"] = dict(engine["finished"])
    return data


def sample_to_json(sample: Sample) -> str:
    return json.dumps(sample_to_dict(sample), separators=(",", ":"))


def _engine(data: dict[str, Any]) -> EngineSample:
    hists = {
        key: Histogram(
            tuple((float(le), float(c)) for le, c in h["buckets"]), float(h["sum"]), float(h["count"])
        )
        for key, h in (data.get("histograms") or {}).items()
    }
    fields = {k: v for k, v in data.items() if k != "histograms"}
    return EngineSample(**{**fields, "histograms": hists})


def _gpu(data: dict[str, Any]) -> GpuSnapshot:
    devices = []
    for dev in data.get("devices") or ():
        reasons = dev.get("throttle_reasons")
        devices.append(GpuDevice(**{**dev, "throttle_reasons": None if reasons is None else tuple(reasons)}))
    return GpuSnapshot(**{**data, "devices": tuple(devices)})


def _host(data: dict[str, Any]) -> HostSample:
    tree = data.get("tree")
    if tree is not None:
        tree = ProcessTree(**{**tree, "pids": tuple(tree["pids"])})
    return HostSample(**{**data, "tree": tree})


def sample_from_dict(data: dict[str, Any]) -> Sample:
    return Sample(
        t=float(data["t"]),
        engine=_engine(data["engine"]) if data.get("engine") else None,
        gpu=_gpu(data["gpu"]) if data.get("gpu") else None,
        host=_host(data["host"]) if data.get("host") else None,
    )


def samples_path(session: Path) -> Path:
    return session / "samples.jsonl" if session.is_dir() else session


class ReplayError(Exception):
    """A recording that cannot be played; str() names the file and line."""


def read_samples(path: Path) -> Iterator[Sample]:
    """Every sample of a samples.jsonl file; a line that is not a sample raises ReplayError naming it."""
    path = samples_path(path)
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        lines = fh.readlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield sample_from_dict(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines) and not line.endswith("\n"):
                return  # a torn last line: the recorder was killed mid-write; the rest is good
            raise ReplayError(f"{path}:{number}: not a recorded sample ({exc})") from None


class ReplaySource:
    """A recorded session as a list of samples with a play head (the TUI steps it at its own pace)."""

    def __init__(self, path: Path) -> None:
        self.path = samples_path(path)
        self.samples = list(read_samples(self.path))
        if not self.samples:
            raise ReplayError(f"{self.path}: no samples recorded")
        self.position = 0

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def finished(self) -> bool:
        return self.position >= len(self.samples)

    def next(self) -> Sample | None:
        if self.finished:
            return None
        sample = self.samples[self.position]
        self.position += 1
        return sample

    def gap_after(self, index: int) -> float:
        """Recorded seconds between sample index and the next (for real-time playback)."""
        if index + 1 >= len(self.samples):
            return 0.0
        return max(0.0, self.samples[index + 1].t - self.samples[index].t)
