from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kit.bench.load import percentiles
from kit.metrics import (
    add_spec,
    decode_tps,
    is_usable,
    metric_sum,
    parse_prometheus,
    server_window,
    spec_decode_delta,
    spec_decode_from_counts,
    summarize,
    wall_tps,
)


def test_summarize_hand_computed() -> None:
    s = summarize([10.0, 12.0, 14.0])
    assert s.n == 3
    assert s.mean == pytest.approx(12.0)
    assert s.std == pytest.approx(2.0)  # sample std: sqrt(((-2)^2 + 0 + 2^2) / 2)
    assert s.cv_pct == pytest.approx(2.0 / 12.0 * 100)
    assert (s.min, s.max) == (10.0, 14.0)


def test_summarize_edges() -> None:
    one = summarize([5.0])
    assert (one.n, one.mean, one.std, one.cv_pct) == (1, 5.0, None, None)
    none = summarize([])
    assert (none.n, none.mean, none.min) == (0, None, None)


FINITE = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@example([1.8e305, 1e308, -1e300, 5e-324])
@example([1e308, 1e308])  # a sum beyond a double: fmean's fsum overflows
@example([1.2e308, 1.2e308, 1.2e308])  # so does the sum of their halves (found at 10x)
@example([1.7976931348623157e308] * 3)  # and of their thirds
@example([1.7e308, -1.7e308])  # a standard deviation beyond a double
@example([1.797693134862316e305 * 1000])  # issue 44's TTFT in ms: inf, which is no statistic
@given(st.lists(FINITE, max_size=20))
def test_the_statistics_of_any_numbers_are_finite_or_none_and_never_raise(
    values: list[float],
) -> None:
    s, p = summarize(values), percentiles(values)
    assert s.n == p.n == len(values)
    shown = [s.mean, s.std, s.cv_pct, s.min, s.max, p.mean, p.std, p.p50, p.p90, p.p95, p.p99]
    assert all(v is None or math.isfinite(v) for v in shown)
    if values and all(map(math.isfinite, values)):  # the mean of finite values fits a double
        assert s.mean is not None and p.mean is not None and p.p50 is not None
        assert (s.min, s.max) == (min(values), max(values))
    else:
        assert s.mean is None and p.p50 is None


def test_tps_definitions() -> None:
    # 1000 tokens, first text after 0.2 s, stream over at 8.5 s
    assert decode_tps(1000, 8.5, 0.2) == pytest.approx(1000 / 8.3)
    assert wall_tps(1000, 8.5) == pytest.approx(1000 / 8.5)
    assert decode_tps(10, 1.0, 1.0) is None
    assert wall_tps(10, 0.0) is None


def test_usable_rule() -> None:
    assert is_usable(250, 1000, 0.25)
    assert not is_usable(249, 1000, 0.25)
    assert not is_usable(None, 1000, 0.25)


PROM = """
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 700.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 335.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 70.0
vllm:generation_tokens_total{engine="0",model_name="m"} 2000.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:request_decode_time_seconds_sum{engine="0",model_name="m"} 20.0
vllm:request_decode_time_seconds_count{engine="0",model_name="m"} 10.0
weird_label{a="x\\"y",b="c,d"} 3 1700000000
"""


def test_parse_prometheus() -> None:
    s = parse_prometheus(PROM)
    assert metric_sum(s, "vllm:spec_decode_num_drafts_total") == 100.0
    assert metric_sum(s, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position="1") == 70
    assert metric_sum(s, "weird_label", a='x"y', b="c,d") == 3.0
    assert metric_sum(s, "absent") is None


def test_text_that_is_not_prometheus_is_refused_naming_the_line() -> None:
    with pytest.raises(ValueError, match="not a metric line"):
        parse_prometheus(PROM + "not a metric line\n")


def test_spec_decode_delta_both_conventions() -> None:
    before = parse_prometheus(PROM)
    after_text = (
        PROM.replace("} 100.0", "} 15188.0")
        .replace("} 700.0", "} 106316.0")
        .replace("} 335.0", "} 50847.0")
    )
    after = parse_prometheus(after_text)
    spec = spec_decode_delta(before, after)
    assert spec is not None
    # the reference run's counters: 50512 accepted of 105616 drafted in 15088 steps
    assert (spec.drafts, spec.draft_tokens, spec.accepted_tokens) == (15088, 105616, 50512)
    assert spec.acceptance_rate == pytest.approx(0.478, abs=5e-4)
    assert spec.acceptance_length == pytest.approx(4.35, abs=5e-3)
    assert spec.accepted_per_draft == pytest.approx(3.35, abs=5e-3)


def test_spec_decode_absent_and_sum() -> None:
    assert spec_decode_delta({}, parse_prometheus("x 1")) is None
    a = spec_decode_from_counts(10, 70, 35, [8, 7])
    b = spec_decode_from_counts(10, 70, 70, [10, 10, 10])
    total = add_spec([a, b])
    assert total is not None
    assert (total.drafts, total.accepted_tokens, total.per_position_accepted) == (
        20,
        105,
        [18, 17, 10],
    )
    assert total.per_position_rate == [0.9, 0.85, 0.5]
    assert add_spec([]) is None


def test_server_window() -> None:
    before = parse_prometheus(PROM)
    after = parse_prometheus(
        PROM.replace("} 2000.0", "} 3000.0")
        .replace("} 1.5", "} 2.5")
        .replace("} 20.0", "} 30.0")
        .replace('model_name="m"} 10.0', 'model_name="m"} 15.0')
    )
    w = server_window(before, after)
    assert w.generation_tokens == 1000
    assert w.mean_ttft_ms == pytest.approx(200.0)  # 1.0 s over 5 requests
    assert w.decode_tps == pytest.approx(100.0)  # 1000 tokens over 10 s of decode
    assert w.mean_itl_ms is None
    assert not math.isnan(w.mean_decode_s or 0)
