"""Rules → findings, live (``Diagnoser.tick``, with hysteresis) and between phases (``explain_change``).

The live side runs the table in ``probes.rules`` once per tick over one shared ``TickView``; a finding
appears only after its condition held for the rule's ``hold_s`` and goes only after it stayed false for
``clear_s``, so a 1 Hz monitor does not flap. The between-phase side tells the documents' causal chain
(smaller weights → more KV → more concurrency → more throughput) with the measured numbers, and says when a
change did not help and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from probes.rules import (
    DEFAULT_THRESHOLDS,
    RULES,
    DiagnosisContext,
    Hit,
    Rule,
    Severity,
    Thresholds,
    TickView,
    WindowView,
)
from probes.types import MemoryReport
from probes.window import WindowSummary

__all__ = [
    "DEFAULT_THRESHOLDS",
    "RULES",
    "Diagnoser",
    "DiagnosisContext",
    "Finding",
    "PhaseFacts",
    "Thresholds",
    "explain_change",
]

_ORDER = {"crit": 0, "warn": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    id: str
    severity: Severity
    title: str
    evidence: tuple[str, ...]  # the measured numbers, each one short: "KV usage 97 %"
    advice: str
    source: str  # where the idea comes from: "doc 1 step 4"
    since: float | None = None  # when it appeared (live findings only)


@dataclass(slots=True)
class _RuleState:
    true_since: float | None = None
    false_since: float | None = None
    active_since: float | None = None
    hit: Hit | None = None


class Diagnoser:
    """Runs the rule table each tick and keeps each rule's hysteresis state."""

    def __init__(self, thresholds: Thresholds = DEFAULT_THRESHOLDS, rules: Sequence[Rule] = RULES) -> None:
        self.thresholds = thresholds
        self.rules = tuple(rules)
        self._state = {r.id: _RuleState() for r in self.rules}
        self._last_now: float | None = None

    def reset(self) -> None:
        """Forget every finding (a new server or phase starts from a clean slate)."""
        self._state = {r.id: _RuleState() for r in self.rules}
        self._last_now = None

    def tick(self, window: WindowView, ctx: DiagnosisContext, now: float) -> list[Finding]:
        if self._last_now is not None and now < self._last_now:
            self.reset()  # the clock jumped back (the window restarts too): old timers mean nothing
        self._last_now = now
        view = TickView(window, ctx, self.thresholds, now)
        cpu = view.gpu is None
        out: list[Finding] = []
        for rule in self.rules:
            hit = None if rule.needs_gpu and cpu else rule.check(view)
            st = self._state[rule.id]
            if hit is not None:
                st.hit, st.false_since = hit, None
                if st.true_since is None:
                    st.true_since = now
                if st.active_since is None and now - st.true_since >= rule.hold_s:
                    st.active_since = now
            else:
                st.true_since = None
                if st.active_since is not None:
                    if st.false_since is None:
                        st.false_since = now
                    if now - st.false_since >= rule.clear_s:
                        st.active_since, st.false_since, st.hit = None, None, None
            if st.active_since is not None and st.hit is not None:
                out.append(_finding(rule, st.hit, cpu, st.active_since))
        out.sort(key=lambda f: _ORDER[f.severity])
        return out


def _finding(rule: Rule, hit: Hit, cpu: bool, since: float) -> Finding:
    advice = hit.advice or (rule.advice_cpu if cpu and rule.advice_cpu else rule.advice)
    return Finding(rule.id, rule.severity, rule.title, hit.evidence, advice, rule.source, since)


