"""`kit reproduce` of a recipe imported from another tool's result file (`kit import`) ends with
the run's points judged against the file's, point by point, and exits by that verdict.

The file is a `vllm bench sweep` summary made of the `vllm bench serve` results saved beside the
committed H200 sweep (tests/fixtures/results/h200-llama8b-bf16-sweep-2026-12-03/), one point's
throughput raised by 10 %; the run is that sweep's own report, returned in place of a server
run (the pipeline's stages are not what is tested here: the verdict that follows them is).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kit import pipeline
from kit.cli import main
from kit.errors import EXIT_DIFFERENT, EXIT_OK, BadInputError
from kit.importers import import_file
from kit.recipe import load_recipe
from kit.report.files import read_report
from kit.report.points import compare_points
from kit.report.schema import Report
from kit.reproduce import ReportTrust, ReproduceRequest, reproduce
from kit.signing import load_public_key

RUN = Path("results") / "h200-llama8b-bf16-sweep-2026-12-03"
KEY = Path("examples") / "keys" / "h200-2026-12-02-dflash2.pub"


@pytest.fixture
def sweep(fixtures_dir: Path) -> Report:
    report, check = read_report(
        fixtures_dir / RUN / "report.json", load_public_key(fixtures_dir / KEY)
    )
    assert check.valid
    return report


def imported_recipe(fixtures_dir: Path, sweep: Report, tmp_path: Path) -> Path:
    """vLLM's own results at three of the sweep's points, c8's throughput 10 % higher, as one
    sweep summary imported over the run's own recipe."""
    runs: list[dict[str, Any]] = [
        json.loads((fixtures_dir / RUN / f"vllm-bench-concurrency-{n}.json").read_text())
        for n in (2, 8, 32)
    ]
    runs[1] = {**runs[1], "output_throughput": runs[1]["output_throughput"] * 1.10}
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(runs))
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(sweep.recipe, sort_keys=False))
    out = tmp_path / "imported.yaml"
    import_file(summary, base=base, out=out)
    return out


def test_reproduce_prints_the_verdict_per_point_and_exits_by_it(
    fixtures_dir: Path, sweep: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = imported_recipe(fixtures_dir, sweep, tmp_path)
    where = fixtures_dir / RUN / "report.json"
    monkeypatch.setattr(pipeline, "reproduce", lambda loaded, out_dir, **kwargs: (sweep, where))
    args = ["reproduce", str(recipe), "--no-sign", "-o", str(tmp_path / "reports")]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == EXIT_DIFFERENT, res.output
    reference = load_recipe(recipe).recipe.reference
    assert reference is not None
    verdict = compare_points(sweep, reference)
    assert [(p.label, p.verdict) for p in verdict.points] == [
        ("concurrency-2", "REPRODUCED"),
        ("concurrency-8", "DIFFERENT"),
        ("concurrency-32", "REPRODUCED"),
    ]
    # printed before the run's summary, which ends with the report's path on stdout
    assert verdict.text() + "\n" in res.stderr
    assert res.stderr.index(verdict.text()) < res.stderr.index(f"kit report {sweep.run_id}")
    assert "concurrency-8: DIFFERENT: output tok/s -8.7 % (lower, worse; band ±3.0 %)" in (
        res.stderr
    )
    assert res.stderr.count("verdict per point: DIFFERENT: 1 of 3 points outside") == 1
    assert res.stdout == f"{where}\n"
    # --fail-on relaxes it as it does a re-run's verdict: c8 is slower, so `worse` still exits 4
    assert CliRunner().invoke(main, [*args, "--fail-on", "worse"]).exit_code == EXIT_DIFFERENT
    assert CliRunner().invoke(main, [*args, "--fail-on", "never"]).exit_code == EXIT_OK


def test_a_recipe_without_reference_points_ends_as_before(
    fixtures_dir: Path, sweep: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = tmp_path / "own.yaml"
    recipe.write_text(yaml.safe_dump(sweep.recipe, sort_keys=False))
    where = fixtures_dir / RUN / "report.json"
    monkeypatch.setattr(pipeline, "reproduce", lambda loaded, out_dir, **kwargs: (sweep, where))
    res = CliRunner().invoke(main, ["reproduce", str(recipe), "--no-sign"])
    assert res.exit_code == EXIT_OK, res.output
    assert "verdict per point" not in res.stderr


def test_the_stage_returns_the_report_its_points_and_the_exit_code(
    fixtures_dir: Path, sweep: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = imported_recipe(fixtures_dir, sweep, tmp_path)
    where = fixtures_dir / RUN / "report.json"
    monkeypatch.setattr(pipeline, "reproduce", lambda loaded, out_dir, **kwargs: (sweep, where))
    request = ReproduceRequest(str(recipe), sign=False, out_dir=tmp_path / "reports")
    result = reproduce(request)
    assert (result.report, result.path) == (sweep, where)
    assert result.points is not None and result.verdict == result.points
    assert result.points.verdict == "DIFFERENT" and result.exit_code == EXIT_DIFFERENT
    assert reproduce(replace(request, fail_on="never")).exit_code == EXIT_OK
    # the options of a shared report, with a recipe: refused before any work
    with pytest.raises(BadInputError, match=r"are for kit reproduce REPORT\.json"):
        reproduce(replace(request, trust=ReportTrust(allow_unsigned=True)))
