"""All arithmetic on the time series: counter rates, histogram means and quantiles, sparkline series.

Widgets and rules never subtract two scrapes themselves; they ask a :class:`Window`. The maths follows what
vLLM's own Grafana dashboard does with PromQL over a sliding range of scrapes:

- ``rate(counter[span])``: the increase over the samples in the span divided by the time they cover; a
  value that goes down means the server restarted, so the new value is the increase (PromQL ``increase``,
  without its extrapolation to the window edges).
- ``histogram_quantile(q, rate(bucket[span]))``: linear interpolation inside the bucket the rank falls in,
  except in the first bucket, where we return its upper bound flagged ``below_first_bucket`` instead of
  interpolating from 0 (vLLM's request-phase histograms start at 0.3 s; interpolating there invents
  numbers), and in +Inf, where we return the highest finite bound as PromQL does.
- mean = increase(sum) / increase(count).

``None`` always means "no data in that span", never 0.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from types import MappingProxyType

from probes.types import EMPTY, EngineSample, Histogram, Sample

__all__ = [
    "SERIES_METRICS",
    "Quantile",
    "Window",
    "WindowSummary",
    "hist_increase",
    "histogram_quantile",
    "increase",
    "summarize",
]

SERIES_METRICS = (
    "total_tps",
    "output_tps",
    "ttft_mean",
    "ttft_p99",
    "itl_mean",
    "itl_p99",
    "kv_usage",
    "waiting",
    "running",
    "preemptions_ps",
    "gpu_util",
    "power_w",
)


@dataclass(frozen=True, slots=True)
class Quantile:
    """A histogram quantile in seconds. ``below_first_bucket`` means the true value is "< value": the rank
    fell in the first bucket, whose lower edge the histogram does not know."""

    value: float
    below_first_bucket: bool = False


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """What happened between two instants (a benchmark phase): increases, rates, latencies and peaks.

    Latencies are seconds. A ``pXX`` whose field name is listed in ``below_first_bucket`` is an upper bound
    ("< value"), not an estimate. Every field is None when the samples did not carry it.
    """

    duration_s: float = 0.0
    samples: int = 0
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    total_tokens: float | None = None
    total_tps: float | None = None
    output_tps: float | None = None
    ttft_mean: float | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    ttft_p99: float | None = None
    itl_mean: float | None = None
    itl_p50: float | None = None
    itl_p90: float | None = None
    itl_p99: float | None = None
    e2e_mean: float | None = None
    e2e_p50: float | None = None
    e2e_p90: float | None = None
    e2e_p99: float | None = None
    queue_mean: float | None = None
    queue_p50: float | None = None
    queue_p90: float | None = None
    queue_p99: float | None = None
    preemptions: float | None = None
    prefix_hit_rate: float | None = None
    finished: Mapping[str, float] = field(default_factory=lambda: EMPTY)
    peak_running: float | None = None
    peak_waiting: float | None = None
    peak_kv_usage: float | None = None
    energy_j: float | None = None
    below_first_bucket: tuple[str, ...] = ()
    # The part of the span in which tokens were generated (from the last sample before the first token to
    # the first sample after the last one): what a client bench calls its duration, without start-up idle.
    active_s: float | None = None
    active_total_tps: float | None = None
    active_output_tps: float | None = None


# ---------------------------------------------------------------------------------------------------------
# Pure functions (usable on any list of samples, e.g. a replayed samples.jsonl)


def increase(values: Iterable[float]) -> float | None:
    """Total increase of a counter over consecutive readings; a decrease is a reset (the new value counts
    in full). None with fewer than two readings."""
    it = iter(values)
    prev = next(it, None)
    if prev is None:
        return None
    total = 0.0
    n = 1
    for v in it:
        total += v - prev if v >= prev else v
        prev = v
        n += 1
    return total if n >= 2 else None


def _bounds(h: Histogram) -> tuple[float, ...]:
    return tuple(b for b, _ in h.buckets)


def _delta(a: Histogram, b: Histogram) -> Histogram:
    """``b - a`` bucket by bucket; a reset (count or any bucket going down, or a new bucket layout)
    makes ``b`` itself the delta."""
    if b.count < a.count or len(a.buckets) != len(b.buckets):
        return b
    out = []
    for (ba, ca), (bb, cb) in zip(a.buckets, b.buckets, strict=True):
        if ba != bb or cb < ca:
            return b
        out.append((bb, cb - ca))
    return Histogram(buckets=tuple(out), sum=b.sum - a.sum, count=b.count - a.count)


def hist_increase(hs: Sequence[Histogram]) -> Histogram | None:
    """The histogram of observations made between the first and last of ``hs`` (PromQL ``increase`` per
    bucket, resets counted in full). None with fewer than two readings."""
    if len(hs) < 2:
        return None
    first, last = hs[0], hs[-1]
    if all(x.count <= y.count for x, y in itertools.pairwise(hs)):
        d = _delta(first, last)
        if d is not last:  # no reset visible between the two ends
            return d
    # A new bucket layout means a restarted server with other buckets: only the part after the last change
    # can be added up (its first reading counts in full, like any reset).
    start = 0
    for i in range(len(hs) - 1, 0, -1):
        if _bounds(hs[i]) != _bounds(hs[i - 1]):
            start = i - 1
            break
    acc = [0.0] * len(last.buckets)
    total_sum = total_count = 0.0
    for x, y in itertools.pairwise(hs[start:]):
        d = _delta(x, y)
        for j, (_, c) in enumerate(d.buckets):
            acc[j] += c
        total_sum += d.sum
        total_count += d.count
    return Histogram(buckets=tuple(zip(_bounds(last), acc, strict=True)), sum=total_sum, count=total_count)


def histogram_quantile(q: float, h: Histogram) -> Quantile | None:
    """PromQL's ``histogram_quantile`` on cumulative buckets, except that a rank in the first bucket gives
    its upper bound flagged ``below_first_bucket`` (never interpolated from 0). None when the histogram
    holds no observations or has no +Inf bucket."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    buckets = h.buckets
    if len(buckets) < 2 or buckets[-1][0] != float("inf"):
        return None
    # cumulative counts must not go down (PromQL's ensureMonotonic)
    cum: list[float] = []
    running = 0.0
    for _, c in buckets:
        running = max(running, c)
        cum.append(running)
    observations = cum[-1]
    if observations <= 0:
        return None
    rank = q * observations
    b = next((i for i in range(len(buckets) - 1) if cum[i] >= rank), len(buckets) - 1)
    if b == len(buckets) - 1:
        return Quantile(value=buckets[-2][0])
    if b == 0:
        return Quantile(value=buckets[0][0], below_first_bucket=True)
    start, end = buckets[b - 1][0], buckets[b][0]
    count = cum[b] - cum[b - 1]
    return Quantile(value=start + (end - start) * (rank - cum[b - 1]) / count)


