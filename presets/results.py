"""Results on disk: one folder per session, one atomically written JSON per finished phase.

A phase record is written before anything else happens after a phase ends, via temp file + fsync +
os.replace, so a later crash can lose at most the phase that was running, never a finished one. Every
string written passes the secret mask. The comparison table (every metric with its ratio to the
baseline phase, as Markdown, CSV or JSON) is built from these records or from plain bench JSON files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import platform
import re
import secrets
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from presets.bench_json import BenchResult, load_bench_json, load_bench_raws, normalise

__all__ = [
    "SECRET_MASK",
    "PhaseRecord",
    "SessionStore",
    "atomic_write_text",
    "is_secret_key",
    "load_bench_json",
    "load_session",
    "load_session_info",
    "mask",
    "mask_argv",
    "mask_text",
    "to_jsonable",
]

SECRET_MASK = "***"
MIN_SECRET_LEN = 4  # shorter "secrets" would mask innocent text everywhere

# ---------------------------------------------------------------------------------------------- masking


def _norm_key(key: str) -> str:
    return key.lstrip("-").lower().replace("-", "_")


def is_secret_key(key: str) -> bool:
    """--api-key, api_key, OPENAI_API_KEY, HF_TOKEN, *secret*, *password*; not "tokens", "tokenizer" or
    "total_token_throughput" (a secret names its token last). Only strings under such keys are masked."""
    k = _norm_key(key)
    if "api_key" in k or "apikey" in k:
        return True
    words = k.split("_")
    return words[-1].endswith("token") or any("secret" in w or w in ("password", "passwd") for w in words)


_FLAG = re.compile(r"^--?[A-Za-z][\w-]*$")
_TEXT_FLAG = re.compile(
    r"(?<![\w-])(--?(?:[\w-]*[-_])?(?:api[-_]?key|\w*token|\w*secret|password))(=|\s+)(\S+)", re.I
)
_TEXT_KV = re.compile(
    r"\b([a-z_]*(?:api_?key|token|secret|password))([\"']?\s*[:=]\s*[\[\s\"']*)([^\s\"',}\]]+)", re.I
)
_BEARER = re.compile(r"(Bearer\s+)(\S+)")


def mask_text(text: str, values: Iterable[str] = ()) -> str:
    """Mask known secret values and ``--api-key X`` / ``API_KEY=X`` / ``'token': 'X'`` shapes in free text."""
    for v in sorted(values, key=len, reverse=True):
        if len(v) >= MIN_SECRET_LEN:
            text = text.replace(v, SECRET_MASK)
    text = _TEXT_FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{SECRET_MASK}", text)
    text = _TEXT_KV.sub(lambda m: f"{m.group(1)}{m.group(2)}{SECRET_MASK}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)}{SECRET_MASK}", text)


def mask_argv(argv: Sequence[str], values: Iterable[str] = ()) -> list[str]:
    """``--api-key sk`` -> ``--api-key ***`` and ``--hf-token=x`` -> ``--hf-token=***``."""
    vals = list(values)
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append(SECRET_MASK)
            hide_next = False
            continue
        flag, eq, _ = a.partition("=")
        if _FLAG.match(flag) and is_secret_key(flag):
            if eq:
                out.append(f"{flag}={SECRET_MASK}")
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(mask_text(a, vals))
    return out


def secret_values(obj: Any) -> set[str]:
    """The secret strings an object carries (env values, args after a secret flag), for masking text."""
    found: set[str] = set()
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if isinstance(k, str) and is_secret_key(k) and isinstance(v, str) and len(v) >= MIN_SECRET_LEN:
                found.add(v)
            else:
                found |= secret_values(v)
    elif isinstance(obj, list | tuple):
        for i, a in enumerate(obj):
            if isinstance(a, str) and _FLAG.match(a.partition("=")[0]) and is_secret_key(a.partition("=")[0]):
                v = a.partition("=")[2] or (obj[i + 1] if i + 1 < len(obj) else "")
                if isinstance(v, str) and len(v) >= MIN_SECRET_LEN:
                    found.add(v)
            else:
                found |= secret_values(a)
    return found


def mask(obj: Any, values: Iterable[str] = ()) -> Any:
    """A JSON-like copy of ``obj`` with every secret replaced by ``***`` (numbers under a key are kept)."""
    vals = set(values) | secret_values(obj)
    return _mask(obj, vals)


def _mask(obj: Any, vals: set[str]) -> Any:
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            secret = isinstance(k, str) and is_secret_key(k)
            if secret and isinstance(v, str):
                out[k] = SECRET_MASK if v else v
            elif secret and isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
                out[k] = [SECRET_MASK for _ in v]
            else:
                out[k] = _mask(v, vals)
        return out
    if isinstance(obj, list | tuple):
        if obj and all(isinstance(x, str) for x in obj):
            return mask_argv(obj, vals)
        return [_mask(x, vals) for x in obj]
    if isinstance(obj, str):
        return mask_text(obj, vals)
    return obj


# ------------------------------------------------------------------------------------------ JSON + disk


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, pydantic models, mappings, paths, datetimes -> plain JSON (inf as "+Inf", NaN as null)."""
    if isinstance(obj, BaseModel):
        return to_jsonable(obj.model_dump(mode="python"))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "+Inf" if obj > 0 else "-Inf"
        return obj
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, datetime):
        return obj.isoformat()
    return obj


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``path`` so that it is either the old file or the complete new one, never a partial."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# ---------------------------------------------------------------------------------------------- records

