"""Start-up log parser for ``vllm serve``: memory facts, periodic engine stats and crashes.

The log is the only place vLLM states the facts behind the causal chain (weights GiB → KV cache
tokens → max concurrency), and the first place a crash shows. Formats of every version from 0.10
to 0.3x are accepted (see reference/vllm.md §2): with or without the ``(EngineCore pid=N)`` prefix,
with ANSI colours, with thousands commas. Parsing is line-by-line and never raises.
``LogFollower`` reads a growing file incrementally, as the runner tees the server's output into it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from probes.types import EMPTY, MemoryReport

ErrorKind = Literal["cuda_oom", "no_cache_memory", "max_seq_len", "address_in_use", "error"]
LogEventKind = Literal["memory", "ready", "stats", "error"]
MemoryValue = float | int | str | bool


@dataclass(frozen=True, slots=True)
class ServerError:
    """A crash cause found in the log; ``kind`` says which known failure it is ("error" = other)."""

    kind: ErrorKind
    message: str


@dataclass(frozen=True, slots=True)
class EngineStatsLine:
    """One periodic ``Engine 000: Avg prompt throughput ...`` line (every ~10 s while busy)."""

    engine: int | None  # None for the "N Engines Aggregated" line
    prompt_tps: float
    generation_tps: float
    running: int | None
    waiting: int | None
    kv_device: str | None  # "GPU" / "CPU"
    kv_usage: float | None  # 0..1
    prefix_hit_rate: float | None  # 0..1
    preemptions: int | None  # None when the line does not print it (zero, or an older vLLM)


@dataclass(frozen=True, slots=True)
class LogEvent:
    """What one log line said. ``memory`` holds the MemoryReport fields the line sets."""

    kind: LogEventKind
    line: str  # the line without ANSI codes
    memory: Mapping[str, MemoryValue] = field(default_factory=lambda: EMPTY)
    stats: EngineStatsLine | None = None
    error: ServerError | None = None


MAX_LINE = 64 * 1024  # longer lines are cut before parsing (keeps every regex cheap)

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_NUM = r"\d[\d,]*(?:\.\d+)?"
_HEADER = re.compile(
    r"^(?:.{0,64}?\((?P<proc>[\w.-]+) pid=\d+\) ?)?"  # optional VLLM_LOGGING_PREFIX + "(EngineCore pid=N)"
    r"(?:(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"(?: \[[^\]]{0,300}\])?\s?"  # [file.py:NN]
    r"|(?P<uvlevel>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+)?"  # uvicorn's own format
)
_WEIGHTS = re.compile(
    rf"Model loading took (?P<gib>{_NUM}) ?GiB(?: memory)? and (?P<s>{_NUM}) ?(?:seconds|secs|sec|s)\b"
)
_KV_MEM = re.compile(rf"Available KV cache memory: (?P<gib>{_NUM}) ?GiB")
_KV_SIZE = re.compile(rf"\b(?P<dev>[A-Z]{{2,5}})(?: \+ host)? KV cache size: (?P<n>{_NUM}) tokens")
_MAX_CONC = re.compile(rf"Maximum concurrency for (?P<len>{_NUM}) tokens per request: (?P<x>{_NUM}) ?x")
_CPU_KV = re.compile(rf"(?:Explicitly|Auto) set \((?P<gib>{_NUM})/(?P<total>{_NUM})\) GiB for KV cache")
_INIT = re.compile(
    rf"init engine \(profile, create kv cache, warmup model\) took (?P<s>{_NUM}) ?(?:seconds|secs|s)\b"
    rf"(?: \(compilation: (?P<c>{_NUM}) ?(?:seconds|s)\b)?"
)
_COMPILE_TOTAL = re.compile(rf"torch\.compile takes (?P<c>{_NUM}) ?s in total")
_LISTEN = re.compile(r"(?:Starting vLLM (?:API )?server(?: \d+)? on|Uvicorn running on) (?P<url>\S+)")
_READY = "Application startup complete"
_READY_FACTS: Mapping[str, MemoryValue] = MappingProxyType({"ready": True})

_STATS_ENGINE = re.compile(r"Engine (?P<e>\d+):|(?P<n>\d+) Engines Aggregated:")
_STATS_PROMPT = re.compile(rf"Avg prompt throughput: (?P<v>{_NUM}) tokens/s")
_STATS_GEN = re.compile(rf"Avg generation throughput: (?P<v>{_NUM}) tokens/s")
_STATS_RUNNING = re.compile(r"Running: (?P<v>\d+) reqs")
_STATS_WAITING = re.compile(r"(?:Waiting|Pending): (?P<v>\d+) reqs")
_STATS_PREEMPT = re.compile(r"Preemptions: (?P<v>\d+)")
_STATS_KV = re.compile(rf"\b(?P<dev>[A-Z]{{2,5}})(?: \+ host)? KV cache usage: (?P<v>{_NUM})%")
_STATS_PREFIX = re.compile(rf"(?:^|, )Prefix cache hit rate: (?:GPU: )?(?P<v>{_NUM})%")

_MAX_SEQ = re.compile(r"max seq len \((?P<n>\d+)\)")
_MAX_SEQ_KV = re.compile(r"stored in KV cache \((?P<n>\d+)\)")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::|$)")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _int(text: str) -> int:
    return int(float(text.replace(",", "")))


def _split_header(line: str) -> tuple[str | None, str]:
    """(log level or None, message) of a cleaned line."""
    m = _HEADER.match(line)
    if m is None:  # cannot happen (everything in the pattern is optional), kept for safety
        return None, line
    level = m.group("level") or m.group("uvlevel")
    return level, line[m.end() :]


def _classify_error(level: str | None, msg: str) -> ServerError | None:
    text = msg.strip()
    low = text.lower()
    if "cuda out of memory" in low or "outofmemoryerror" in low or "not enough gpu memory" in low:
        return ServerError("cuda_oom", text)
    if "no available memory for the cache blocks" in low or "less than requested memory for kv" in low:
        return ServerError("no_cache_memory", text)
    if "max seq len (" in low and "larger than" in low:
        return ServerError("max_seq_len", text)
    if "address already in use" in low:
        return ServerError("address_in_use", text)
    if msg[:1].isspace() or not text:
        return None  # an indented traceback frame / source line: part of an error, not one itself
    if level in ("ERROR", "CRITICAL") or text.startswith("Traceback (most recent call last)"):
        return ServerError("error", text)
    if level in (None, "ERROR") and _EXCEPTION.match(text):  # "ValueError: ..." ending a traceback
        return ServerError("error", text)
    return None


def max_seq_len_numbers(message: str) -> tuple[int | None, int | None]:
    """(max_model_len, KV tokens) from a max_seq_len error; the 0.3x wording states GiB, not tokens."""
    m, k = _MAX_SEQ.search(message), _MAX_SEQ_KV.search(message)
    return (int(m["n"]) if m else None, int(k["n"]) if k else None)


def _memory_facts(msg: str) -> dict[str, MemoryValue]:
    facts: dict[str, MemoryValue] = {}
    if m := _WEIGHTS.search(msg):
        facts["weights_gib"], facts["load_s"] = _num(m["gib"]), _num(m["s"])
    if m := _KV_MEM.search(msg):
        facts["kv_memory_gib"] = _num(m["gib"])
    if m := _KV_SIZE.search(msg):
        facts["kv_tokens"], facts["kv_device"] = _int(m["n"]), m["dev"]
    if m := _MAX_CONC.search(msg):
        facts["max_concurrency"] = _num(m["x"])
        facts["max_concurrency_request_tokens"] = _int(m["len"])
    if m := _CPU_KV.search(msg):
        facts["cpu_kv_gib"] = _num(m["gib"])
    if m := _INIT.search(msg):
        facts["engine_init_s"] = _num(m["s"])
        if m["c"] is not None:
            facts["compile_s"] = _num(m["c"])
    elif m := _COMPILE_TOTAL.search(msg):
        facts["compile_s"] = _num(m["c"])
    if m := _LISTEN.search(msg):
        facts["listening_url"] = m["url"].rstrip(".,;")
    return facts


def _stats(msg: str) -> EngineStatsLine | None:
    prompt, gen = _STATS_PROMPT.search(msg), _STATS_GEN.search(msg)
    if prompt is None or gen is None:
        return None
    engine = _STATS_ENGINE.search(msg)
    running, waiting = _STATS_RUNNING.search(msg), _STATS_WAITING.search(msg)
    preempt, kv, prefix = _STATS_PREEMPT.search(msg), _STATS_KV.search(msg), _STATS_PREFIX.search(msg)
    return EngineStatsLine(
        engine=int(engine["e"]) if engine and engine["e"] is not None else (None if engine else 0),
        prompt_tps=_num(prompt["v"]),
        generation_tps=_num(gen["v"]),
        running=int(running["v"]) if running else None,
        waiting=int(waiting["v"]) if waiting else None,
        kv_device=kv["dev"] if kv else None,
        kv_usage=_num(kv["v"]) / 100.0 if kv else None,
        prefix_hit_rate=_num(prefix["v"]) / 100.0 if prefix else None,
        preemptions=int(preempt["v"]) if preempt else None,
    )


def parse_line(line: str) -> LogEvent | None:
    """What a single log line says, or None for lines that carry nothing we use. Never raises."""
    clean = strip_ansi(line[:MAX_LINE]).strip("\r\n")
    level, msg = _split_header(clean)
    if _READY in msg:
        return LogEvent("ready", clean, memory=_READY_FACTS)
    error = _classify_error(level, msg)
    if error is not None:
        return LogEvent("error", clean, error=error)
    if "Avg prompt throughput" in msg and (stats := _stats(msg)) is not None:
        return LogEvent("stats", clean, stats=stats)
    facts = _memory_facts(msg)
    if facts:
        return LogEvent("memory", clean, memory=MappingProxyType(facts))
    return None


def _apply(report: MemoryReport, event: LogEvent) -> MemoryReport:
    changes: dict[str, Any] = dict(event.memory)
    return dataclasses.replace(report, **changes) if changes else report


def parse_memory_report(text: str) -> MemoryReport:
    """The memory facts of a whole log (later lines win). Never raises."""
    report = MemoryReport()
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        event = parse_line(raw)
        if event is not None:
            report = _apply(report, event)
    return report


class LogFollower:
    """Follows a growing log file: each ``poll()`` parses only what was appended since the last one.

    A missing file is "nothing yet"; a file that shrank or was replaced is read again from its start
    (facts already read stay until a new line overwrites them). A last line without its newline is
    held back until the newline arrives (``flush()`` parses it anyway, e.g. after the server died).
    """

    def __init__(
        self,
        path: Path,
        tail_lines: int = 500,
        max_errors: int = 50,
        max_read: int = 8 * 1024 * 1024,
    ) -> None:
        self.path = Path(path)
        self._offset = 0
        self._ident: tuple[int, int] | None = None
        self._partial = b""
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._max_errors = max_errors
        self._max_read = max_read
        self._report = MemoryReport()
        self._errors: list[ServerError] = []
        self._last_stats: EngineStatsLine | None = None
        self.lines_read = 0

    @property
    def report(self) -> MemoryReport:
        return self._report

    @property
    def errors(self) -> list[ServerError]:
        return list(self._errors)

    @property
    def last_stats(self) -> EngineStatsLine | None:
        return self._last_stats

    @property
    def primary_error(self) -> ServerError | None:
        """The error to show as "why it died": the first known kind, else the last exception line."""
        typed = [e for e in self._errors if e.kind != "error"]
        if typed:
            return typed[0]
        generic = [e for e in self._errors if not e.message.startswith("Traceback")]
        return generic[-1] if generic else None

    def tail(self, n: int = 20) -> list[str]:
        return list(self._tail)[-n:] if n > 0 else []

    def poll(self) -> list[LogEvent]:
        data = self._read_new()
        if not data:
            return []
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:  # a runaway line without newline: do not hold it forever
            lines.append(self._partial)
            self._partial = b""
        return self._consume(lines)

    def flush(self) -> list[LogEvent]:
        """Parse the held-back partial last line as if its newline had arrived."""
        rest, self._partial = self._partial, b""
        return self._consume([rest]) if rest else []

    def _read_new(self) -> bytes:
        try:
            st = os.stat(self.path)
            ident = (st.st_dev, st.st_ino)
            if (self._ident is not None and ident != self._ident) or st.st_size < self._offset:
                self._offset, self._partial = 0, b""  # replaced or truncated: start over
            self._ident = ident
            if st.st_size == self._offset:
                return b""
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read(min(st.st_size - self._offset, self._max_read))
        except OSError:
            return b""  # not there yet, or unreadable for now
        self._offset += len(data)
        return data

    def _consume(self, raw_lines: list[bytes]) -> list[LogEvent]:
        events: list[LogEvent] = []
        for raw in raw_lines:
            text = raw.decode("utf-8", errors="replace")
            # "\r" redraws a progress bar in place; each segment is a line, the last is what shows.
            segments = [s for s in text.split("\r") if s.strip()]
            if not segments:
                continue
            self.lines_read += 1
            self._tail.append(strip_ansi(segments[-1][:MAX_LINE]))
            for segment in segments:
                event = parse_line(segment)
                if event is not None:
                    self._record(event)
                    events.append(event)
        return events

    def _record(self, event: LogEvent) -> None:
        self._report = _apply(self._report, event)
        if event.stats is not None:
            self._last_stats = event.stats
        if event.error is not None and event.error not in self._errors:
            self._errors.append(event.error)
            del self._errors[: -self._max_errors]