def _mean(h: Histogram | None) -> float | None:
    return h.sum / h.count if h is not None and h.count > 0 else None


def _q(h: Histogram | None, q: float) -> Quantile | None:
    return histogram_quantile(q, h) if h is not None else None


def _engines(samples: Iterable[Sample]) -> list[tuple[float, EngineSample]]:
    return [(s.t, s.engine) for s in samples if s.engine is not None and s.engine.ok]


def _counter_rate(points: Sequence[tuple[float, EngineSample]], key: str) -> tuple[float, float] | None:
    """(increase, elapsed seconds) of one counter over engine samples that carry it."""
    vals = [(t, e.counters[key]) for t, e in points if key in e.counters]
    if len(vals) < 2:
        return None
    inc = increase(v for _, v in vals)
    elapsed = vals[-1][0] - vals[0][0]
    if inc is None or elapsed <= 0:
        return None
    return inc, elapsed


def _hist_over(points: Sequence[tuple[float, EngineSample]], key: str) -> Histogram | None:
    return hist_increase([e.histograms[key] for _, e in points if key in e.histograms])


def _latency(points: Sequence[tuple[float, EngineSample]], key: str) -> tuple[list[float | None], list[str]]:
    """[mean, p50, p90, p99] of one histogram and the names of the quantiles that are upper bounds."""
    h = _hist_over(points, key)
    values: list[float | None] = [_mean(h)]
    flagged: list[str] = []
    for q, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
        quant = _q(h, q)
        values.append(quant.value if quant else None)
        if quant is not None and quant.below_first_bucket:
            flagged.append(f"{key}_{name}")
    return values, flagged


