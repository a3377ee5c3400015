"""kit.report.points: a run's load points judged label by label against a reference imported
from another tool's result file (`kit import`).

The run is the committed H200 concurrency sweep (tests/fixtures/results/h200-llama8b-bf16-
sweep-2026-12-03/); the reference is the `vllm bench serve` results saved beside it, at the same
seven points on the same server, gathered into one sweep summary.json and run through
`kit import` (with the run's own recipe as the base). The run's figures against vLLM's are then
the ones kit's own peer check recorded in the report, which the deltas are checked against.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from factories import load_record

from kit.bench.load import summarize_point
from kit.cli import main
from kit.errors import EXIT_DIFFERENT, EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_OK
from kit.importers import import_file
from kit.noise import quantile_interval
from kit.recipe import Reference, load_recipe
from kit.report.files import read_report
from kit.report.points import PointsVerdict, compare_points
from kit.report.reference import compare_with_reference
from kit.report.schema import Report
from kit.report.show import comparison_text
from kit.report.verdict import verdict_exit
from kit.signing import load_public_key

LEVELS = [1, 2, 4, 8, 16, 32, 64]


@pytest.fixture(scope="module")
def run(fixtures_dir: Path) -> Path:
    """The sweep's folder: report.json and vllm-bench-concurrency-N.json."""
    return fixtures_dir / "results" / "h200-llama8b-bf16-sweep-2026-12-03"


@pytest.fixture(scope="module")
def key(fixtures_dir: Path) -> Path:
    return fixtures_dir / "examples" / "keys" / "h200-2026-12-02-dflash2.pub"


@pytest.fixture(scope="module")
def sweep(run: Path, key: Path) -> Report:
    report, check = read_report(run / "report.json", load_public_key(key))
    assert check.valid and report.vllm_bench is not None
    return report


@pytest.fixture
def base(sweep: Report, tmp_path: Path) -> Path:
    """The run's own recipe as a file: the import's base, so model and quantization match."""
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(sweep.recipe, sort_keys=False))
    return path


def vllm_runs(run: Path, levels: list[int] = LEVELS) -> list[dict[str, Any]]:
    return [json.loads((run / f"vllm-bench-concurrency-{n}.json").read_text()) for n in levels]


def imported(runs: list[dict[str, Any]], base: Path, tmp_path: Path) -> Path:
    """``runs`` as one `vllm bench sweep` summary.json, imported into a recipe."""
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(runs))
    out = tmp_path / "imported.yaml"
    import_file(summary, base=base, out=out)
    return out


def judged(report: Report, recipe: Path) -> PointsVerdict:
    # the import's stand-in dataset and cooldown are not the run's: forced, and said so
    result = compare_with_reference(report, recipe, force=True)
    assert result.forced and [d.aspect for d in result.differences] == ["protocol"]
    assert result.points is not None
    return result.points


