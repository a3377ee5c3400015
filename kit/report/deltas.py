"""Two reports' figures side by side, each judged by the rule of its kind (:mod:`kit.figures`:
throughput, latency, counters, tolerance, a ladder's step, a threshold)."""

from __future__ import annotations

import math

from pydantic import Field

from kit.base import FrozenModel
from kit.figures import BandFrom, Reading
from kit.metrics import finite
from kit.noise import Direction, Status, direction
from kit.report.figures import Figure, figures
from kit.report.schema import Report


class MetricDelta(FrozenModel):
    """One figure on both sides."""

    metric: str = Field(description="e.g. 'narrative decode TPS', 'prefill 512'.")
    unit: str = Field(description="tok/s, ms, %, MiB, J/token, tokens.")
    higher_is_better: bool = Field(description="Whether a positive delta is an improvement.")
    a: float | None = Field(description="A's value (the reference in reference mode).")
    b: float | None = Field(description="B's value (this run in reference mode).")
    delta: float | None = Field(description="b - a.")
    delta_pct: float | None = Field(description="(b - a) / a in percent.")
    band_pct: float | None = Field(
        None,
        description="The band of the delta in percent of A (its kind's rule, kit.figures); "
        "None: unknown, or a threshold figure (no band: kept to a limit).",
    )
    band_from: BandFrom | None = Field(
        None,
        description="What set the band: the two intervals, the floor, the counters' standard "
        "errors, a stated tolerance, a threshold or an exact step.",
    )
    status: Status | None = Field(
        None,
        description="within or outside the band, or inconclusive (band wider than the maximum); "
        "None when the band is unknown or a side lacks the figure.",
    )
    direction: Direction | None = Field(None, description="B against A: higher, lower or same.")
    better: bool | None = Field(
        None, description="Outside the band and an improvement (None: within or unknown)."
    )
    headline: bool = Field(False, description="A judged figure: the reproduction judges it.")
    key: str | None = Field(None, description="Its row of the figure table (kit.figures).")
    note: str | None = Field(
        None,
        description="Why a published figure is not judged: not measured by this run, or not "
        "comparable (and why); None where it is.",
    )


def delta(
    metric: str,
    unit: str,
    a: float | None,
    b: float | None,
    higher_is_better: bool = True,
) -> MetricDelta:
    """A delta whose band is unknown (a published figure against a run). A difference or a
    percentage beyond a double is None, as one of A's 0 is."""
    diff = finite(b - a) if a is not None and b is not None else None
    pct = finite(diff / a * 100.0) if diff is not None and a else None
    return MetricDelta(
        metric=metric,
        unit=unit,
        higher_is_better=higher_is_better,
        a=a,
        b=b,
        delta=diff,
        delta_pct=pct,
        direction=direction(pct),
    )


def figure_delta(
    x: Figure, y: Figure, a: Reading | None = None, b: Reading | None = None
) -> MetricDelta:
    """Two values of one figure, judged by the rule of its kind; ``a`` and ``b`` stand in for
    the two figures' readings (a published mean, a run's mean). Where both are known but the
    rule cannot judge them (A's 0 for a percentage, a band beyond any percentage, a band wider
    than its maximum) it is inconclusive."""
    ra, rb = a or x.reading(), b or y.reading()
    base = delta(x.name, x.unit, ra.value, rb.value, x.higher_is_better)
    j = x.kind.rule.judge(ra, rb)
    both = ra.value is not None and rb.value is not None
    status: Status | None = j.status if j.status is not None or not both else "inconclusive"
    relative = j.band_from in ("intervals", "floor")
    if relative and j.band_pct is not None and not math.isfinite(j.band_pct) and both:
        status = "inconclusive"  # a band beyond any percentage: nothing to judge against
    diff = base.delta
    better = None
    if status == "outside" and diff is not None:
        better = (diff > 0) == x.higher_is_better
    finite_band = j.band_pct if j.band_pct is not None and math.isfinite(j.band_pct) else None
    return base.model_copy(
        update={
            "band_pct": finite_band,
            "band_from": j.band_from if both else None,
            "status": status,
            "better": better,
            "headline": x.headline,
            "key": x.kind.key,
            "direction": _way(diff),
        }
    )


def _way(diff: float | None) -> Direction | None:
    if diff is None:
        return None
    return "higher" if diff > 0 else "lower" if diff < 0 else "same"


def figure_deltas(a: Report, b: Report) -> tuple[list[MetricDelta], list[str]]:
    """Every figure of A against B's, and a note for each figure only one side has."""
    fa = {f.name: f for f in figures(a)}
    fb = {f.name: f for f in figures(b)}
    out: list[MetricDelta] = []
    notes: list[str] = []
    for name in dict.fromkeys([*fa, *fb]):
        if name in fa and name in fb:
            out.append(figure_delta(fa[name], fb[name]))
        else:
            notes.append(f"{name} is measured in {'A' if name in fa else 'B'} only")
    return out, notes
