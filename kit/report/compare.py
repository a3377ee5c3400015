"""Compare: two reports, or a report and its recipe's published reference, metric by metric.

Comparability comes first (:mod:`kit.report.comparability`): model, quantization and protocol
differences refuse the comparison (``VerificationFailed``, exit 1) unless forced; the other
aspects are warnings listed in the result.

Deltas are ``B - A`` (in reference mode ``this run - reference``), in percent of A. The noise band
of a difference of two means is ``2 * sqrt(sa²/na + sb²/nb)`` from the sample standard deviations
(twice the standard error of the difference: about a 95 % interval for roughly normal runs); a
delta larger than the band is flagged as outside noise. Where a side has no standard deviation
(fewer than two runs, counter-based figures, single readings, published figures) the band is
unknown and nothing is flagged.
"""

from __future__ import annotations

import math

from pydantic import Field

from kit.base import FrozenModel
from kit.errors import VerificationFailed
from kit.metrics import Stats
from kit.probe import Unavailable
from kit.report.comparability import Difference, comparability, refuse_or_keep
from kit.report.schema import Report
from kit.report.verdict import Reproduction


class MetricDelta(FrozenModel):
    """One figure on both sides."""

    metric: str = Field(description="e.g. 'narrative decode TPS', 'prefill 512 tok/s'.")
    unit: str = Field(description="tok/s, ms, %, MiB, J/token, tokens.")
    higher_is_better: bool = Field(description="Whether a positive delta is an improvement.")
    a: float | None = Field(description="A's value (the reference in reference mode).")
    b: float | None = Field(description="B's value (this run in reference mode).")
    delta: float | None = Field(description="b - a.")
    delta_pct: float | None = Field(description="(b - a) / a in percent.")
    band: float | None = Field(description="Noise band of the delta; None when unknown.")
    outside_noise: bool | None = Field(description="|delta| > band; None when the band is unknown.")


class Comparison(FrozenModel):
    """Two reports (or a report and a reference) side by side."""

    a: str = Field(description="Label of A (run id, or the reference's source).")
    b: str = Field(description="Label of B.")
    reference: bool = Field(description="A is a recipe's published reference.")
    forced: bool = Field(description="Refusing differences were overridden.")
    differences: list[Difference] = Field(description="Every aspect that differs.")
    warnings: list[str] = Field(description="What a reader must keep in mind.")
    metrics: list[MetricDelta] = Field(description="Figures, per prompt, depth and GPU.")
    verdict: Reproduction | None = Field(
        None,
        description="B as a re-run of A: REPRODUCED, DIFFERENT or NOT COMPARABLE "
        "(kit.report.reproduction); None against a published reference.",
    )

    def render(self) -> str:
        """The comparison as text (:func:`kit.report.show.comparison_text`)."""
        from kit.report.show import comparison_text

        return comparison_text(self)


def noise_band(a: Stats | None, b: Stats | None) -> float | None:
    """``2 * sqrt(sa²/na + sb²/nb)``; None when a side has no standard deviation."""
    if a is None or b is None or a.std is None or b.std is None or not a.n or not b.n:
        return None
    return 2.0 * math.sqrt(a.std**2 / a.n + b.std**2 / b.n)


def delta(
    metric: str,
    unit: str,
    a: float | None,
    b: float | None,
    band: float | None = None,
    higher_is_better: bool = True,
) -> MetricDelta:
    delta = b - a if a is not None and b is not None else None
    pct = delta / a * 100.0 if delta is not None and a else None
    outside = abs(delta) > band if delta is not None and band is not None else None
    return MetricDelta(
        metric=metric,
        unit=unit,
        higher_is_better=higher_is_better,
        a=a,
        b=b,
        delta=delta,
        delta_pct=pct,
        band=band,
        outside_noise=outside,
    )


def mean(s: Stats | None) -> float | None:
    return s.mean if s is not None else None


def _stat_delta(metric: str, unit: str, a: Stats | None, b: Stats | None, up: bool) -> MetricDelta:
    return delta(metric, unit, mean(a), mean(b), noise_band(a, b), up)


def peaks(report: Report) -> dict[int, float]:
    s = report.gpu_sampling
    if s is None:
        return {}
    return {
        g.gpu: float(g.vram.peak_mib)
        for g in s.summaries
        if not isinstance(g.vram.peak_mib, Unavailable)
    }