def _active_span(points: Sequence[tuple[float, EngineSample]]) -> float | None:
    """Seconds in which tokens were generated: the intervals where the generation counter rose, with the
    first and last of them trimmed to the part that was busy (their tokens at the neighbouring interval's
    rate), so that a 1 Hz scrape does not add up to a second at each end of a short run."""
    steps: list[tuple[float, float]] = []  # (interval seconds, tokens generated in it)
    for (t0, e0), (t1, e1) in pairwise(points):
        before, after = e0.counters.get("generation_tokens"), e1.counters.get("generation_tokens")
        if before is None or after is None:
            steps.append((t1 - t0, 0.0))
            continue
        steps.append((t1 - t0, after - before if after >= before else after))
    busy = [i for i, (_, tokens) in enumerate(steps) if tokens > 0]
    if not busy:
        return None
    first, last = busy[0], busy[-1]
    span = sum(dt for dt, _ in steps[first : last + 1])
    if last - first >= 2:  # interior intervals give the steady rate to trim both ends with
        for edge, inner in ((first, first + 1), (last, last - 1)):
            dt, tokens = steps[edge]
            inner_dt, inner_tokens = steps[inner]
            if inner_tokens > 0 and inner_dt > 0:
                span -= dt - min(dt, tokens / (inner_tokens / inner_dt))
    return span


def summarize(samples: Iterable[Sample], t0: float, t1: float) -> WindowSummary:
    """Summary of the samples from the first at/after ``t0`` to the last at/before ``t1``. Rates divide by
    the time the engine samples cover (a server that answered only part of the time is not diluted)."""
    inside = [s for s in samples if t0 <= s.t <= t1]
    if len(inside) < 2:
        return WindowSummary(samples=len(inside))
    points = _engines(inside)

    def inc(key: str) -> float | None:
        r = _counter_rate(points, key)
        return r[0] if r else None

    prompt, gen = inc("prompt_tokens"), inc("generation_tokens")
    queries, hits = inc("prefix_queries"), inc("prefix_hits")
    total = prompt + gen if prompt is not None and gen is not None else None
    span = points[-1][0] - points[0][0] if len(points) >= 2 else 0.0
    active = _active_span(points)
    active_tps = (
        (total / active if total is not None else None, gen / active if gen is not None else None)
        if active
        else (None, None)
    )

    lat: dict[str, list[float | None]] = {}
    flagged: list[str] = []
    for key in ("ttft", "itl", "e2e", "queue"):
        lat[key], f = _latency(points, key)
        flagged += f

    finished: dict[str, float] = {}
    for reason in sorted({r for _, e in points for r in e.finished}):
        n = increase(e.finished[reason] for _, e in points if reason in e.finished)
        if n is not None:
            finished[reason] = n

    def peak(name: str) -> float | None:
        vals = [v for _, e in points if (v := getattr(e, name)) is not None]
        return max(vals) if vals else None

    return WindowSummary(
        active_s=active,
        active_total_tps=active_tps[0],
        active_output_tps=active_tps[1],
        duration_s=inside[-1].t - inside[0].t,
        samples=len(inside),
        prompt_tokens=prompt,
        generation_tokens=gen,
        total_tokens=total,
        total_tps=total / span if total is not None and span > 0 else None,
        output_tps=gen / span if gen is not None and span > 0 else None,
        ttft_mean=lat["ttft"][0],
        ttft_p50=lat["ttft"][1],
        ttft_p90=lat["ttft"][2],
        ttft_p99=lat["ttft"][3],
        itl_mean=lat["itl"][0],
        itl_p50=lat["itl"][1],
        itl_p90=lat["itl"][2],
        itl_p99=lat["itl"][3],
        e2e_mean=lat["e2e"][0],
        e2e_p50=lat["e2e"][1],
        e2e_p90=lat["e2e"][2],
        e2e_p99=lat["e2e"][3],
        queue_mean=lat["queue"][0],
        queue_p50=lat["queue"][1],
        queue_p90=lat["queue"][2],
        queue_p99=lat["queue"][3],
        preemptions=inc("preemptions"),
        prefix_hit_rate=hits / queries if queries and hits is not None else None,
        finished=MappingProxyType(finished),
        peak_running=peak("running"),
        peak_waiting=peak("waiting"),
        peak_kv_usage=peak("kv_usage"),
        energy_j=_energy(inside),
        below_first_bucket=tuple(flagged),
    )