def test_every_point_against_vllms_own_results(
    sweep: Report, base: Path, tmp_path: Path, run: Path
) -> None:
    points = judged(sweep, imported(vllm_runs(run), base, tmp_path))
    assert [p.label for p in points.points] == [f"concurrency-{n}" for n in LEVELS]
    assert points.only_reference == points.only_run == []
    assert points.definitions == [
        "TTFT compared with kit's first_chunk_ms: vLLM: to the first streamed chunk with "
        "choices, text or not (kit's first_chunk_ms); kit's ttft_ms ends at the first chunk "
        "with text"
    ]
    # the deltas are the ones kit's peer check recorded when it ran vLLM beside itself
    assert sweep.vllm_bench is not None
    names = {
        "output tok/s": "output tok/s",
        "TTFT p50": "TTFT p50",
        "TPOT p50": "TPOT p50",
        "ITL p50": "ITL p50",
        "TTFT p99": "TTFT p99",
        "TPOT p99": "TPOT p99",
    }
    for peer, check in zip(sweep.vllm_bench.points, points.points, strict=True):
        mine = {m.metric: m for m in check.figures}
        for figure in peer.figures:
            assert mine[names[figure.figure]].delta_pct == pytest.approx(figure.delta_pct)
    by_label = {p.label: p for p in points.points}
    # a point within: every headline figure inside the floor
    c8 = by_label["concurrency-8"]
    assert c8.verdict == "REPRODUCED" and c8.not_comparable == []
    bench = sweep.bench
    assert bench is not None
    tps = c8.figures[0]
    assert (tps.metric, tps.headline, tps.status, tps.band_from) == (
        "output tok/s",
        True,
        "within",
        "floor",  # one reading a point: no interval, the floor holds
    )
    assert tps.band_pct == pytest.approx(3.0)  # and the published figure's rounding
    assert tps.a == vllm_runs(run, [8])[0]["output_throughput"]
    assert tps.b == next(p.output_tps for p in bench.load_points if p.level == 8)
    # a point that differs: kit's first chunks came 5.2 % sooner than vLLM's TTFT at c4
    c4 = by_label["concurrency-4"]
    assert c4.verdict == "DIFFERENT"
    assert c4.summary == "DIFFERENT: TTFT p50 -5.2 % (lower, better; band ±3.2 %)"
    ttft = next(m for m in c4.figures if m.metric == "TTFT p50")
    assert (ttft.direction, ttft.better, ttft.band_from) == ("lower", True, "intervals")
    # its band by hand: the order statistics of the point's 80 first chunks bounding the median
    records = [
        r.first_chunk_s * 1000
        for r in bench.records
        if r.prompt == "concurrency-4" and r.phase == "load" and r.error is None
        and r.first_chunk_s is not None
    ]  # fmt: skip
    ordered = sorted(records)
    spread = 1.959963984540054 * math.sqrt(80 * 0.25)
    low, high = ordered[math.floor(40 - spread) - 1], ordered[math.ceil(40 + spread) - 1]
    assert quantile_interval(ordered, 0.5) == (low, high)
    assert ttft.band_pct == pytest.approx(
        (high - low) / 2 / statistics.median(records) * 100, rel=1e-6
    )
    # a p99 over 80 requests cannot be bounded: shown, not judged
    p99 = next(m for m in c4.figures if m.metric == "TTFT p99")
    assert (p99.status, p99.band_pct) == ("inconclusive", None)
    c16 = by_label["concurrency-16"]
    # its TTFT median lies outside a latency's band (its intervals may reach ±35 %: kit.figures)
    assert c16.summary == (
        "DIFFERENT: TTFT p50 -16.0 % (lower, better; band ±14.6 %); TPOT p50 +8.3 % (higher, "
        "worse; band ±6.2 %)"
    )
    assert points.verdict == "DIFFERENT"
    assert points.summary == (
        "DIFFERENT: 3 of 7 points outside their bands (concurrency-1, concurrency-4, "
        "concurrency-16)"
    )
    assert points.worse and verdict_exit(points) == EXIT_DIFFERENT


