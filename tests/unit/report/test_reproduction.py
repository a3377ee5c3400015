"""The reproduction verdict on the fixture reports (two real cpu-tiny runs of one recipe, A and
B): each headline figure against its band by hand (kit.noise's rule), and the four verdicts with
their causes, directions and exit codes."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit.noise import MAX_BAND_PCT, median_interval
from kit.probe.models import Finding, HostLoad, ProcessCpu
from kit.report import Report
from kit.report.files import read_report
from kit.report.reproduction import FLOOR_PCT, judge
from kit.report.verdict import verdict_exit

Scaled = Callable[[Report, str, float], Report]


@pytest.fixture(scope="module")
def a(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports/cpu-tiny-a.json", allow_unsigned=True)[0]


@pytest.fixture(scope="module")
def b(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports/cpu-tiny-b.json", allow_unsigned=True)[0]


def values(report: Report, prompt: str, phase: str) -> list[float]:
    assert report.bench is not None
    return [
        r.decode_tps if phase == "measured" else (r.prompt_tokens or 0) / (r.ttft_s or 1)
        for r in report.bench.records
        if r.prompt == prompt and r.phase == phase and r.error is None and r.decode_tps is not None
    ]


def band_by_hand(x: list[float], y: list[float]) -> tuple[float, str]:
    """kit.noise's rule written out: max(floor, root sum of squares of the half-widths)."""
    halves = []
    for v in (x, y):
        interval = median_interval(v)
        assert interval is not None
        halves.append((interval[1] - interval[0]) / 2 / statistics.median(v) * 100)
    spread = math.sqrt(halves[0] ** 2 + halves[1] ** 2)
    return (spread, "intervals") if spread > FLOOR_PCT else (FLOOR_PCT, "floor")


def test_each_headline_figure_against_its_band_by_hand(a: Report, b: Report) -> None:
    result = judge(a, b)
    assert a.bench is not None and b.bench is not None
    expected: dict[str, Any] = {}
    for p in a.bench.prompts:
        expected[f"{p.prompt} decode TPS"] = (
            values(a, p.prompt, "measured"),
            values(b, p.prompt, "measured"),
        )
    for f in a.bench.prefill:
        name = f"prefill-{f.depth}"
        expected[f"prefill {f.depth}"] = (values(a, name, "prefill"), values(b, name, "prefill"))
    # the decode and prefill figures by hand; the others judged beside them (wall TPS, TTFT,
    # acceptance: tests/unit/report/test_whole_claim.py)
    by_hand = [f for f in result.figures if f.key in ("decode_tps", "prefill_tps")]
    assert [f.metric for f in by_hand] == list(expected)
    for f in by_hand:
        x, y = expected[f.metric]
        mx, my = statistics.median(x), statistics.median(y)
        band, source = band_by_hand(x, y)
        assert f.original == mx and f.new == my
        assert f.delta_pct == pytest.approx((my - mx) / mx * 100)
        assert f.band_pct == pytest.approx(band) and f.band_from == source
        assert f.within is (abs(my - mx) / mx * 100 <= band)
        assert f.direction == ("higher" if my > mx else "lower")
    verdict = "REPRODUCED" if all(f.within for f in result.figures) else "DIFFERENT"
    assert result.verdict == verdict
    assert not result.variation and result.original_run_id == a.run_id


def test_a_report_reproduces_itself(a: Report) -> None:
    result = judge(a, a, original_sha256="ab" * 32)
    assert result.verdict == "REPRODUCED"
    widest = max(
        f.band_pct
        for f in result.figures
        if f.band_pct is not None and f.band_from in ("intervals", "floor")
    )
    assert result.summary == (
        f"REPRODUCED: all {len(result.figures)} judged figures within their bands "
        f"(relative bands at most ±{widest:.1f} %)"
    )
    assert all(f.delta_pct == 0 for f in result.figures)
    assert result.text().splitlines()[0] == f"verdict: {result.summary}"