def _energy(samples: Sequence[Sample]) -> float | None:
    """Joules used between the samples, summed over GPUs (per-device counters; a decrease is a reset)."""
    per: dict[int, list[float]] = {}
    for s in samples:
        if s.gpu is None or not s.gpu.available:
            continue
        for d in s.gpu.devices:
            if d.energy_j is not None:
                per.setdefault(d.index, []).append(d.energy_j)
    incs = [inc for vals in per.values() if (inc := increase(vals)) is not None]
    return sum(incs) if incs else None


# ---------------------------------------------------------------------------------------------------------
# Per-tick values for sparklines, computed once at push from the previous and the new sample


def _pair_increase(a: EngineSample, b: EngineSample, key: str) -> float | None:
    if key not in a.counters or key not in b.counters:
        return None
    return increase((a.counters[key], b.counters[key]))


def _tick(prev: Sample | None, cur: Sample) -> dict[str, float | None]:
    e = cur.engine if cur.engine is not None and cur.engine.ok else None
    out: dict[str, float | None] = dict.fromkeys(SERIES_METRICS)
    if e is not None:
        out["kv_usage"] = e.kv_usage
        out["waiting"] = e.waiting
        out["running"] = e.running
    pe = prev.engine if prev is not None and prev.engine is not None and prev.engine.ok else None
    if e is not None and pe is not None and prev is not None and cur.t > prev.t:
        dt = cur.t - prev.t
        p, g, pre = (_pair_increase(pe, e, k) for k in ("prompt_tokens", "generation_tokens", "preemptions"))
        out["output_tps"] = g / dt if g is not None else None
        out["total_tps"] = (p + g) / dt if p is not None and g is not None else None
        out["preemptions_ps"] = pre / dt if pre is not None else None
        for key in ("ttft", "itl"):
            if key in e.histograms and key in pe.histograms:
                d = _delta(pe.histograms[key], e.histograms[key])
                out[f"{key}_mean"] = _mean(d)
                q = _q(d, 0.99)
                out[f"{key}_p99"] = q.value if q else None
    gpu = cur.gpu
    if gpu is not None and gpu.available and gpu.devices:
        utils = [d.util_gpu for d in gpu.devices if d.util_gpu is not None]
        powers = [d.power_w for d in gpu.devices if d.power_w is not None]
        out["gpu_util"] = sum(utils) / len(utils) if utils else None
        out["power_w"] = sum(powers) if powers else None
    return out


