"""The headline of a figure and the one noise rule every comparison uses.

A figure's **headline** is the median of its runs (held streams left out) with a 95 % bootstrap
interval, so one bad run cannot move it. Two headlines are compared by one **band**
(:func:`band`). docs/noise.md has the derivation.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import Field

from kit.base import FrozenModel, KitModel

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0  # a fixed seed: a verifier recomputes the same interval from the same runs
FLOOR_PCT = 3.0  # what two sessions of one rig differ by that one session's runs cannot show
MAX_BAND_PCT = 10.0  # a band wider than this leaves the figure inconclusive


class Excluded(KitModel):
    """A measured run the headline leaves out, and why."""

    index: int = Field(description="The run's index among its prompt's measured runs.")
    reason: str = Field(description="Why it was left out (e.g. a held stream, with figures).")


class Headline(KitModel):
    """The figure kit leads with: a median with its bootstrap interval."""

    figure: str = Field(description="Which figure (decode_tps, prefill_tps).")
    value: float | None = Field(description="Median over the runs used; None without any.")
    statistic: Literal["median"] = Field(description="The statistic of the runs used.")
    low: float | None = Field(description="Lower end of the interval (None below 2 runs).")
    high: float | None = Field(description="Upper end of the interval (None below 2 runs).")
    confidence: float = Field(description="The interval's nominal coverage (0.95).")
    interval: Literal["bootstrap-percentile"] = Field(
        description=f"How: {RESAMPLES} resamples of the runs with replacement (seed {SEED}), "
        "the median of each, and the 2.5th and 97.5th percentiles of those."
    )
    runs_used: list[int] = Field(description="Indices of the measured runs used.")
    runs_excluded: list[Excluded] = Field(description="Measured runs left out, with reasons.")

    @property
    def half_width_pct(self) -> float | None:
        """Half the interval's width, in percent of the value (inf where that is beyond a
        double: a value next to nothing against its interval)."""
        if self.value is None or self.low is None or self.high is None or not self.value:
            return None
        return (self.high - self.low) / 2 / abs(self.value) * 100


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of sorted values (q in [0, 1]); finite for finite
    values, also where two neighbours differ by more than a double holds."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    a, b, f = sorted_values[lo], sorted_values[hi], pos - lo
    value = a + (b - a) * f
    return value if math.isfinite(value) else a * (1 - f) + b * f


def _median(values: Iterable[float]) -> float:
    """statistics.median, whose mean of the middle two is finite for finite values."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    a, b = ordered[mid - 1], ordered[mid]
    value = (a + b) / 2
    return value if math.isfinite(value) else a / 2 + b / 2


def median_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The bootstrap percentile interval of the median; None below two values."""
    n = len(values)
    if n < 2:
        return None
    rng = random.Random(SEED)
    medians = sorted(_median(values[rng.randrange(n)] for _ in range(n)) for _ in range(RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    return _percentile(medians, tail), _percentile(medians, 1 - tail)


# the two-sided 95 % normal quantile, for the intervals of many requests' statistics below
Z95 = 1.959963984540054


def mean_interval(mean: float, std: float | None, n: int) -> tuple[float, float] | None:
    """The 95 % interval of a mean of ``n`` values with sample standard deviation ``std``
    (1.96 standard errors either side); None below two values."""
    if n < 2 or std is None:
        return None
    half = Z95 * std / math.sqrt(n)
    return mean - half, mean + half


def quantile_interval(sorted_values: Sequence[float], q: float) -> tuple[float, float] | None:
    """The distribution-free 95 % interval of the ``q``-quantile (0 < q < 1) of sorted values:
    the order statistics of ranks n·q ∓ 1.96 binomial standard deviations (normal
    approximation). None when those ranks fall outside the sample: too few values to bound it
    (a median needs about 8, a p90 about 40, a p99 about 400). Unlike the bootstrap of
    :func:`median_interval` it costs one look-up for thousands of requests."""
    n = len(sorted_values)
    spread = Z95 * math.sqrt(n * q * (1 - q))
    low, high = math.floor(n * q - spread), math.ceil(n * q + spread)  # ranks, 1-based
    if low < 1 or high > n:
        return None
    return sorted_values[low - 1], sorted_values[high - 1]


def headline(figure: str, runs: dict[int, float], excluded: dict[int, str]) -> Headline:
    """The headline of one figure from its runs by index, leaving out ``excluded``."""
    used = sorted(i for i in runs if i not in excluded)
    values = [runs[i] for i in used]
    interval = median_interval(values)
    return Headline(
        figure=figure,
        value=_median(values) if values else None,
        statistic="median",
        low=interval[0] if interval else None,
        high=interval[1] if interval else None,
        confidence=CONFIDENCE,
        interval="bootstrap-percentile",
        runs_used=used,
        runs_excluded=[Excluded(index=i, reason=excluded[i]) for i in sorted(excluded)],
    )


# ---------------------------------------------------------------------------------------------
# one band for two figures

Status = Literal["within", "outside", "inconclusive"]


class Band(FrozenModel):
    """The band of the difference between two figures, and where it came from."""

    pct: float = Field(description="Half-width, in percent of the first figure.")
    source: Literal["intervals", "floor"] = Field(
        description="The two headlines' intervals, or the floor (the larger)."
    )
    too_wide: bool = Field(description=f"Wider than ±{MAX_BAND_PCT:g} %: no verdict rests on it.")


def band(a_half_pct: float | None, b_half_pct: float | None) -> Band:
    """``max(FLOOR_PCT, sqrt(ha² + hb²))``: the larger of the floor and the root sum of squares
    of both intervals' half-widths; a side without an interval adds nothing (a single
    reading, a published figure), so the floor holds where neither has one. A half-width
    beyond a double gives an infinite band: too wide."""
    parts = [h for h in (a_half_pct, b_half_pct) if h is not None]
    spread = math.sqrt(sum(h * h for h in parts)) if parts else 0.0
    if not math.isfinite(spread):  # a square beyond a double, or an infinite half-width
        spread = math.hypot(*parts)
    if spread > FLOOR_PCT:
        return Band(pct=spread, source="intervals", too_wide=spread > MAX_BAND_PCT)
    return Band(pct=FLOOR_PCT, source="floor", too_wide=False)


Direction = Literal["higher", "lower", "same"]


def direction(delta_pct: float | None) -> Direction | None:
    if delta_pct is None:
        return None
    return "higher" if delta_pct > 0 else "lower" if delta_pct < 0 else "same"


def judged(delta_pct: float | None, b: Band) -> Status:
    """A difference against its band: inconclusive without a delta or with a band too wide."""
    if delta_pct is None or b.too_wide:
        return "inconclusive"
    return "within" if abs(delta_pct) <= b.pct else "outside"