Status = Literal["ok", "failed", "cancelled"]


class PhaseRecord(BaseModel):
    """Everything one phase produced; ``bench`` is the normalised client view, ``bench_raw`` vLLM's own."""

    model_config = ConfigDict(extra="ignore")

    index: int
    name: str
    server: dict[str, Any] = Field(default_factory=dict)  # ServerPreset dump
    traffic: dict[str, Any] = Field(default_factory=dict)  # TrafficPreset dump
    status: Status
    error: str | None = None
    log_tail: list[str] = Field(default_factory=list)
    memory: dict[str, Any] = Field(default_factory=dict)  # MemoryReport fields
    bench: BenchResult | None = None
    bench_raw: dict[str, Any] | None = None
    window: dict[str, Any] = Field(default_factory=dict)  # WindowSummary fields
    findings: list[dict[str, Any]] = Field(default_factory=list)
    timings: dict[str, float | None] = Field(default_factory=dict)  # start_s, ready_s, bench_s, stop_s, ...
    energy_j: float | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    files: dict[str, str] = Field(default_factory=dict)  # serve_log, bench_log, bench_json (session-relative)
    notes: list[str] = Field(default_factory=list)

    @classmethod
    def build(
        cls,
        index: int,
        name: str,
        server: Any,
        traffic: Any,
        status: Status,
        *,
        bench_path: Path | None = None,
        memory: Any = None,
        window: Any = None,
        findings: Iterable[Any] = (),
        **fields: Any,
    ) -> PhaseRecord:
        """From live objects (presets, MemoryReport, WindowSummary, Finding); reads vLLM's JSON if present."""
        bench, raw, notes = None, None, list(fields.pop("notes", []))
        if bench_path is not None and bench_path.exists():
            try:
                raw = load_bench_raws(bench_path)[-1]
                bench = normalise(raw)
            except ValueError as e:
                notes.append(str(e))
        win = to_jsonable(window) if window is not None else {}
        if fields.get("energy_j") is None and isinstance(win, dict) and win.get("energy_j") is not None:
            fields["energy_j"] = win["energy_j"]
        return cls(
            index=index,
            name=name,
            server=to_jsonable(server) or {},
            traffic=to_jsonable(traffic) or {},
            status=status,
            bench=bench,
            bench_raw=to_jsonable(raw) if raw is not None else None,
            memory=to_jsonable(memory) if memory is not None else {},
            window=win,
            findings=[to_jsonable(f) for f in findings],
            notes=notes,
            **fields,
        )