class Window:
    """A bounded history of samples (``horizon_s`` seconds and at most ``maxlen`` samples) and every
    quantity derived from it. Samples must arrive in time order: an equal time is a duplicate and is
    dropped; an earlier time means the clock jumped back, and the history restarts (rates across the jump
    would be fiction)."""

    def __init__(self, horizon_s: float = 900.0, maxlen: int = 4096) -> None:
        self.horizon_s = horizon_s
        self.maxlen = maxlen
        self._samples: deque[Sample] = deque(maxlen=maxlen)
        self._ticks: deque[dict[str, float | None]] = deque(maxlen=maxlen)

    # -- history ---------------------------------------------------------------------------------------
    def push(self, sample: Sample) -> None:
        prev = self._samples[-1] if self._samples else None
        if prev is not None:
            if sample.t == prev.t:
                return
            if sample.t < prev.t:
                self._samples.clear()
                self._ticks.clear()
                prev = None
        self._ticks.append(_tick(prev, sample))
        self._samples.append(sample)
        cutoff = sample.t - self.horizon_s
        while self._samples[0].t < cutoff:
            self._samples.popleft()
            self._ticks.popleft()

    @property
    def latest(self) -> Sample | None:
        return self._samples[-1] if self._samples else None

    @property
    def samples(self) -> Sequence[Sample]:
        """The history, oldest first (a live view: do not keep it across pushes)."""
        return self._samples

    def _recent(self, span_s: float) -> list[tuple[float, EngineSample]]:
        """Engine samples within ``span_s`` of the latest sample, oldest first."""
        if not self._samples:
            return []
        cutoff = self._samples[-1].t - span_s
        picked = list(itertools.takewhile(lambda s: s.t >= cutoff, reversed(self._samples)))
        picked.reverse()
        return _engines(picked)

    # -- counters --------------------------------------------------------------------------------------
    def rate(self, counter: str, span_s: float = 10.0) -> float | None:
        """Per-second rate of a counter key (``COUNTER_KEYS`` or ``"total_tokens"``) over the last span."""
        if counter == "total_tokens":
            p = self.rate("prompt_tokens", span_s)
            g = self.rate("generation_tokens", span_s)
            return p + g if p is not None and g is not None else None
        r = _counter_rate(self._recent(span_s), counter)
        return r[0] / r[1] if r else None

    def prefix_hit_rate(self, span_s: float = 10.0, *, or_lifetime: bool = False) -> float | None:
        """Share of queried prompt tokens the prefix cache hit over the last span (0..1); None while no
        queries flow, unless ``or_lifetime``: then the lifetime share (an idle screen still shows it)."""
        queries, hits = self.rate("prefix_queries", span_s), self.rate("prefix_hits", span_s)
        if queries and hits is not None:
            return hits / queries
        latest = self.latest.engine if or_lifetime and self.latest is not None else None
        if latest is None:
            return None
        q, h = latest.counters.get("prefix_queries"), latest.counters.get("prefix_hits")
        return h / q if q and h is not None else None

    def finished(self, span_s: float = 60.0) -> dict[str, float]:
        """Requests finished per reason over the last span ({} when unknown)."""
        points = self._recent(span_s)
        out: dict[str, float] = {}
        for reason in {r for _, e in points for r in e.finished}:
            inc = increase(e.finished[reason] for _, e in points if reason in e.finished)
            if inc is not None:
                out[reason] = inc
        return out

    # -- histograms ------------------------------------------------------------------------------------
    def hist_delta(self, key: str, span_s: float = 10.0) -> Histogram | None:
        """Observations of histogram ``key`` made during the last span (bucket increases)."""
        return _hist_over(self._recent(span_s), key)

    def hist_mean(self, key: str, span_s: float = 10.0) -> float | None:
        return _mean(self.hist_delta(key, span_s))

    def hist_quantile(self, key: str, q: float, span_s: float = 10.0) -> Quantile | None:
        return _q(self.hist_delta(key, span_s), q)

    # -- sparklines and phases -------------------------------------------------------------------------
    def series(self, metric: str, n: int = 60) -> list[float | None]:
        """The last ``n`` per-tick values of a sparkline metric (``SERIES_METRICS``), oldest first; shorter
        when the history is. Rates are per tick (consecutive samples), gauges as read, gpu_util the mean
        over GPUs and power_w their sum."""
        if metric not in SERIES_METRICS:
            raise ValueError(f"unknown series {metric!r}; known: {', '.join(SERIES_METRICS)}")
        out = [t[metric] for t in itertools.islice(reversed(self._ticks), max(n, 0))]
        out.reverse()
        return out

    def summary(self, t0: float, t1: float) -> WindowSummary:
        return summarize(self._samples, t0, t1)
