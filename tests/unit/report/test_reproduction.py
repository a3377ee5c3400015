"""The reproduction verdict on the fixture reports (two real cpu-tiny runs of one recipe, A and
B): each headline figure against its band by hand, and the three verdicts with their causes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from kit.metrics import Stats
from kit.probe.models import HostLoad, ProcessCpu
from kit.report import Report
from kit.report.files import read_report
from kit.report.reproduction import FLOOR_PCT, judge


@pytest.fixture(scope="module")
def a(repo_root: Path) -> Report:
    return read_report(repo_root / "tests/fixtures/reports/cpu-tiny-a.json", allow_unsigned=True)[0]


@pytest.fixture(scope="module")
def b(repo_root: Path) -> Report:
    return read_report(repo_root / "tests/fixtures/reports/cpu-tiny-b.json", allow_unsigned=True)[0]


def scaled(report: Report, prompt: str, factor: float) -> Report:
    """The report with one prompt's decode figure scaled (a slower or faster re-run)."""
    assert report.bench is not None
    prompts = []
    for p in report.bench.prompts:
        if p.prompt == prompt:
            s = p.decode_tps
            assert s.mean is not None
            p = p.model_copy(update={"decode_tps": s.model_copy(update={"mean": s.mean * factor})})
        prompts.append(p)
    return report.model_copy(update={"bench": report.bench.model_copy(update={"prompts": prompts})})


def band_by_hand(x: Stats, y: Stats) -> tuple[float, str]:
    assert x.mean is not None and x.std is not None and y.std is not None
    runs = 2 * math.sqrt(x.std**2 / x.n + y.std**2 / y.n)
    floor = abs(x.mean) * FLOOR_PCT / 100
    return (runs, "runs") if runs > floor else (floor, "floor")


def test_each_headline_figure_against_its_band_by_hand(a: Report, b: Report) -> None:
    result = judge(a, b)
    assert a.bench is not None and b.bench is not None
    expected: dict[str, Any] = {}
    for pa, pb in zip(a.bench.prompts, b.bench.prompts, strict=True):
        expected[f"{pa.prompt} decode TPS"] = (pa.decode_tps, pb.decode_tps)
    for fa, fb in zip(a.bench.prefill, b.bench.prefill, strict=True):
        expected[f"prefill {fa.depth}"] = (fa.prefill_tps, fb.prefill_tps)
    assert [f.metric for f in result.figures] == list(expected)
    for f in result.figures:
        x, y = expected[f.metric]
        band, source = band_by_hand(x, y)
        assert f.original == x.mean and f.new == y.mean
        assert f.delta_pct == pytest.approx((y.mean - x.mean) / x.mean * 100)
        assert f.band_pct == pytest.approx(band / x.mean * 100) and f.band_from == source
        assert f.within is (abs(y.mean - x.mean) <= band)
    verdict = "REPRODUCED" if all(f.within for f in result.figures) else "DIFFERENT"
    assert result.verdict == verdict
    assert not result.variation and result.original_run_id == a.run_id


def test_a_report_reproduces_itself(a: Report) -> None:
    result = judge(a, a, original_sha256="ab" * 32)
    assert result.verdict == "REPRODUCED"
    widest = max(f.band_pct for f in result.figures)
    assert result.summary == (
        f"REPRODUCED: all {len(result.figures)} headline figures within their noise bands "
        f"(at most ±{widest:.1f} %)"
    )
    assert all(f.delta_pct == 0 for f in result.figures)
    assert result.text().splitlines()[0] == f"verdict: {result.summary}"


def test_a_slower_rerun_is_different_with_the_figure_and_no_visible_cause(a: Report) -> None:
    result = judge(a, scaled(a, "code", 0.8))
    assert result.verdict == "DIFFERENT"
    assert (
        result.summary
        == f"DIFFERENT: 1 of {len(result.figures)} headline figures outside their noise bands"
    )
    assert len(result.differing) == 1 and result.differing[0].startswith("code decode TPS: ")
    assert "(-20.0 %, band ±" in result.differing[0]
    assert result.causes == [
        "none that kit can see: the reports show the same hardware, engine, patches and "
        "settings, and quiet hosts"
    ]
    assert "OUTSIDE" in result.text()


def test_causes_kit_can_see(a: Report) -> None:
    assert a.host is not None
    host = a.host.model_copy(update={"os": a.host.os.model_copy(update={"kernel": "6.99.0-other"})})
    load = HostLoad(
        window_s=60.0, windows=2, samples=120, cores=2, busy_pct=90.0, steal_pct=0.0,
        own_cpu_pct=50.0, other_cpu_pct=37.0, loadavg_start=1.0, loadavg_end=2.5,
        top_other=[ProcessCpu(comm="cc1plus", cpu_s=40.0)],
        foreign_gpu_processes=None, foreign_gpu_unavailable="no NVML", error=None,
    )  # fmt: skip
    new = scaled(a, "narrative", 1.25).model_copy(update={"host": host, "host_load": load})
    result = judge(a, new)
    assert result.verdict == "DIFFERENT"
    assert f"OS kernel {a.host.os.kernel} vs 6.99.0-other" in result.causes
    assert any(
        c == "the new host was not quiet: other processes used 37 % of its CPU while "
        "measuring (most: cc1plus)"
        for c in result.causes
    )


def test_an_incomplete_rerun_is_different(a: Report) -> None:
    new = a.model_copy(update={"status": "incomplete", "incomplete_reason": "server exited"})
    result = judge(a, new)
    assert result.verdict == "DIFFERENT"
    assert result.differing == ["the re-run is incomplete: server exited"]
    assert result.summary == "DIFFERENT: the re-run is incomplete"


def test_another_model_or_protocol_is_not_comparable(a: Report) -> None:
    recipe = {**a.recipe, "bench": {**a.recipe["bench"], "runs": a.recipe["bench"]["runs"] + 2}}
    result = judge(a, a.model_copy(update={"recipe": recipe}), overrides=["bench.runs=7"])
    assert result.verdict == "NOT COMPARABLE"
    assert result.summary == "NOT COMPARABLE: protocol differs"
    assert result.not_comparable[0].startswith("protocol: bench.runs ")
    assert result.variation and result.overrides == ["bench.runs=7"]
    assert result.causes == [] and result.differing == []