def test_a_slower_rerun_is_different_with_the_figure_and_no_visible_cause(
    a: Report, scaled: Scaled
) -> None:
    result = judge(a, scaled(a, "code", 0.8))
    assert result.verdict == "DIFFERENT"
    assert result.summary == (
        f"DIFFERENT: 1 of {len(result.figures)} judged figures outside their bands "
        "(code decode TPS), lower (worse)"
    )
    assert len(result.differing) == 1 and result.differing[0].startswith("code decode TPS: ")
    assert "(-20.0 %, lower, worse; band ±" in result.differing[0]
    assert result.causes == [
        "none that kit can see: the reports show the same hardware, engine, patches and "
        "settings, and quiet hosts"
    ]
    assert "OUTSIDE" in result.text()
    assert verdict_exit(result) == 4
    assert verdict_exit(result, "worse") == 4 and verdict_exit(result, "never") == 0


def test_a_faster_rerun_is_different_but_passes_fail_on_worse(a: Report, scaled: Scaled) -> None:
    result = judge(a, scaled(scaled(a, "code", 1.3), "narrative", 1.3))
    assert result.verdict == "DIFFERENT"
    assert result.summary.endswith(
        "outside their bands (narrative decode TPS, code decode TPS), all higher (better)"
    )
    assert verdict_exit(result) == 4 and verdict_exit(result, "worse") == 0


def test_causes_kit_can_see(a: Report, scaled: Scaled) -> None:
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


def test_an_incomplete_rerun_is_inconclusive(a: Report) -> None:
    new = a.model_copy(update={"status": "incomplete", "incomplete_reason": "server exited"})
    result = judge(a, new)
    assert result.verdict == "INCONCLUSIVE"
    assert result.inconclusive == ["the re-run is incomplete: server exited"]
    assert result.summary == "INCONCLUSIVE: the re-run is incomplete: server exited"
    assert all(f.status == "inconclusive" and not f.within for f in result.figures)
    assert verdict_exit(result) == 5


def invalid(report: Report, code: str = "decode-cv-high") -> Report:
    bad = Finding(code=code, severity="error", message="narrative: decode TPS CV 215 %")
    validity = report.validity.model_copy(update={"valid": False, "reasons": [bad]})
    return report.model_copy(update={"validity": validity})


@pytest.mark.parametrize("side", ["original", "re-run"])
def test_an_invalid_side_is_never_reproduced(a: Report, side: str, scaled: Scaled) -> None:
    # the same figures on both sides: within any band, and still not REPRODUCED
    result = judge(invalid(a), a) if side == "original" else judge(a, invalid(a))
    assert result.verdict == "INCONCLUSIVE"
    assert result.inconclusive == [f"the {side} is INVALID (decode-cv-high)"]
    assert all(f.status == "inconclusive" for f in result.figures)
    # even a figure far outside its band does not make a garbage comparison DIFFERENT
    worse = judge(invalid(a), scaled(a, "code", 0.5))
    assert worse.verdict == "INCONCLUSIVE" and verdict_exit(worse) == 5


def test_a_band_wider_than_the_maximum_is_inconclusive(a: Report) -> None:
    assert a.bench is not None
    spread = [
        r.model_copy(update={"decode_tps": (r.decode_tps or 0) * (0.7 + 0.15 * r.index)})
        if r.prompt == "code" and r.phase == "measured"
        else r
        for r in a.bench.records
    ]
    prompts = [p.model_copy(update={"headline": None}) for p in a.bench.prompts]
    noisy = a.model_copy(
        update={"bench": a.bench.model_copy(update={"records": spread, "prompts": prompts})}
    )
    result = judge(noisy, noisy)
    code = next(f for f in result.figures if f.metric == "code decode TPS")
    assert code.status == "inconclusive" and code.band_pct > MAX_BAND_PCT
    assert result.verdict == "INCONCLUSIVE"
    assert any(r.startswith("code decode TPS: band ±") for r in result.inconclusive)