def test_a_point_changed_one_dropped_one_added(
    sweep: Report, base: Path, tmp_path: Path, run: Path, key: Path
) -> None:
    runs = vllm_runs(run, [2, 8, 32])  # three points the run and vLLM agree on
    runs[1] = {**runs[1], "output_throughput": runs[1]["output_throughput"] * 1.10}
    runs.append({**runs[2], "max_concurrency": 128})  # a point the run never measured
    recipe = imported(runs, base, tmp_path)
    points = judged(sweep, recipe)
    assert [(p.label, p.verdict) for p in points.points] == [
        ("concurrency-2", "REPRODUCED"),
        ("concurrency-8", "DIFFERENT"),
        ("concurrency-32", "REPRODUCED"),
    ]
    c8 = points.points[1]
    assert c8.summary == "DIFFERENT: output tok/s -8.7 % (lower, worse; band ±3.0 %)"
    assert points.only_reference == ["concurrency-128"]
    assert points.only_run == ["concurrency-1", "concurrency-4", "concurrency-16", "concurrency-64"]
    assert points.summary == (
        "DIFFERENT: 1 of 3 points outside their bands (concurrency-8); 1 not measured "
        "(concurrency-128)"
    )
    text = points.text()
    assert (
        " *output tok/s         1,246.7    1,138.8     -8.7      3.0  OUTSIDE (lower, worse)"
        in text
    )
    assert "concurrency-128: in the reference only, not measured by this run" in text
    assert "concurrency-64: in this run only" in text
    assert text.endswith("verdict per point: " + points.summary)
    # the CLI prints it after the comparison and exits by it
    args = ["report", "compare", str(run / "report.json"), "--reference", str(recipe)]
    args += ["--force", "--key", str(key)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == EXIT_DIFFERENT, out.output
    assert out.stdout.endswith(text + "\n")
    never = CliRunner().invoke(main, [*args, "--fail-on", "never"])
    assert never.exit_code == EXIT_OK


def test_only_a_faster_point_exits_4_unless_fail_on_worse(
    sweep: Report, base: Path, tmp_path: Path, run: Path
) -> None:
    runs = vllm_runs(run, [8])
    runs[0] = {**runs[0], "output_throughput": runs[0]["output_throughput"] * 0.9}
    points = judged(sweep, imported(runs, base, tmp_path))
    assert points.summary == "DIFFERENT: 1 of 1 points outside their bands (concurrency-8)"
    assert points.points[0].figures[0].better is True and not points.worse
    assert verdict_exit(points) == EXIT_DIFFERENT and verdict_exit(points, "worse") == EXIT_OK


def test_vllms_ttft_is_not_comparable_without_kits_first_chunk(
    sweep: Report, base: Path, tmp_path: Path, run: Path
) -> None:
    assert sweep.bench is not None
    older = [p.model_copy(update={"first_chunk_ms": None}) for p in sweep.bench.load_points]
    report = sweep.model_copy(
        update={"bench": sweep.bench.model_copy(update={"load_points": older})}
    )
    points = judged(report, imported(vllm_runs(run, [8]), base, tmp_path))
    (c8,) = points.points
    assert c8.not_comparable == [
        "TTFT: vLLM: to the first streamed chunk with choices, text or not (kit's "
        "first_chunk_ms); kit's ttft_ms ends at the first chunk with text; this run's points "
        "have no first_chunk_ms (written before kit kept it)"
    ]
    assert not any(m.metric.startswith("TTFT") for m in c8.figures)
    # output tok/s, req/s and the TPOT, ITL and E2E medians (docs/figures.md)
    assert c8.summary == "REPRODUCED: 5 headline figures within their bands (at most ±3.7 %)"
    assert "  NOT COMPARABLE: TTFT: vLLM: to the first" in points.text()


def test_an_incomplete_run_is_inconclusive(
    sweep: Report, base: Path, tmp_path: Path, run: Path
) -> None:
    report = sweep.model_copy(update={"status": "incomplete", "incomplete_reason": "stopped"})
    points = judged(report, imported(vllm_runs(run, [2, 8]), base, tmp_path))
    assert points.verdict == "INCONCLUSIVE"
    assert points.summary == (
        "INCONCLUSIVE: 2 of 2 points cannot be judged (concurrency-2, concurrency-8): this run "
        "is incomplete: stopped"
    )
    assert all(m.status != "within" for p in points.points for m in p.figures)
    assert verdict_exit(points) == EXIT_INCONCLUSIVE


def test_no_point_in_common_is_not_comparable(sweep: Report, fixtures_dir: Path) -> None:
    # AIPerf's CSV states no load: its one point is point-1, which no run has
    csv = "v0.10-qwen3.6-nvfp4-rtx5090-agent-c2_profile_export_aiperf.csv"
    done = import_file(
        fixtures_dir / "foreign" / "aiperf" / csv,
        base=fixtures_dir / "recipes" / "cpu-tiny.yaml",
    )
    reference = yaml.safe_load(done.recipe)["reference"]
    points = compare_points(sweep, Reference.model_validate(reference))
    assert points.verdict == "NOT COMPARABLE" and points.points == []
    assert points.summary == (
        "NOT COMPARABLE: no point of this run has a label of the reference's (reference: "
        "point-1; this run: " + ", ".join(f"concurrency-{n}" for n in LEVELS) + ")"
    )
    assert verdict_exit(points) == EXIT_FAILED


# ---------------------------------------------------------------------------------------------
# a tool whose figures kit defines otherwise: LLMPerf


def with_point(report: Report, label: str, n: int, ttft: float, wall: float) -> Report:
    """``report`` with one more load point, ``label``, of ``n`` requests: 150 tokens each,
    TTFT ``ttft`` + k ms, ``wall`` s, text chunks every 10 ms after the first."""
    records = []
    for k in range(n):
        first = ttft + k / 1000
        chunks = [first + i * 0.01 for i in range(150)]
        rec = load_record(k * 0.5, first, wall, 150, chunks)
        records.append(rec.model_copy(update={"prompt": label, "index": k, "prompt_tokens": 550}))
    point = summarize_point(label, "concurrency", 5, records, None)
    assert report.bench is not None
    bench = report.bench.model_copy(
        update={"records": [*report.bench.records, *records], "load_points": [point]}
    )
    return report.model_copy(update={"bench": bench})


def test_llmperf_figures_defined_otherwise_are_not_comparable(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    foreign = fixtures_dir / "foreign" / "llmperf"
    out = tmp_path / "llmperf.yaml"
    import_file(
        foreign / "leaderboard-together-7b_summary.json",
        base=fixtures_dir / "recipes" / "cpu-tiny.yaml",
        out=out,
    )
    reference = load_recipe(out).recipe.reference
    assert reference is not None and list(reference.points) == ["concurrency-5"]
    run, _ = read_report(fixtures_dir / "reports" / "cpu-tiny-a.json", allow_unsigned=True)
    points = compare_points(with_point(run, "concurrency-5", 40, 0.50, 2.3), reference)
    assert points.reference_only == "a hosted API (together): its server cannot be rebuilt"
    assert points.definitions == [
        "ITL not comparable: LLMPerf inter_token_latency_s is latency / output tokens (TTFT "
        "included): kept apart, neither kit's TPOT nor its ITL",
        "output tok/s not comparable: LLMPerf counts output tokens with a Llama tokenizer, "
        "whatever the model",
    ]
    (c5,) = points.points
    assert c5.not_comparable == [
        "output tok/s: LLMPerf counts output tokens with a Llama tokenizer, whatever the model"
    ]
    metrics = [m.metric for m in c5.figures]
    assert "output tok/s" not in metrics and not any(m.startswith("ITL") for m in metrics)
    # TTFT is LLMPerf's to the first chunk with text, as kit's: judged, beside the other
    # judged figures the file states alike (docs/figures.md)
    judged = {m.metric: m for m in c5.figures if m.headline}
    ttft = judged["TTFT p50"]
    assert ttft.a == pytest.approx(518.838, abs=1e-3)
    assert ttft.b == pytest.approx(519.5) and ttft.status == "within"
    # the point this test makes has LLMPerf's TTFT, not its request rate: req/s is outside
    assert [m for m, f in judged.items() if f.status == "outside"] == ["req/s"]
    assert c5.summary.startswith("DIFFERENT: req/s +23.6 %")
    assert points.verdict == "DIFFERENT"
    text = comparison_text(
        compare_with_reference(with_point(run, "concurrency-5", 40, 0.50, 2.3), out, force=True)
    )
    assert "reference-only: a hosted API (together): its server cannot be rebuilt" in text
    assert "  NOT COMPARABLE: output tok/s: LLMPerf counts output tokens" in text


def test_open_pins_are_not_compared_as_facts(fixtures_dir: Path, tmp_path: Path) -> None:
    """An FP8 checkpoint's file states no quantization: kit import writes the base recipe's as a
    stand-in and names it an open pin, and compare --reference neither refuses nor describes
    the reference by the stand-in ("unquantized"); it says the pin is open."""
    out = tmp_path / "lambda.yaml"
    foreign = fixtures_dir / "foreign" / "vllm"
    import_file(
        foreign / "lambda-v0.6-llama3.1-8b-fp8-h100-n10-with-per-request.json",
        base=fixtures_dir / "recipes" / "cpu-tiny.yaml",
        out=out,
    )
    reference = load_recipe(out).recipe.reference
    assert reference is not None and "quantization" in reference.open_pins
    run, _ = read_report(fixtures_dir / "reports" / "cpu-tiny-a.json", allow_unsigned=True)
    result = compare_with_reference(run, out, force=True)
    aspects = {d.aspect for d in result.differences}
    assert "quantization" not in aspects
    assert not any("unquantized" in d.detail for d in result.differences)
    [pins] = [w for w in result.warnings if w.startswith("open pins, not compared")]
    assert "quantization: not stated (a quantized checkpoint, or none?)" in pins