def _report_metrics(a: Report, b: Report) -> tuple[list[MetricDelta], list[str]]:
    out: list[MetricDelta] = []
    notes: list[str] = []
    pa = {p.prompt: p for p in a.bench.prompts} if a.bench else {}
    pb = {p.prompt: p for p in b.bench.prompts} if b.bench else {}
    for name in dict.fromkeys([*pa, *pb]):
        if name not in pa or name not in pb:
            notes.append(f"prompt {name!r} is measured in {'A' if name in pa else 'B'} only")
            continue
        x, y = pa[name], pb[name]
        out.append(_stat_delta(f"{name} decode TPS", "tok/s", x.decode_tps, y.decode_tps, True))
        out.append(_stat_delta(f"{name} wall TPS", "tok/s", x.wall_tps, y.wall_tps, True))
        out.append(_stat_delta(f"{name} TTFT", "ms", x.ttft_ms, y.ttft_ms, False))
    fa = {p.depth: p for p in a.bench.prefill if p.status == "measured"} if a.bench else {}
    fb = {p.depth: p for p in b.bench.prefill if p.status == "measured"} if b.bench else {}
    for depth in sorted(set(fa) | set(fb)):
        if depth in fa and depth in fb:
            out.append(
                _stat_delta(
                    f"prefill {depth}", "tok/s", fa[depth].prefill_tps, fb[depth].prefill_tps, True
                )
            )
        else:
            notes.append(
                f"prefill at {depth} tokens is measured in {'A' if depth in fa else 'B'} only"
            )
    la = {p.label: p for p in a.bench.load_points} if a.bench else {}
    lb = {p.label: p for p in b.bench.load_points} if b.bench else {}
    for label in dict.fromkeys([*la, *lb]):
        if label not in la or label not in lb:
            notes.append(f"load point {label} is measured in {'A' if label in la else 'B'} only")
            continue
        first, second = la[label], lb[label]  # one figure per point: no band from runs
        out.append(delta(f"{label} output TPS", "tok/s", first.output_tps, second.output_tps))
        for name, lo, hi in (
            ("TTFT p50", first.ttft_ms.p50, second.ttft_ms.p50),
            ("TPOT p50", first.tpot_ms.p50, second.tpot_ms.p50),
            ("E2E p99", first.e2e_ms.p99, second.e2e_ms.p99),
        ):
            out.append(delta(f"{label} {name}", "ms", lo, hi, None, False))
    sa = a.bench.spec_decode if a.bench else None
    sb = b.bench.spec_decode if b.bench else None
    if sa is not None or sb is not None:
        rate = [
            s.acceptance_rate * 100 if s and s.acceptance_rate is not None else None
            for s in (sa, sb)
        ]
        length = [s.acceptance_length if s else None for s in (sa, sb)]
        out.append(delta("acceptance rate", "%", rate[0], rate[1]))
        out.append(delta("acceptance length", "tokens", length[0], length[1]))
    peaks_a, peaks_b = peaks(a), peaks(b)
    for gpu in sorted(set(peaks_a) | set(peaks_b)):
        out.append(
            delta(f"peak VRAM GPU {gpu}", "MiB", peaks_a.get(gpu), peaks_b.get(gpu), None, False)
        )
    if a.energy_per_token_j is not None or b.energy_per_token_j is not None:
        out.append(
            delta("energy", "J/token", a.energy_per_token_j, b.energy_per_token_j, None, False)
        )
    return out, notes


def label(report: Report) -> str:
    return f"{report.run_id} ({report.recipe_name}, {report.created_at})"


def compare_reports(a: Report, b: Report, *, force: bool = False) -> Comparison:
    """B against A. Refuses (``VerificationFailed``) when model, quantization or protocol
    differ, unless ``force``; hardware, engine, kernel, serving and patch differences are
    warnings."""
    from kit.report.reproduction import judge

    diffs = comparability(a, b)
    verdict = judge(a, b)
    try:
        refuse_or_keep(diffs, force, "the reports")
    except VerificationFailed as exc:
        raise VerificationFailed(f"verdict: NOT COMPARABLE: {exc.message}", hint=exc.hint) from None
    metrics, notes = _report_metrics(a, b)
    warnings = list(notes)
    for side, r in (("A", a), ("B", b)):
        if not r.validity.valid:
            warnings.append(f"{side} is not a valid run (see its validity verdict)")
        if r.status != "complete":
            warnings.append(f"{side} is incomplete: {r.incomplete_reason}")
    return Comparison(
        a=label(a),
        b=label(b),
        reference=False,
        forced=force and any(d.refuses for d in diffs),
        differences=diffs,
        warnings=warnings,
        metrics=metrics,
        verdict=verdict,
    )