# ----------------------------------------------------------------------------------------------- store


def _session_id(now: datetime) -> str:
    return f"{now.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "phase"


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llmopt-tui")
    except PackageNotFoundError:
        return None


class SessionStore:
    """``<root>/<session-id>/``: session.json, phases/<n>-<name>.json, serve-<n>.log, bench-<n>.log/.json,
    samples.jsonl. ``n`` is the phase index as the runner gives it (the plan position)."""

    def __init__(self, root: Path = Path("llmopt-results")) -> None:
        self.root = Path(root)
        self.dir: Path | None = None
        self._samples: IO[str] | None = None
        self._secrets: set[str] = set()

    @classmethod
    def open(cls, session_dir: Path) -> SessionStore:
        """Attach to an existing session folder (e.g. to add phases after a restart)."""
        store = cls(session_dir.parent)
        store.dir = session_dir
        return store

    @property
    def session_dir(self) -> Path:
        if self.dir is None:
            raise RuntimeError("no session: call new_session() first")
        return self.dir

    @property
    def session_id(self) -> str:
        return self.session_dir.name

    def new_session(self, info: Mapping[str, Any] | None = None, *, now: datetime | None = None) -> Path:
        """Create the folder and session.json (our host/python facts + ``info``: versions, GPUs, presets)."""
        now = now or datetime.now(UTC)
        self.root.mkdir(parents=True, exist_ok=True)
        while True:
            d = self.root / _session_id(now)
            try:
                d.mkdir()
                break
            except FileExistsError:
                continue
        (d / "phases").mkdir()
        self.dir = d
        base: dict[str, Any] = {
            "id": d.name,
            "created_at": now.astimezone(UTC).isoformat(),
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "llmopt_tui": _version(),
        }
        self.update_info({**base, **(info or {})})
        return d

    def update_info(self, info: Mapping[str, Any]) -> None:
        """Merge keys into session.json (atomically, masked)."""
        path = self.session_dir / "session.json"
        current = load_session_info(self.session_dir) if path.exists() else {}
        merged = to_jsonable({**current, **info})
        self._secrets |= secret_values(merged)
        atomic_write_text(path, _dump(mask(merged, self._secrets)))

    def next_index(self) -> int:
        """The next free phase number of this session (phases and logs already there keep theirs)."""
        used = [-1]
        for path in [*self.session_dir.glob("serve-*.log"), *self.session_dir.glob("phases/*.json")]:
            head = path.stem.split("-")[1] if path.stem.startswith("serve-") else path.stem.split("-")[0]
            if head.isdigit():
                used.append(int(head))
        return max(used) + 1

    def serve_log(self, n: int) -> Path:
        return self.session_dir / f"serve-{n}.log"

    def bench_log(self, n: int) -> Path:
        return self.session_dir / f"bench-{n}.log"

    def bench_json(self, n: int) -> Path:
        """Where ``vllm bench serve --result-dir/--result-filename`` should write."""
        return self.session_dir / f"bench-{n}.json"

    def phase_path(self, n: int, name: str) -> Path:
        return self.session_dir / "phases" / f"{n}-{_safe(name)}.json"

    def write_phase(self, record: PhaseRecord) -> Path:
        """Atomically write the record, masked; returns its path."""
        data = record.model_dump(mode="json")
        self._secrets |= secret_values(data)
        path = self.phase_path(record.index, record.name)
        atomic_write_text(path, _dump(mask(data, self._secrets)))
        return path

    def append_sample(self, sample: Any) -> None:
        """One line of samples.jsonl, flushed at once (line-buffered) so a crash loses at most this line."""
        if self._samples is None:
            self._samples = open(self.session_dir / "samples.jsonl", "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        # Same shape as probes.replay.sample_to_dict (dataclass fields), but strict JSON: +Inf as a string.
        data = mask(to_jsonable(sample), self._secrets)
        line = json.dumps(data, separators=(",", ":"), allow_nan=False)
        self._samples.write(line + "\n")
        self._samples.flush()

    def close(self) -> None:
        if self._samples is not None:
            self._samples.close()
            self._samples = None

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @staticmethod
    def load_session(session_dir: Path) -> list[PhaseRecord]:
        return load_session(session_dir)


def load_session_info(session_dir: Path) -> dict[str, Any]:
    data = json.loads((Path(session_dir) / "session.json").read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def load_session(session_dir: Path) -> list[PhaseRecord]:
    """The phase records of a session folder, by index; ValueError naming the file if one is unreadable."""
    records = []
    for p in sorted((Path(session_dir) / "phases").glob("*.json")):
        try:
            records.append(PhaseRecord.model_validate_json(p.read_text(encoding="utf-8")))
        except (OSError, ValueError) as e:
            first = str(e).splitlines()[0]
            raise ValueError(f"{p}: not a phase record: {first}") from None
    return sorted(records, key=lambda r: r.index)


# ------------------------------------------------------------------------------------------- comparison


def _tps(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


def _ms(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"


@dataclasses.dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    fmt: Callable[[float], str]


COLUMNS: tuple[Column, ...] = (
    Column("total_tps", "Total TPS (tok/s)", _tps),
    Column("output_tps", "Output TPS (tok/s)", _tps),
    Column("ttft_mean_ms", "Mean TTFT (ms)", _ms),
    Column("ttft_p99_ms", "P99 TTFT (ms)", _ms),
    Column("itl_mean_ms", "Mean ITL (ms)", _ms),
    Column("itl_p99_ms", "P99 ITL (ms)", _ms),
    Column("weights_gib", "Weights (GiB)", lambda v: f"{v:.2f}"),
    Column("kv_tokens", "KV cache (tokens)", lambda v: f"{v:,.0f}"),
    Column("max_concurrency", "Max concurrency", lambda v: f"{v:.2f}"),
    Column("preemptions", "Preemptions", lambda v: f"{v:,.0f}"),
    Column("prefix_hit_rate", "Prefix cache hit rate", lambda v: f"{v * 100:.1f}%"),
    Column("tokens_per_joule", "Tokens per joule", lambda v: f"{v:,.2f}"),
)
MISSING = "—"


def _f(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return None if math.isnan(v) or math.isinf(v) else float(v)


def record_values(r: PhaseRecord) -> dict[str, float | None]:
    """The comparison's numbers for one record: client view from the bench, memory from the log,
    preemptions / prefix hits from /metrics; None wherever a source did not report."""
    b = r.bench
    energy = _f(r.energy_j) or _f(r.window.get("energy_j"))
    total_tokens = b.total_tokens if b is not None else None
    return {
        "total_tps": b.total_token_throughput if b else None,
        "output_tps": b.output_throughput if b else None,
        "ttft_mean_ms": b.stat("ttft", "mean") if b else None,
        "ttft_p99_ms": b.stat("ttft", "p99") if b else None,
        "itl_mean_ms": b.stat("itl", "mean") if b else None,
        "itl_p99_ms": b.stat("itl", "p99") if b else None,
        "weights_gib": _f(r.memory.get("weights_gib")),
        "kv_tokens": _f(r.memory.get("kv_tokens")),
        "max_concurrency": _f(r.memory.get("max_concurrency")),
        "preemptions": _f(r.window.get("preemptions")),
        "prefix_hit_rate": _f(r.window.get("prefix_hit_rate")),
        "tokens_per_joule": total_tokens / energy if total_tokens is not None and energy else None,
    }


@dataclasses.dataclass(frozen=True, slots=True)
class ComparisonRow:
    name: str
    server: str | None
    traffic: str | None
    status: str
    values: dict[str, float | None]
    ratios: dict[str, float | None]  # value / baseline value; None when either is missing or baseline is 0


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """Phases side by side, each number with its ratio to the baseline phase (documents' style: x2.70)."""

    rows: list[ComparisonRow]
    baseline_index: int = 0

    def cell(self, row: ComparisonRow, col: Column, with_ratio: bool = True) -> str:
        v = row.values.get(col.key)
        if v is None:
            return MISSING
        text = col.fmt(v)
        r = row.ratios.get(col.key)
        if with_ratio and r is not None:
            text += f" (x{r:.2f})"
        return text

    def to_markdown(self) -> str:
        """Metrics as rows, phases as columns (as the documents lay out their tables)."""
        if not self.rows:
            return "_no phases_\n"
        heads = [
            f"{r.name} (baseline)" if i == self.baseline_index else r.name for i, r in enumerate(self.rows)
        ]
        lines = ["| | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(self.rows)]

        def add(title: str, cells: list[str]) -> None:
            lines.append(f"| {title} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")

        add("server", [r.server or MISSING for r in self.rows])
        add("traffic", [r.traffic or MISSING for r in self.rows])
        if any(r.status != "ok" for r in self.rows):
            add("status", [r.status for r in self.rows])
        for col in COLUMNS:
            add(col.title, [self.cell(r, col, i != self.baseline_index) for i, r in enumerate(self.rows)])
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(
            ["name", "server", "traffic", "status", *(k for c in COLUMNS for k in (c.key, f"{c.key}_ratio"))]
        )
        for r in self.rows:
            nums: list[str] = []
            for c in COLUMNS:
                v, q = r.values.get(c.key), r.ratios.get(c.key)
                nums += ["" if v is None else repr(v), "" if q is None else f"{q:.4f}"]
            w.writerow([r.name, r.server or "", r.traffic or "", r.status, *nums])
        return buf.getvalue()

    def to_json(self) -> str:
        base = self.rows[self.baseline_index].name if self.rows else None
        return _dump(
            {
                "baseline_index": self.baseline_index,
                "baseline": base,
                "columns": [{"key": c.key, "title": c.title} for c in COLUMNS],
                "rows": [dataclasses.asdict(r) for r in self.rows],
            }
        )


def build_comparison(records: Sequence[PhaseRecord], baseline_index: int = 0) -> Comparison:
    """Rows in the given order; ``baseline_index`` is a position in ``records``."""
    if records and not 0 <= baseline_index < len(records):
        raise ValueError(f"baseline index {baseline_index} out of range (0..{len(records) - 1})")
    values = [record_values(r) for r in records]
    base = values[baseline_index] if values else {}
    rows = []
    for r, vals in zip(records, values, strict=True):
        ratios: dict[str, float | None] = {}
        for c in COLUMNS:
            v, b = vals[c.key], base.get(c.key)
            ratios[c.key] = v / b if v is not None and b else None
        server, traffic = r.server.get("name"), r.traffic.get("name")
        rows.append(
            ComparisonRow(
                name=r.name,
                server=server if isinstance(server, str) else None,
                traffic=traffic if isinstance(traffic, str) else None,
                status=r.status,
                values=vals,
                ratios=ratios,
            )
        )
    return Comparison(rows=rows, baseline_index=baseline_index)


def records_from_bench_file(path: Path, start_index: int = 0) -> list[PhaseRecord]:
    """Pseudo phase records from a plain ``vllm bench serve`` result file (one per stacked object)."""
    raws = load_bench_raws(path)
    out = []
    for k, raw in enumerate(raws):
        b = normalise(raw)
        name = b.label or (path.stem if len(raws) == 1 else f"{path.stem}#{k + 1}")
        out.append(
            PhaseRecord(
                index=start_index + k,
                name=name,
                server={"name": b.model_id} if b.model_id else {},
                status="ok",
                bench=b,
                bench_raw=to_jsonable(raw),
            )
        )
    return out


def compare_paths(paths: Sequence[Path], baseline_index: int = 0) -> Comparison:
    """A comparison over session folders and/or bench JSON files, in the order given."""
    records: list[PhaseRecord] = []
    for p in map(Path, paths):
        if p.is_dir():
            if not (p / "phases").is_dir():
                raise ValueError(f"{p}: not a session folder (no phases/ inside)")
            records += load_session(p)
        else:
            records += records_from_bench_file(p, len(records))
    return build_comparison(records, baseline_index)