def test_another_model_or_protocol_is_not_comparable(a: Report) -> None:
    recipe = {**a.recipe, "bench": {**a.recipe["bench"], "runs": a.recipe["bench"]["runs"] + 2}}
    result = judge(a, a.model_copy(update={"recipe": recipe}), overrides=["bench.runs=7"])
    assert result.verdict == "NOT COMPARABLE"
    assert result.summary == "NOT COMPARABLE: protocol differs"
    assert result.not_comparable[0].startswith("protocol: bench.runs ")
    assert result.variation and result.overrides == ["bench.runs=7"]
    assert result.causes == [] and result.differing == []


@pytest.mark.parametrize(
    ("other", "code", "first_line"),
    [
        (lambda a, scaled: a, 0, "verdict: REPRODUCED"),
        (lambda a, scaled: scaled(a, "code", 0.8), 4, "verdict: DIFFERENT"),
        (lambda a, scaled: invalid(a), 5, "verdict: INCONCLUSIVE"),
    ],
)
def test_compare_exits_by_the_verdict(
    a: Report, tmp_path: Path, other: Any, code: int, first_line: str, scaled: Scaled
) -> None:
    from click.testing import CliRunner

    from kit.cli import main
    from kit.report.files import encode_report

    paths = []
    for name, report in (("a.json", a), ("b.json", other(a, scaled))):
        paths.append(tmp_path / name)
        paths[-1].write_bytes(encode_report(report))
    args = ["report", "compare", *map(str, paths), "--allow-unsigned"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
    assert any(line.startswith(first_line) for line in result.stdout.splitlines())
    if code == 4:  # --fail-on relaxes DIFFERENT only
        worse = CliRunner().invoke(main, [*args, "--fail-on", "worse"])
        assert worse.exit_code == 4
        never = CliRunner().invoke(main, [*args, "--fail-on", "never"])
        assert never.exit_code == 0


def test_compare_of_another_protocol_exits_1(a: Report, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kit.cli import main
    from kit.report.files import encode_report

    recipe = {**a.recipe, "bench": {**a.recipe["bench"], "runs": 7}}
    (tmp_path / "a.json").write_bytes(encode_report(a))
    (tmp_path / "b.json").write_bytes(encode_report(a.model_copy(update={"recipe": recipe})))
    result = CliRunner().invoke(
        main,
        [
            "report",
            "compare",
            str(tmp_path / "a.json"),
            str(tmp_path / "b.json"),
            "--allow-unsigned",
        ],
    )
    assert result.exit_code == 1
    assert "NOT COMPARABLE" in result.stderr


def test_a_counter_of_zero_is_judged_in_its_own_unit(a: Report) -> None:
    """A draft that accepted nothing (0 % on both sides) has no percentage of the original: its
    counters' rule judges it in its own unit, and the text says so instead of INCONCLUSIVE."""
    assert a.bench is not None and a.bench.spec_decode is not None
    sd = a.bench.spec_decode
    none = sd.model_copy(
        update={
            "accepted_tokens": 0,
            "acceptance_rate": 0.0,
            "acceptance_length": 1.0,
            "accepted_per_draft": 0.0,
            "per_position_rate": [0.0] * len(sd.per_position_rate),
            "per_position_accepted": [0] * len(sd.per_position_accepted),
        }
    )
    prompts = [p.model_copy(update={"spec_decode": None}) for p in a.bench.prompts]
    zero = a.model_copy(
        update={"bench": a.bench.model_copy(update={"spec_decode": none, "prompts": prompts})}
    )
    result = judge(zero, zero)
    rate = next(f for f in result.figures if f.metric == "acceptance rate")
    assert (rate.original, rate.delta_pct, rate.status) == (0.0, None, "within")
    assert result.verdict == "REPRODUCED"
    text = result.text()
    assert "INCONCLUSIVE" not in text
    assert (
        "acceptance rate: 0.0 -> 0.0 % (no percentage of the original; judged by its standard "
        "errors in %: within)" in text
    )
