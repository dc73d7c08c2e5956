"""Read what ``vllm bench serve`` saved (or printed) into one normalised BenchResult.

The saved JSON's key set moved between 0.10 and 0.3x (``request_goodput:`` with a colon, no ``failed`` or
``backend`` or ``max_*`` before 0.13, ``endpoint_type`` vs ``backend``); ``--append-result`` writes several
objects one per line. Every form maps onto the same fields here so the comparison never guesses.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
_PCT_KEY = re.compile(r"^p(\d+(?:\.\d+)?)_([a-z0-9_]+)_ms$")
_STAT_KEY = re.compile(r"^(mean|median|std)_([a-z0-9_]+)_ms$")


class LatencyStats(BaseModel):
    """One latency metric in milliseconds; ``percentiles`` maps "50", "90", "99", "99.9" ... to a value."""

    model_config = ConfigDict(extra="forbid")

    mean: float | None = None
    median: float | None = None
    std: float | None = None
    percentiles: dict[str, float] = Field(default_factory=dict)

    def p(self, q: float | str) -> float | None:
        key = str(q)
        if key not in self.percentiles and isinstance(q, float) and q.is_integer():
            key = str(int(q))
        return self.percentiles.get(key)


class BenchResult(BaseModel):
    """The client's view of one benchmark run; None = not reported by that vLLM version."""

    model_config = ConfigDict(extra="forbid")

    date: str | None = None
    backend: str | None = None
    label: str | None = None
    model_id: str | None = None
    tokenizer_id: str | None = None
    num_prompts: int | None = None
    request_rate: float | str | None = None  # "inf" or requests per second
    burstiness: float | None = None
    max_concurrency: int | None = None
    duration_s: float | None = None
    completed: int | None = None
    failed: int | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    request_throughput: float | None = None
    request_goodput: float | None = None
    output_throughput: float | None = None
    total_token_throughput: float | None = None
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: float | None = None
    latency: dict[str, LatencyStats] = Field(default_factory=dict)  # "ttft", "tpot", "itl", "e2el", ...

    def stat(self, metric: str, which: str) -> float | None:
        """``stat("ttft", "mean")`` or ``stat("itl", "p99")``; None when not measured."""
        s = self.latency.get(metric)
        if s is None:
            return None
        if which.startswith("p"):
            return s.p(which[1:])
        v: float | None = getattr(s, which)
        return v

    @property
    def total_tokens(self) -> int | None:
        if self.total_input_tokens is None or self.total_output_tokens is None:
            return None
        return self.total_input_tokens + self.total_output_tokens


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return None if math.isnan(v) or math.isinf(v) else float(v)


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def normalise(raw: Mapping[str, Any]) -> BenchResult:
    """Map any 0.10-0.3x saved-result dict onto BenchResult (unknown keys are ignored)."""
    latency: dict[str, LatencyStats] = {}
    for key, value in raw.items():
        v = _num(value)
        if v is None:
            continue
        if m := _STAT_KEY.match(key):
            stats = latency.setdefault(m.group(2), LatencyStats())
            setattr(stats, m.group(1), v)
        elif m := _PCT_KEY.match(key):
            latency.setdefault(m.group(2), LatencyStats()).percentiles[m.group(1)] = v
    rate = raw.get("request_rate")
    duration = _num(raw.get("duration"))
    tin, tout = _int(raw.get("total_input_tokens")), _int(raw.get("total_output_tokens"))
    total_tps = _num(raw.get("total_token_throughput"))
    out_tps = _num(raw.get("output_throughput"))
    if duration:  # very old results lack the throughput keys: derive them from the same totals
        if total_tps is None and tin is not None and tout is not None:
            total_tps = (tin + tout) / duration
        if out_tps is None and tout is not None:
            out_tps = tout / duration
    return BenchResult(
        date=_str(raw.get("date")),
        backend=_str(raw.get("backend")) or _str(raw.get("endpoint_type")),
        label=_str(raw.get("label")),
        model_id=_str(raw.get("model_id")),
        tokenizer_id=_str(raw.get("tokenizer_id")),
        num_prompts=_int(raw.get("num_prompts")),
        request_rate="inf" if isinstance(rate, str) and rate.lower().startswith("inf") else _num(rate),
        burstiness=_num(raw.get("burstiness")),
        max_concurrency=_int(raw.get("max_concurrency")),
        duration_s=duration,
        completed=_int(raw.get("completed")),
        failed=_int(raw.get("failed")),
        total_input_tokens=tin,
        total_output_tokens=tout,
        request_throughput=_num(raw.get("request_throughput")),
        request_goodput=_num(raw.get("request_goodput", raw.get("request_goodput:"))),
        output_throughput=out_tps,
        total_token_throughput=total_tps,
        max_output_tokens_per_s=_num(raw.get("max_output_tokens_per_s")),
        max_concurrent_requests=_num(raw.get("max_concurrent_requests")),
        latency=latency,
    )


def iter_json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in ``text``: one file, or ``--append-result``'s one-per-line."""
    dec = json.JSONDecoder()
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return
        obj, i = dec.raw_decode(text, i)
        if not isinstance(obj, dict):
            raise ValueError(f"expected a JSON object, found {type(obj).__name__}")
        yield obj


def load_bench_raws(path: Path) -> list[dict[str, Any]]:
    """The raw objects in a saved-result file, in file order; ValueError with one line if unreadable."""
    try:
        objs = list(iter_json_objects(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise ValueError(f"{path}: not a vllm bench result: {e}") from None
    if not objs:
        raise ValueError(f"{path}: empty bench result file")
    return objs


def load_bench_jsons(path: Path) -> list[BenchResult]:
    return [normalise(o) for o in load_bench_raws(path)]


def load_bench_json(path: Path) -> BenchResult:
    """The result in ``path`` (the last one when --append-result stacked several)."""
    return normalise(load_bench_raws(path)[-1])


# The printed block ("============ Serving Benchmark Result ============"), for runs whose JSON is lost.
_TEXT_ROWS: dict[str, str] = {
    "successful requests": "completed",
    "failed requests": "failed",
    "maximum request concurrency": "max_concurrency",
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "request throughput (req/s)": "request_throughput",
    "request goodput (req/s)": "request_goodput",
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "peak concurrent requests": "max_concurrent_requests",
    "total token throughput (tok/s)": "total_token_throughput",  # 0.10.x printed "Total Token throughput"
}
_TEXT_LINE = re.compile(r"^\s*([A-Za-z][^:]*?):\s+(-?[\d,]+(?:\.\d+)?)\s*$")
_TEXT_LAT = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?)) ([a-z0-9_]+) \(ms\)$")


def parse_bench_text(text: str) -> BenchResult | None:
    """Parse the last printed result block; None when the text has none."""
    start = text.rfind("Serving Benchmark Result")
    if start < 0:
        return None
    raw: dict[str, Any] = {}
    for line in text[start:].splitlines()[1:]:
        m = _TEXT_LINE.match(line)
        if not m:
            continue
        label, value = m.group(1).strip().lower(), float(m.group(2).replace(",", ""))
        if label in _TEXT_ROWS:
            raw[_TEXT_ROWS[label]] = value
        elif lm := _TEXT_LAT.match(label):
            metric = lm.group(3)
            raw[f"p{lm.group(2)}_{metric}_ms" if lm.group(2) else f"{lm.group(1)}_{metric}_ms"] = value
    return normalise(raw) if raw else None
