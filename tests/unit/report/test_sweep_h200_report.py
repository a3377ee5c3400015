"""The concurrency sweep's complete H200 run (issue 14: experiments/results/h200-llama8b-bf16-
sweep-2026-12-03/, copied to tests/fixtures/results/): it verifies item by item against the
committed key; kit's seven points and vLLM's bench serve at the same seven all completed every
request; vLLM's saved results are the ones the report compared with; and the throughputs agree
within kit's 2 % (tests/repo/test_experiment_outputs.py runs experiments/sweep-noise.py on it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.figures import AGREEMENT_PCT
from kit.report.files import read_report
from kit.report.schema import Report
from kit.report.verify import verify_report
from kit.signing import load_public_key
from kit.vllm_bench.points import compare_point

FIXTURES = Path(__file__).parents[2] / "fixtures"
RUN = FIXTURES / "results" / "h200-llama8b-bf16-sweep-2026-12-03"
KEY = load_public_key(FIXTURES / "examples" / "keys" / "h200-2026-12-02-dflash2.pub")
LEVELS = [1, 2, 4, 8, 16, 32, 64]


@pytest.fixture(scope="module")
def report() -> Report:
    rep, check = read_report(RUN / "report.json", KEY)
    assert check.valid and rep.bench is not None and rep.vllm_bench is not None
    return rep


def test_sweep_report_verifies_item_by_item() -> None:
    result = verify_report(RUN / "report.json", KEY)
    assert result.ok and all(item.ok for item in result.items), result.failed


def test_every_point_complete_on_both_sides(report: Report) -> None:
    assert report.status == "complete" and report.recipe_overrides == []
    assert report.engine.version == "0.26.0" and report.engine.patch_series is None
    points = report.bench.load_points
    assert [p.level for p in points] == LEVELS
    assert all(p.completed == p.requests == 20 * p.level for p in points)
    vb = report.vllm_bench
    assert [p.label for p in vb.points] == [p.label for p in points]
    assert all(p.error is None and p.failed == 0 for p in vb.points)
    assert [p.completed for p in vb.points] == [20 * n for n in LEVELS]


def test_saved_vllm_results_are_the_ones_compared(report: Report) -> None:
    for point, vp in zip(report.bench.load_points, report.vllm_bench.points, strict=True):
        saved = json.loads((RUN / f"vllm-bench-{point.label}.json").read_text())
        figures, agree = compare_point(point, saved)
        # each figure the report recorded, recomputed from vLLM's file (kit now also compares
        # the ITL p99, which this 2026-12-03 report does not list)
        again = {f.figure: f.model_dump() for f in figures}
        assert [again[f.figure] for f in vp.figures] == [f.model_dump() for f in vp.figures]
        assert agree == vp.agree


def test_throughput_agrees_with_vllm_at_every_point(report: Report) -> None:
    for vp in report.vllm_bench.points:
        (tps,) = [f for f in vp.figures if f.figure == "output tok/s"]
        assert abs(tps.delta_pct) <= AGREEMENT_PCT, vp.label
