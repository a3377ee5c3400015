"""Compare: two reports, or a report and its recipe's published reference, metric by metric
(:func:`compare_reports`), comparability first (:mod:`kit.report.comparability`).
"""

from __future__ import annotations

from pydantic import Field

from kit.base import FrozenModel
from kit.bench.plausible import plausible
from kit.errors import VerificationFailed
from kit.report.comparability import Difference, comparability, refuse_or_keep
from kit.report.deltas import MetricDelta, delta, figure_deltas
from kit.report.describe import synthetic_label
from kit.report.figures import peaks
from kit.report.points import PointsVerdict
from kit.report.reproduction import judge
from kit.report.schema import Report
from kit.report.verdict import Reproduction
from kit.roofline.plausible import Plausibility

__all__ = ["Comparison", "MetricDelta", "compare_reports", "delta", "label", "peaks"]


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
        description="B as a re-run of A: REPRODUCED, DIFFERENT, INCONCLUSIVE or NOT COMPARABLE "
        "(kit.report.reproduction); None against a published reference.",
    )
    points: PointsVerdict | None = Field(
        None,
        description="Against a published reference with load points (kit import): this run's "
        "points judged label by label (kit.report.points); None otherwise.",
    )
    plausibility: Plausibility | None = Field(
        None,
        description="Against a published reference with decode figures: the roofline bound on "
        "the reference's rig and the fraction of it each figure implies (kit.roofline.plausible;"
        " a model, not a measurement); None otherwise.",
    )


def label(report: Report) -> str:
    synthetic = synthetic_label(report)
    tag = f", {synthetic}" if synthetic else ""
    return f"{report.run_id} ({report.recipe_name}, {report.created_at}{tag})"


def _implausible(side: str, report: Report, most: int = 5) -> list[str]:
    """A warning naming a side's records that are no plausible measurement (kit.bench.plausible),
    which its figures leave out; none without them."""
    records = report.bench.records if report.bench is not None else []
    bad = [
        f"record {i} ({r.prompt} {r.phase} #{r.index})"
        for i, r in enumerate(records)
        if not plausible(r)
    ]
    if not bad:
        return []
    more = f" and {len(bad) - most} more" if len(bad) > most else ""
    return [
        f"{side} has {len(bad)} record(s) that are not a plausible measurement, left out of its "
        f"figures: {', '.join(bad[:most])}{more} (kit report verify names their values)"
    ]


def compare_reports(a: Report, b: Report, *, force: bool = False) -> Comparison:
    """B against A. Refuses (``VerificationFailed``, exit 1) when model, quantization or
    protocol differ, unless ``force``; hardware, engine, kernel, serving and patch differences
    are warnings listed in the result.

    Deltas are ``B - A`` (in reference mode ``this run - reference``), in percent of A. Every
    figure of :func:`kit.report.figures.figures` is compared with one rule (:mod:`kit.noise`):
    its value is a headline (a median with its interval) where it has runs, and the band of the
    difference is ``max(3 %, sqrt(ha² + hb²))`` from the two intervals' half-widths, wider than
    10 % inconclusive. The reproduction verdict judges the headline figures with the same
    bands. Published figures carry no interval: in reference mode every band is unknown."""
    diffs = comparability(a, b)
    verdict = judge(a, b)
    try:
        refuse_or_keep(diffs, force, "the reports")
    except VerificationFailed as exc:
        raise VerificationFailed(f"verdict: NOT COMPARABLE: {exc.message}", hint=exc.hint) from None
    metrics, notes = figure_deltas(a, b)
    warnings = list(notes)
    for side, r in (("A", a), ("B", b)):
        if not r.validity.valid:
            warnings.append(f"{side} is not a valid run (see its validity verdict)")
        if r.status != "complete":
            warnings.append(f"{side} is incomplete: {r.incomplete_reason}")
        warnings += _implausible(side, r)
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
