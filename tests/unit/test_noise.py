"""kit.noise: a headline that one bad run cannot move, and the one band rule."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kit.noise import (
    FLOOR_PCT,
    MAX_BAND_PCT,
    band,
    headline,
    judged,
    mean_interval,
    median_interval,
    quantile_interval,
)


def test_the_interval_holds_the_median_and_is_the_same_every_time() -> None:
    runs = [124.0, 121.5, 126.2, 123.1, 125.0]
    interval = median_interval(runs)
    assert interval is not None and interval == median_interval(runs)  # a verifier's recompute
    low, high = interval
    assert min(runs) <= low <= statistics.median(runs) <= high <= max(runs)
    assert median_interval([5.0]) is None and median_interval([]) is None


def test_one_flooded_run_moves_the_mean_and_not_the_headline() -> None:
    runs = {0: 124.0, 1: 121.5, 2: 15_890.0, 3: 123.1, 4: 125.0}
    kept = headline("decode_tps", runs, {})
    assert kept.value == 124.0  # the median, even with the flood in
    left_out = headline("decode_tps", runs, {2: "held"})
    assert left_out.runs_used == [0, 1, 3, 4] and left_out.value == pytest.approx(123.55)
    assert [(e.index, e.reason) for e in left_out.runs_excluded] == [(2, "held")]
    assert left_out.half_width_pct is not None and left_out.half_width_pct < 2
    assert headline("decode_tps", {}, {}).value is None


def test_the_band_is_the_floor_or_both_intervals() -> None:
    assert band(None, None).pct == FLOOR_PCT and band(None, None).source == "floor"
    assert band(1.0, 2.0).pct == FLOOR_PCT  # sqrt(5) < 3
    wide = band(6.0, 8.0)
    assert (wide.pct, wide.source, wide.too_wide) == (10.0, "intervals", False)
    assert band(8.0, 8.0).too_wide and band(8.0, 8.0).pct > MAX_BAND_PCT


@settings(max_examples=60, deadline=None)
@example([1.8e305, 1e308, -1e300, 5e-324])
@example([1.7e308, 1.7e308, -1.7e308, -1.7e308])  # sums of neighbours beyond a double
@example([5e-324, 1.7976931348623157e308])  # the smallest and the largest double
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=9))
def test_a_headline_of_any_numbers_is_finite_and_its_band_a_number_or_too_wide(
    values: list[float],
) -> None:
    h = headline("decode_tps", dict(enumerate(values)), {})
    assert all(v is None or math.isfinite(v) for v in (h.value, h.low, h.high))
    assert (h.value is None) == (not values) and (h.low is None) == (len(values) < 2)
    b = band(h.half_width_pct, h.half_width_pct)
    assert math.isfinite(b.pct) or b.too_wide
    assert judged(0.0, b) == ("inconclusive" if b.too_wide else "within")


def test_judged() -> None:
    assert judged(2.9, band(None, None)) == "within"
    assert judged(-3.1, band(None, None)) == "outside"
    assert judged(0.0, band(9.0, 9.0)) == "inconclusive"
    assert judged(None, band(None, None)) == "inconclusive"


def test_a_quantile_of_many_requests_is_bounded_by_order_statistics() -> None:
    values = [float(v) for v in range(1, 101)]  # 100 requests: rank k holds k
    # median: ranks 50 -/+ 1.96 * sqrt(100 * 0.5 * 0.5) = 50 -/+ 9.8 -> 40 and 60
    assert quantile_interval(values, 0.5) == (40.0, 60.0)
    # p90: 90 -/+ 1.96 * 3 = 90 -/+ 5.88 -> 84 and 96
    assert quantile_interval(values, 0.9) == (84.0, 96.0)
    # p99: 99 + 1.96 * 0.995 reaches rank 101: 100 requests cannot bound it
    assert quantile_interval(values, 0.99) is None
    assert quantile_interval(values[:7], 0.5) is None and quantile_interval([], 0.5) is None
    assert quantile_interval([float(v) for v in range(1, 401)], 0.99) == (392.0, 400.0)


def test_a_means_interval_is_two_standard_errors() -> None:
    interval = mean_interval(10.0, 2.0, 16)
    assert interval is not None
    assert interval == pytest.approx((10.0 - 1.959964 * 0.5, 10.0 + 1.959964 * 0.5))
    assert mean_interval(10.0, None, 1) is None and mean_interval(10.0, 2.0, 1) is None
