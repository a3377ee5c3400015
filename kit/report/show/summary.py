"""The summary printed after a run (:func:`summary_table`): the load points or the prompts,
prefill, spec decode, the peers beside kit, validity and notes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kit.metrics import Stats
from kit.quality.harness import describe
from kit.report.figures import prompt_headline
from kit.report.schema import Report
from kit.report.show.claims import claim_lines
from kit.report.show.peers import peer_lines
from kit.report.verdict import HUGE

if TYPE_CHECKING:
    from kit.bench.load import LoadPoint


def _stat(s: Stats | None, digits: int = 2, cv: bool = False) -> str:
    if s is None or s.mean is None:
        return "-"
    text = number(s.mean, digits)
    if cv and s.cv_pct is not None:
        text += f" ({number(s.cv_pct, 1)}%)"
    return text


def _p(value: float | None, digits: int = 0) -> str:
    return number(value, digits)


def _load_lines(points: list[LoadPoint]) -> list[str]:
    """One line per load point: throughput, then latency percentiles (p50 / p99, ms)."""
    head = (
        f"  {'point':<16} {'done':>7} {'req/s':>6} {'out tok/s':>9} {'TTFT p50/p99':>13} "
        f"{'TPOT p50/p99':>13} {'ITL p99':>7} {'goodput':>8} {'client CPU':>10}"
    )
    out = [head, "  " + "-" * (len(head) - 2)]
    for pt in points:
        cpu = "-" if pt.client_cpu_pct is None else f"{number(pt.client_cpu_pct, 0)}%"
        out.append(
            f"  {pt.label:<16} {pt.completed:>3}/{pt.requests:<3} "
            f"{_p(pt.request_throughput, 2):>6} {_p(pt.output_tps, 1):>9} "
            f"{_p(pt.ttft_ms.p50) + '/' + _p(pt.ttft_ms.p99):>13} "
            f"{_p(pt.tpot_ms.p50, 1) + '/' + _p(pt.tpot_ms.p99, 1):>13} {_p(pt.itl_ms.p99, 1):>7} "
            f"{_p(pt.goodput_rps, 2):>8} {cpu:>10}"
        )
    return out


def summary_table(report: Report) -> str:
    """A short table like the reference's, for the terminal."""
    lines = [
        f"kit report {report.run_id}  recipe {report.recipe_name}  "
        f"status {report.status}{'' if report.canonical else '  (not canonical)'}"
    ]
    if report.incomplete_reason:
        lines.append(f"  incomplete: {report.incomplete_reason}")
    b = report.bench
    if b is not None and b.load_points:
        lines += _load_lines(b.load_points)
    if b is not None and b.prompts:
        head = (
            f"  {'prompt':<10} {'runs':>5} {'decode TPS [95% CI]':>26} {'mean (CV)':>18} "
            f"{'wall TPS':>9} {'TTFT ms':>8} {'tokens':>7}"
        )
        lines += [head, "  " + "-" * (len(head) - 2)]
        for p in b.prompts:
            h = prompt_headline(report, p.prompt)
            used = f"{len(h.runs_used)}/{p.measured}" if h else f"{p.usable}/{p.measured}"
            lead = "-"
            if h is not None and h.value is not None:
                lead = number(h.value)
                if h.low is not None and h.high is not None:
                    lead += f" [{number(h.low, 1)}-{number(h.high, 1)}]"
            lines.append(
                f"  {p.prompt:<10} {used:>5} {lead:>26} {_stat(p.decode_tps, cv=True):>18} "
                f"{_stat(p.wall_tps):>9} {_stat(p.ttft_ms, 0):>8} "
                f"{_stat(p.completion_tokens, 0):>7}"
            )
        lines.append(
            "  decode TPS: the median of the runs used (held streams left out), with its "
            "bootstrap 95 % interval; mean (CV): all usable runs, as Club-3090 reports them"
        )
    if b is not None:
        for pf in b.prefill:
            if pf.status == "measured":
                lines.append(
                    f"  prefill {pf.depth:>6} tok: {_stat(pf.prefill_tps, 0)} tok/s "
                    f"(TTFT {_stat(pf.ttft_ms, 0)} ms)"
                )
            else:
                lines.append(f"  prefill {pf.depth:>6} tok: {pf.status} ({pf.reason})")
        s = b.spec_decode
        if s is not None:
            rate = "-" if s.acceptance_rate is None else f"{number(s.acceptance_rate * 100, 1)}%"
            lines.append(
                f"  spec decode: {s.accepted_tokens}/{s.draft_tokens} draft tokens accepted "
                f"({rate}) in {s.drafts} steps; acceptance length "
                f"{number(s.acceptance_length)} (1+accepted/drafts), "
                f"{number(s.accepted_per_draft)} (accepted/drafts)"
            )
    lines += peer_lines(report)
    lines += harness_lines(report)
    lines += claim_lines(report)  # bench.context, bench.soak
    v = report.validity
    lines.append(f"  validity: {'valid' if v.valid else 'INVALID'}")
    lines += [f"    {f.severity}: {f.message}" for f in v.reasons]
    if report.energy_per_token_j is not None:
        lines.append(f"  energy: {number(report.energy_per_token_j, 3)} J per generated token")
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def harness_lines(report: Report) -> list[str]:
    """lm-eval's figures (bench.quality.harness), a line per task, or why there are none."""
    run = report.harness
    if run is None:
        return []
    if run.error is not None:
        return [f"  harness (lm-eval): failed: {run.error}"]
    head = f"  harness (lm-eval {run.tool_version or '?'}):"
    return [head, *(f"    {describe(t)}" for t in run.tasks)]


def number(value: float | None, digits: int = 2, sign: bool = False) -> str:
    """``value`` to ``digits`` decimals; one beyond any measurement in three significant
    digits (1.8e+305), not three hundred."""
    if value is None:
        return "-"
    spec = f".{digits}f" if abs(value) < HUGE else ".3g"
    return f"{value:{'+' if sign else ''}{spec}}"
