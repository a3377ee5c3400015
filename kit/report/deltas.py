"""Two reports' figures side by side, each judged by the one noise rule (:mod:`kit.noise`)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from kit.base import FrozenModel
from kit.metrics import finite
from kit.noise import Direction, Status, band, direction, judged
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
        None, description="Noise band of the delta in percent of A (kit.noise); None: unknown."
    )
    band_from: Literal["intervals", "floor"] | None = Field(
        None, description="What set the band: the two intervals, or the floor."
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
    headline: bool = Field(False, description="A headline figure: the reproduction judges it.")


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


def figure_delta(x: Figure, y: Figure) -> MetricDelta:
    """Two reports' values of one figure, judged by the one noise rule. Where both have it but
    the difference has no percentage (A's is 0, or the numbers are beyond a double) or the band
    is infinite (an interval beyond any percentage of its value), it is inconclusive."""
    base = delta(x.name, x.unit, x.value, y.value, x.higher_is_better)
    if base.delta_pct is None:
        both = x.value is not None and y.value is not None
        return base.model_copy(
            update={"headline": x.headline} | ({"status": "inconclusive"} if both else {})
        )
    b = band(x.half_width_pct, y.half_width_pct)
    status = judged(base.delta_pct, b)
    if not math.isfinite(b.pct):
        return base.model_copy(update={"status": status, "headline": x.headline})
    better = None
    if status == "outside":
        better = (base.delta_pct > 0) == x.higher_is_better
    return base.model_copy(
        update={
            "band_pct": b.pct,
            "band_from": b.source,
            "status": status,
            "better": better,
            "headline": x.headline,
        }
    )


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
