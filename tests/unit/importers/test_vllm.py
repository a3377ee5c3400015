"""vLLM benchmark results: benchmark_serving.py (2024, and vllm-ascend's truncated copies),
`vllm bench serve`, `vllm bench sweep` run files and summary list, read with their real values."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import BadInputError
from kit.importers import ImportedRecipe, read_file
from kit.recipe import Recipe
from kit.recipe.patterns import ConcurrencyLoad, RateLoad
from kit.recipe.traffic import RandomDataset

# what kit says of a file it cannot import (kit.errors.BadInputError's hint)
BAD_INPUT_HINT = f"hint: {BadInputError.default_hint}\n"

Imports = Callable[..., tuple[ImportedRecipe, Recipe]]  # the `imports` fixture


def test_bench_serve_c2(foreign: Path, imports: Imports) -> None:
    path = foreign / "vllm" / "bench-serve-v0.25.1-opt125m-c2-cpu.json"
    done, recipe = imports(path)
    imp = done.imported
    assert (imp.tool, imp.layout) == (
        "vllm bench serve",
        "vllm bench serve --save-result (0.10 on)",
    )
    assert imp.model == imp.hub_repo == "facebook/opt-125m"
    assert imp.date == "2026-08-16T16:08:53"
    (point,) = imp.points
    assert point.label == "concurrency-2"
    assert point.load is not None and (point.load.pattern, point.load.level) == ("concurrency", 2)
    f = point.figures
    assert (f.requests, f.completed, f.failed) == (8, 8, 0)
    assert f.output_tps == 82.89297074037474
    assert f.total_tps == 248.6789122211242
    assert f.request_throughput == 5.180810671273421
    assert f.ttft_ms is not None and f.ttft_ms.p99 == 734.4049174101428
    assert f.ttft_ms.median == 55.68139649994919
    assert f.tpot_ms is not None and f.tpot_ms.mean == 11.265828258331112
    assert f.itl_ms is not None and f.itl_ms.p99 == 29.815922519960626
    assert f.e2e_ms is None  # saved without e2el keys
    assert (point.input_tokens_mean, point.output_tokens_mean) == (32, 16)
    # the recipe: the model from the hub, revision open; concurrency 2 x 8; random 32 / 16
    assert recipe.model.source == "hub" and recipe.model.repo_id == "facebook/opt-125m"
    assert recipe.model.revision is None
    assert isinstance(recipe.bench.load, ConcurrencyLoad)
    assert (recipe.bench.load.levels, recipe.bench.load.requests) == ([2], 8)
    assert isinstance(recipe.bench.dataset, RandomDataset)
    assert (recipe.bench.dataset.input_tokens, recipe.bench.dataset.output_tokens) == (32, 16)
    assert recipe.reference is not None
    assert recipe.reference.points["concurrency-2"].output_tps == 82.89297074037474
    assert recipe.reference.tool == "vllm bench serve"
    # how compare reads vLLM's figures: its TTFT is kit's first chunk, its TPOT and ITL kit's
    defs = recipe.reference.definitions
    assert {k: d.kit for k, d in defs.items()} == {
        "ttft_ms": "first_chunk_ms",
        "tpot_ms": "tpot_ms",
        "itl_ms": "itl_ms",
    }
    assert "#   - model.revision: the file names no model revision" in done.recipe


def test_sweep_run_carries_max_num_seqs(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "vllm" / "sweep-v0.25.1-opt125m-mns4-c2-run0.json")
    imp = done.imported
    assert (imp.tool, imp.layout) == ("vllm bench sweep", "vllm bench sweep run file")
    (point,) = imp.points
    assert point.run == 0
    assert point.figures.output_tps == 93.74767963046673
    assert point.figures.e2e_ms is not None and point.figures.e2e_ms.p99 == 876.8009717071254
    assert imp.server_args == ["--max-num-seqs", "4"]
    assert recipe.server.extra_args == ["--max-num-seqs", "4"]


def test_sweep_summary_two_runs_of_one_point(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "vllm" / "sweep-v0.25.1-opt125m-mns4-c2-summary.json")
    imp = done.imported
    assert imp.layout == "vllm bench sweep summary.json (a list of runs)"
    assert [p.run for p in imp.points] == [0, 1]
    assert [p.figures.output_tps for p in imp.points] == [93.74767963046673, 199.36907134182283]
    assert [p.figures.ttft_ms.p99 for p in imp.points if p.figures.ttft_ms] == [
        762.4942294094944,
        57.58295443694805,
    ]
    assert recipe.reference is not None
    ref = recipe.reference.points["concurrency-2"]
    assert ref.runs == 2
    assert ref.output_tps == pytest.approx((93.74767963046673 + 199.36907134182283) / 2)
    assert ref.completed == 8  # both runs agree
    assert isinstance(recipe.bench.load, ConcurrencyLoad) and recipe.bench.load.levels == [2]


def test_lambda_2024_per_request_arrays(foreign: Path, imports: Imports) -> None:
    path = foreign / "vllm" / "lambda-v0.6-llama3.1-8b-fp8-h100-n10-with-per-request.json"
    done, recipe = imports(path)
    imp = done.imported
    assert imp.layout == "benchmarks/benchmark_serving.py --save-result (2024)"
    assert imp.hub_repo == "neuralmagic/Meta-Llama-3.1-8B-FP8"
    (point,) = imp.points
    # rate inf, no max_concurrency: all 10 at once
    assert point.load is not None and point.load.level == 10 and point.load.requests == 10
    f = point.figures
    assert (f.completed, f.failed) == (10, 0)  # no `failed` key: num_prompts - completed
    assert f.output_tps == 413.89429359863317
    assert f.total_tps == pytest.approx(1281.9486152410154 + 413.89429359863317)
    assert f.e2e_ms is not None and f.e2e_ms.p99 == 1030.5146967872863  # p99_latency_ms
    pr = point.per_request
    assert pr is not None and (pr.count, pr.failed) == (10, 0)
    assert pr.input_tokens is not None and (pr.input_tokens.min, pr.input_tokens.max) == (4, 399)
    assert pr.output_tokens is not None and pr.output_tokens.mean == pytest.approx(44.2)
    assert pr.ttft_ms is not None and pr.ttft_ms.mean == pytest.approx(44.16175780061167)
    assert imp.warnings == [
        # Lambda's v0.6 server scheduled 10 steps at a time: its itls hold a gap per ~10 tokens
        "concurrency-10: ITL is per chunk, not per token: mean ITL 50.3 ms against TPOT 6.02 "
        "ms, the per-request gaps hold 9.7 tokens each (speculative decoding or multi-step "
        "scheduling streams several at once); compare it only with a run whose chunks carry as "
        "many",
        "3 of 10 requests have 0 output tokens and TTFT 0.0 with no error: vLLM counted them "
        "completed, and their TTFT 0.0 is inside its TTFT figures",
    ]
    assert (
        recipe.reference is not None and recipe.reference.points["concurrency-10"].completed == 10
    )


@pytest.mark.parametrize(
    ("name", "label", "p99_ttft"),
    [
        ("ascend-llama3-8b-tp1-qps1-partial.json", "rate-1", 165.47399744391114),
        (
            "ascend-llama3-8b-tp1-sharegpt-qpsinf-partial.json",
            "concurrency-200",
            13925.454098824412,
        ),
    ],
)
def test_ascend_truncated_imports_with_a_warning(
    foreign: Path, imports: Imports, name: str, label: str, p99_ttft: float
) -> None:
    done, recipe = imports(foreign / "vllm" / name)
    imp = done.imported
    assert imp.layout == "benchmark_serving.py, truncated (latencies only)"
    assert (
        "truncated schema: only TTFT, TPOT and ITL statistics, no duration, request counts or "
        "throughput"
    ) in imp.warnings
    (point,) = imp.points
    assert point.label == label
    assert point.figures.output_tps is None and point.figures.completed is None
    assert point.figures.ttft_ms is not None and point.figures.ttft_ms.p99 == p99_ttft
    assert imp.hub_repo is None  # a local path: the model stays open
    assert any(p.field == "model.repo_id" for p in imp.open_pins)
    assert recipe.model.source == "synthetic"  # the base's
    assert recipe.bench.dataset is None  # no lengths stated
    assert "/root" not in done.recipe  # the machine's paths stay out of the recipe
    if label == "rate-1":
        assert isinstance(recipe.bench.load, RateLoad) and recipe.bench.load.rates == [1.0]
        assert recipe.bench.load.requests == 200


def test_all_failed_exits_2_and_writes_nothing(foreign: Path, tmp_path: Path) -> None:
    path = foreign / "vllm" / "bench-serve-v0.25.1-all-failed.json"
    out = tmp_path / "out.yaml"
    res = CliRunner().invoke(main, ["import", str(path), "-o", str(out)])
    assert res.exit_code == 2
    assert res.stderr == (
        f"error: {path}: all 8 requests failed: nothing to reproduce\n"
        "hint: import a run whose requests completed\n"
    )
    assert not out.exists()
    with pytest.raises(BadInputError, match="all 8 requests failed"):
        read_file(path)


def test_kit_own_vllm_bench_result_reads(fixtures_dir: Path) -> None:
    """vLLM 0.26 with --save-detailed, as kit/vllm_bench/ saved it on an H200."""
    path = fixtures_dir / "vllm-bench" / "h200-tp1-code.json"
    imp = read_file(path)
    (point,) = imp.points
    assert point.label == "concurrency-1"
    assert point.figures.output_tps == 191.80256337289106
    assert point.figures.e2e_ms is not None and point.figures.e2e_ms.p99 == 4181.125187720154
    assert point.per_request is not None and point.per_request.count == 5


def test_a_bad_value_names_the_file_and_key(foreign: Path, tmp_path: Path) -> None:
    data = json.loads((foreign / "vllm" / "bench-serve-v0.25.1-opt125m-c2-cpu.json").read_text())
    data["output_throughput"] = "fast"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (
        'error: bad.json: output_throughput: expected a number, not "fast"\n' + BAD_INPUT_HINT
    )


def test_rust_multi_turn_with_speculative_decoding(foreign: Path, imports: Imports) -> None:
    """vLLM's Rust vllm-bench, multi-turn (no num_prompts or request_rate), with the
    spec_decode_* keys: 747 drafts of 7 tokens, 3357 accepted."""
    done, recipe = imports(
        foreign / "vllm" / "vllm-bench-rust-multiturn-qwen3.8-27b-fp8-spec-c1.json"
    )
    imp = done.imported
    assert (imp.tool, imp.layout) == ("vllm-bench (Rust)", "vllm-bench (Rust) multi-turn result")
    assert imp.hub_repo == "Qwen/Qwen3.8-27B-FP8"
    assert imp.reference_only is not None and imp.reference_only.startswith("a multi-turn run")
    (point,) = imp.points
    assert point.label == "concurrency-1"
    f = point.figures
    assert (f.completed, f.failed) == (8, 0)
    assert f.output_tps == 72.78380802185274
    assert f.itl_ms is not None and f.itl_ms.p99 == 99.77151140000001
    spec = imp.speculative
    assert spec is not None and spec.drafting and spec.method is None
    assert spec.num_speculative_tokens == 7  # seven per-position rates
    assert spec.acceptance is not None
    assert (spec.acceptance.accepted, spec.acceptance.drafted, spec.acceptance.drafts) == (
        3357,
        5229,
        747,
    )
    assert spec.acceptance.accepted_per_position == [645, 559, 500, 462, 429, 395, 367]
    assert spec.acceptance_length == 5.493975903614458
    assert imp.warnings == [
        "concurrency-1: ITL is per chunk, not per token: mean ITL 66.1 ms against TPOT 12.2 ms, "
        "about 5.4 tokens a chunk (speculative decoding or multi-step scheduling streams several "
        "at once); compare it only with a run whose chunks carry as many"
    ]
    assert imp.notes[-1].startswith("per turn, mean prompt tokens and TTFT: turn 0: 587 in, 722 ms")
    pins = {p.field: p.reason for p in imp.open_pins}
    # drafting shown, the method not: never written as none
    assert pins["speculative.method"] == (
        "the file shows drafting (7 tokens a step) but not the method"
    )
    assert pins["quantization"] == (
        "not stated (a quantized checkpoint, or none?); its name suggests FP8 weights"
    )
    ref = recipe.reference
    assert ref is not None and ref.acceptance is not None and ref.acceptance.drafts == 747
    assert ref.open_pins["speculative.method"] == pins["speculative.method"]
    assert ref.open_pins["quantization"] == pins["quantization"]
    # cpu-tiny's synthetic draft cannot serve a hub model: none stands in, said as such
    assert recipe.speculative.method == "none"
    assert "speculative: none stands in (the file shows drafting, and kit cannot write an" in (
        " ".join(line.removeprefix("#").strip() for line in done.recipe.splitlines())
    )


def test_speculative_section_from_the_seed_base(
    foreign: Path, fixtures_dir: Path, imports: Imports
) -> None:
    """Over the seed recipe, its dflash2 draft stands in for the file's unnamed method."""
    _, recipe = imports(
        foreign / "vllm" / "vllm-bench-rust-multiturn-qwen3.8-27b-fp8-spec-c1.json",
        base=fixtures_dir / "recipes" / "club3090-qwen3.8-27b-2x3090-dflash2.yaml",
    )
    assert (recipe.speculative.method, recipe.speculative.num_speculative_tokens) == ("dflash2", 7)
    assert recipe.quantization.method == "none"
