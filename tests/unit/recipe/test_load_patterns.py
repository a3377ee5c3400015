"""kit.recipe.patterns: each load pattern's behaviour, asked of its class (levels, names,
warm-ups, the send plan, the vLLM arguments, the stop rule, the page's axis)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kit.recipe.patterns import (
    ConcurrencyLoad,
    LoadPattern,
    RateLoad,
    SendPlan,
    SweepLoad,
    load_class,
)
from kit.recipe.slo import Slo


@dataclass
class Figures:
    """A measured point as the stop rule reads it (a LoadPoint has more)."""

    label: str
    level: float
    requests: int
    good: int | None
    output_tps: float | None


def conc(**kw: object) -> ConcurrencyLoad:
    return ConcurrencyLoad.model_validate({"pattern": "concurrency", "levels": [1, 4], **kw})


def rate(**kw: object) -> RateLoad:
    return RateLoad.model_validate({"pattern": "rate", "rates": [0.5, 2], "requests": 6, **kw})


def sweep(**kw: object) -> SweepLoad:
    return SweepLoad.model_validate({"pattern": "sweep", "max_concurrency": 8, **kw})


def test_each_pattern_names_its_levels_and_points() -> None:
    c = conc(requests=3)
    assert c.planned_levels() == [1.0, 4.0]
    assert [c.label(v) for v in c.planned_levels()] == ["concurrency-1", "concurrency-4"]
    assert c.short_label(4.0) == "c=4"
    r = rate()
    assert r.planned_levels() == [0.5, 2.0]
    assert [r.label(v) for v in r.planned_levels()] == ["rate-0.5", "rate-2"]
    assert r.short_label(0.5) == "rate 0.5"
    s = sweep(requests=2, start=3, factor=1.5)
    assert s.planned_levels() == [3.0, 4.0, 6.0, 8.0]
    # a sweep's points are concurrency points: the same names
    assert [s.label(v) for v in s.planned_levels()][-1] == "concurrency-8"
    assert s.short_label(6.0) == "c=6"


def test_warmups_and_requests_per_point_or_per_stream() -> None:
    c = conc(requests=5, warmup_requests=2)
    assert (c.warmups_at(4), c.requests_at(4)) == (2, 5)
    c = conc(requests=5, requests_per_stream=3, warmup_per_stream=2)
    assert (c.warmups_at(4), c.requests_at(4)) == (8, 12)
    assert (c.warmups_at(1), c.requests_at(1)) == (2, 3)
    s = sweep(requests=5, requests_per_stream=10, warmup_per_stream=1)
    assert (s.warmups_at(8), s.requests_at(8)) == (8, 80)
    r = rate(warmup_requests=1)
    assert (r.warmups_at(2.0), r.requests_at(2.0)) == (1, 6)


@pytest.mark.parametrize("make", [conc, sweep])
def test_a_streams_patterns_warmup_is_per_point_or_per_stream_not_both(
    make: Callable[..., LoadPattern],
) -> None:
    with pytest.raises(ValueError, match="warmup_requests and warmup_per_stream both set"):
        make(requests=2, warmup_requests=1, warmup_per_stream=1)


def test_the_send_plan_is_closed_loop_streams_or_open_loop_arrivals() -> None:
    assert conc(requests=3).send_plan(4.0, 10) == SendPlan(streams=4, gaps=None)
    assert sweep(requests=3).send_plan(2.0, 10) == SendPlan(streams=2, gaps=None)
    even = rate(arrival="constant")
    assert even.send_plan(4.0, 3) == SendPlan(streams=3, gaps=[0.0, 0.25, 0.25])
    capped = rate(arrival="constant", max_concurrency=2)
    assert capped.send_plan(2.0, 3) == SendPlan(streams=2, gaps=[0.0, 0.5, 0.5])
    poisson = rate(seed=7)
    plan = poisson.send_plan(2.0, 50)
    assert plan.gaps == poisson.arrival_gaps(2.0, 50) and len(plan.gaps) == 50
    assert plan.gaps != rate(seed=8).arrival_gaps(2.0, 50)


def test_vllm_bench_is_given_each_patterns_own_arguments() -> None:
    assert conc(requests=3).vllm_args(4.0) == [
        "--request-rate", "inf", "--max-concurrency", "4",
    ]  # fmt: skip
    assert sweep(requests=3).vllm_args(16.0)[-1] == "16"
    assert rate().vllm_args(0.5) == ["--request-rate", "0.5", "--burstiness", "1"]
    assert rate(max_concurrency=3).vllm_args(2.0) == [
        "--request-rate", "2", "--burstiness", "1", "--max-concurrency", "3",
    ]  # fmt: skip
    # vLLM's warm-ups: its own count, but kit's where kit warms up per stream
    assert conc(requests=3).vllm_warmups(4.0, 7) == 7
    assert conc(requests=3, warmup_per_stream=2).vllm_warmups(4.0, 7) == 8
    assert sweep(requests=3, warmup_per_stream=1).vllm_warmups(2.0, 7) == 2
    assert rate(warmup_requests=1).vllm_warmups(2.0, 7) == 7
    # what vLLM cannot send as kit did, said once
    assert rate(arrival="constant").vllm_note() == (
        "kit sent constant arrivals, vLLM Poisson ones (burstiness 1)"
    )
    assert rate().vllm_note() is None and conc(requests=3).vllm_note() is None


def test_only_a_sweep_stops_early() -> None:
    flat = [Figures("concurrency-1", 1, 4, 0, 100.0), Figures("concurrency-4", 4, 4, 0, 100.0)]
    slo = Slo(ttft_ms=1)
    assert conc(requests=4).stop_reason(flat, slo) is None
    assert rate().stop_reason(flat, slo) is None
    s = sweep(requests=4)
    assert s.stop_reason(flat[:1], None) is None
    assert s.stop_reason(flat, None) == (
        "saturated: output tok/s rose +0.0 % over concurrency-1, less than 5 %"
    )
    assert s.stop_reason(flat[:1], slo) == "SLOs failed: 0 % of requests met bench.slo, below 90 %"
    top = Figures("concurrency-8", 8, 4, None, 1000.0)
    assert s.stop_reason([flat[0], top], None) == "reached max_concurrency 8"


def test_a_points_pattern_name_finds_its_class_and_how_its_axis_is_drawn() -> None:
    assert load_class("concurrency") is ConcurrencyLoad
    assert load_class("rate") is RateLoad
    assert load_class("sweep") is SweepLoad
    assert load_class("burst") is None
    assert (ConcurrencyLoad.axis_label, ConcurrencyLoad.axis_short) == (
        "concurrency (requests in flight)",
        "concurrency",
    )
    assert (ConcurrencyLoad.log_base, RateLoad.log_base, SweepLoad.log_base) == (2, None, None)
    assert RateLoad.axis_label == RateLoad.axis_short == "request rate (requests/s)"
    assert SweepLoad.axis_label == "sweep"  # as its points have always been drawn


def test_the_base_is_no_pattern_of_its_own() -> None:
    with pytest.raises(TypeError, match="abstract"):
        LoadPattern(requests=1)  # type: ignore[abstract]


def test_the_page_draws_the_levels_as_their_pattern_says() -> None:
    pytest.importorskip("matplotlib")
    from kit.bench.load import LoadPoint
    from kit.report.html.figure import pyplot
    from kit.report.html.sweep import level_axis, short_label

    def points(pattern: str, levels: list[float], label: str) -> list[LoadPoint]:
        return [
            LoadPoint.model_construct(pattern=pattern, level=v, label=f"{label}-{v:g}")
            for v in levels
        ]

    plt = pyplot()
    fig, (a, b, c, d) = plt.subplots(1, 4)
    level_axis(a, points("concurrency", [1, 2, 8], "concurrency"))
    assert (a.get_xscale(), a.get_xlabel()) == ("log", "concurrency (requests in flight)")
    level_axis(b, points("concurrency", [1, 2, 8], "concurrency"), short=True)
    assert b.get_xlabel() == "concurrency"
    rates = points("rate", [0.5, 2], "rate")
    level_axis(c, rates)
    assert (c.get_xscale(), c.get_xlabel()) == ("linear", "request rate (requests/s)")
    level_axis(d, points("burst", [1, 2], "burst"))  # a pattern this kit does not know
    assert (d.get_xscale(), d.get_xlabel()) == ("linear", "burst")
    plt.close(fig)
    assert [short_label(p) for p in rates] == ["rate 0.5", "rate 2"]
    assert short_label(points("sweep", [4], "concurrency")[0]) == "c=4"
    assert short_label(points("burst", [3], "burst")[0]) == "burst-3"


def test_verify_holds_each_point_to_its_patterns_stop_rule() -> None:
    from types import SimpleNamespace

    from kit.bench import RequestRecord
    from kit.bench.load import summarize_point
    from kit.recipe import Bench
    from kit.report.verify import recompute

    def sent(label: str) -> RequestRecord:  # 10 tokens in 1 s: 10 output tok/s at each point
        return RequestRecord(
            prompt=label, phase="load", index=0, max_tokens=10,
            started_at="2026-12-01T00:00:00.000+00:00", sent_s=0.0, ttft_s=0.1, wall_s=1.0,
            prompt_tokens=5, completion_tokens=10, decode_tps=None, wall_tps=None,
            finish_reason="length", usable=True, chunks=2, text_chunk_times_s=[0.1, 0.5],
            text="x",
        )  # fmt: skip

    def problems(load: dict[str, object], stops: list[str | None]) -> list[str]:
        bench = Bench.model_validate({"load": {"requests": 1, **load}})
        records = [sent("concurrency-1"), sent("concurrency-2")]
        points = [
            summarize_point(f"concurrency-{n}", str(load["pattern"]), n, records, None).model_copy(
                update={"stop_reason": stop}
            )
            for n, stop in zip((1, 2), stops, strict=True)
        ]
        b = SimpleNamespace(load_points=points, records=records)
        return recompute._load_point_problems(b, bench)

    sweep = {"pattern": "sweep", "max_concurrency": 4}
    saturated = "saturated: output tok/s rose +0.0 % over concurrency-1, less than 5 %"
    assert problems(sweep, [None, saturated]) == []
    assert problems(sweep, [None, None]) == [
        f"concurrency-2: stop_reason None, the sweep's rule says {saturated!r}"
    ]
    assert problems(sweep, [saturated, saturated]) == [
        f"concurrency-1: stop_reason {saturated!r}, the sweep's rule says None"
    ]
    concurrency = {"pattern": "concurrency", "levels": [1, 2]}
    assert problems(concurrency, [None, None]) == []
    assert problems(concurrency, [None, "reached"]) == [
        "concurrency-2: stop_reason 'reached', the concurrency's rule says None"
    ]