# -- between phases ------------------------------------------------------------------------------------
@dataclass
class PhaseFacts:
    """The few numbers of one finished phase that the causal chain runs through (None = not measured)."""

    name: str
    weights_gib: float | None = None
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    total_tps: float | None = None
    output_tps: float | None = None
    ttft_mean_ms: float | None = None
    itl_mean_ms: float | None = None
    client_concurrency: int | None = None
    peak_running: float | None = None
    preemptions: float | None = None
    prefix_hit_rate: float | None = None  # 0..1

    @classmethod
    def from_run(
        cls,
        name: str,
        memory: MemoryReport | None,
        summary: WindowSummary | None,
        *,
        client_concurrency: int | None = None,
        total_tps: float | None = None,
        output_tps: float | None = None,
        ttft_mean_ms: float | None = None,
        itl_mean_ms: float | None = None,
    ) -> PhaseFacts:
        """A phase from its start-up log and its window summary. Pass the bench client's numbers when there
        are some: the documents compare the client's TPS and latencies; the server's window fills the gaps."""
        m = memory or MemoryReport()
        s = summary or WindowSummary()

        def ms(x: float | None) -> float | None:
            return x * 1000 if x is not None else None

        return cls(
            name,
            weights_gib=m.weights_gib,
            kv_tokens=m.kv_tokens,
            max_concurrency=m.max_concurrency,
            total_tps=total_tps if total_tps is not None else s.total_tps,
            output_tps=output_tps if output_tps is not None else s.output_tps,
            ttft_mean_ms=ttft_mean_ms if ttft_mean_ms is not None else ms(s.ttft_mean),
            itl_mean_ms=itl_mean_ms if itl_mean_ms is not None else ms(s.itl_mean),
            client_concurrency=client_concurrency,
            peak_running=s.peak_running,
            preemptions=s.preemptions,
            prefix_hit_rate=s.prefix_hit_rate,
        )


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def _pct(r: float) -> str:
    """A ratio as a signed percent change: 1.0007 → '+0.07 %', 0.572 → '-43 %'."""
    p = (r - 1) * 100
    digits = 2 if abs(p) < 1 else 1 if abs(p) < 10 else 0
    return f"{p:+.{digits}f} %"


def _num(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def _moved(a: float | None, b: float | None, th: Thresholds) -> bool:
    r = _ratio(a, b)
    return r is not None and abs(r - 1) >= th.noise_frac


def _chain(base: PhaseFacts, new: PhaseFacts, th: Thresholds) -> tuple[list[str], list[str]]:
    """The links of the causal chain that moved, and the kinds of cause they point to."""
    links: list[str] = []
    causes: list[str] = []
    if _moved(base.weights_gib, new.weights_gib, th):
        links.append(f"weights {base.weights_gib:.1f} → {new.weights_gib:.1f} GiB")
        causes.append("memory")
    if base.kv_tokens and new.kv_tokens and _moved(base.kv_tokens, new.kv_tokens, th):
        links.append(
            f"KV tokens {base.kv_tokens:,} → {new.kv_tokens:,} (x{new.kv_tokens / base.kv_tokens:.2f})"
        )
        causes.append("memory")
    if base.max_concurrency and new.max_concurrency and _moved(base.max_concurrency, new.max_concurrency, th):
        links.append(f"max concurrency {base.max_concurrency:.2f}x → {new.max_concurrency:.2f}x")
        causes.append("memory")
    if (
        base.prefix_hit_rate is not None
        and new.prefix_hit_rate is not None
        and abs(new.prefix_hit_rate - base.prefix_hit_rate) >= 0.1
    ):
        links.append(
            f"prefix hit rate {base.prefix_hit_rate * 100:.0f} % → {new.prefix_hit_rate * 100:.0f} %"
        )
        causes.append("traffic")
    if (
        base.peak_running is not None
        and new.peak_running is not None
        and new.peak_running != base.peak_running
    ):
        links.append(f"peak running {base.peak_running:.0f} → {new.peak_running:.0f}")
    return links, causes


def _metric_lines(a: PhaseFacts, b: PhaseFacts, digits: int) -> list[str]:
    out = []
    for label, x, y, unit, dg in (
        ("total TPS", a.total_tps, b.total_tps, "", digits),
        ("output TPS", a.output_tps, b.output_tps, "", digits),
        ("mean TTFT", a.ttft_mean_ms, b.ttft_mean_ms, " ms", max(digits, 1)),
        ("mean ITL", a.itl_mean_ms, b.itl_mean_ms, " ms", max(digits, 1)),
    ):
        if x and y is not None:
            out.append(f"{label} {_num(x, dg)} → {_num(y, dg)}{unit} ({_pct(y / x)})")
    if a.preemptions is not None and b.preemptions is not None and (a.preemptions or b.preemptions):
        out.append(f"preemptions {a.preemptions:,.0f} → {b.preemptions:,.0f}")
    return out


def _client_pinned(p: PhaseFacts, th: Thresholds) -> bool:
    cc = p.client_concurrency
    return bool(cc) and p.peak_running is not None and p.peak_running >= th.client_pinned_frac * (cc or 0)


_MEMORY_ADVICE = (
    "Throughput rose because memory went to the KV cache: more requests fit at once and batches got "
    "denser; the matrix multiply itself did not get faster (profiling: same GPU kernel time, shorter "
    "host waits)."
)
_TRAFFIC_ADVICE = (
    "Throughput moved with the traffic's prefix reuse, not with the server: compare phases on the same "
    "traffic (474 vs 1,123 TPS from traffic alone)."
)


def _compare(ref: PhaseFacts, new: PhaseFacts, th: Thresholds, prefix: str) -> Finding | None:
    """One finding for ref → new: gain (with its chain), no-op (with why), or loss."""
    r = _ratio(ref.total_tps, new.total_tps)
    if r is None:
        return None
    links, causes = _chain(ref, new, th)
    head = f"{new.name} vs {ref.name}"
    if abs(r - 1) < th.noise_frac:
        ev = _metric_lines(ref, new, 2)
        cc = new.client_concurrency
        if _client_pinned(new, th):
            ev.append(f"peak running {new.peak_running:.0f} at client concurrency {cc}")
            why = (
                f"Within noise: the client's --max-concurrency {cc} capped the load, so the change had no "
                "bottleneck left to act on. Raise the client's concurrency before tuning the server."
            )
        else:
            why = (
                "Within noise: the change did not touch the bottleneck, which is elsewhere; look at the "
                "live findings (KV, queue, GPU) of this phase for the real limit."
            )
        ev += links
        return Finding(
            f"{prefix}_noop",
            "info",
            f"{head}: no change (total TPS {_pct(r)})",
            tuple(ev),
            why,
            "doc 2 tuned phase",
        )
    chain = " → ".join([*links, f"total TPS x{r:.2f}"])
    ev = [chain, *_metric_lines(ref, new, 0)]
    if r > 1:
        advice = (
            _MEMORY_ADVICE
            if "memory" in causes
            else _TRAFFIC_ADVICE
            if "traffic" in causes
            else "No measured link of the chain moved: the gain came from something the phases do not record."
        )
        return Finding(
            f"{prefix}_gain", "info", f"{head}: total TPS x{r:.2f}", tuple(ev), advice, "doc 1 steps 4-6"
        )
    advice = "Throughput fell: read the chain from the first link that moved the wrong way" + (
        " (preemptions rose: KV pressure)." if (new.preemptions or 0) > (ref.preemptions or 0) else "."
    )
    return Finding(f"{prefix}_loss", "warn", f"{head}: total TPS x{r:.2f}", tuple(ev), advice, "doc 1 step 5")


def _ttft_tradeoff(base: PhaseFacts, new: PhaseFacts, th: Thresholds) -> Finding | None:
    r = _ratio(base.total_tps, new.total_tps)
    t = _ratio(base.ttft_mean_ms, new.ttft_mean_ms)
    if r is None or t is None or r < 1 + th.noise_frac or t < 1 + th.ttft_worse_frac:
        return None
    ev = [
        f"total TPS {_num(base.total_tps or 0)} → {_num(new.total_tps or 0)} (x{r:.2f})",
        f"mean TTFT {_num(base.ttft_mean_ms or 0, 1)} → {_num(new.ttft_mean_ms or 0, 1)} ms ({_pct(t)})",
    ]
    if base.peak_running is not None and new.peak_running is not None:
        ev.append(f"peak running {base.peak_running:.0f} → {new.peak_running:.0f}")
    return Finding(
        "ttft_tradeoff",
        "warn",
        f"{new.name}: more throughput, worse TTFT",
        tuple(ev),
        "Higher throughput raised concurrency and requests queued longer before their first token. If TTFT "
        "has an SLO, cap concurrency or give prefill priority (chunked prefill); caching can hurt TTFT.",
        "doc 2 prefix_repetition phase",
    )


def explain_change(
    base: PhaseFacts,
    new: PhaseFacts,
    tunes: PhaseFacts | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> list[Finding]:
    """Findings for base → new (and, when ``new`` tunes ``tunes``, for tunes → new)."""
    out = [f for f in (_compare(base, new, thresholds, "change"), _ttft_tradeoff(base, new, thresholds)) if f]
    if tunes is not None and tunes != base:
        f = _compare(tunes, new, thresholds, "tuning")
        if f is not None:
            out.append(f)
    return out
