"""SGLang bench_serving JSONL: `request_rate: Infinity` read and noted, the server's version
and arguments from server_info, random lengths in kit's convention."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kit.importers import ImportedRecipe, read_file
from kit.recipe import Recipe
from kit.recipe.patterns import ConcurrencyLoad, RateLoad
from kit.recipe.traffic import RandomDataset

Imports = Callable[..., tuple[ImportedRecipe, Recipe]]  # the `imports` fixture
INFINITY = "non-standard JSON read: Infinity (request_rate Infinity is an unlimited rate)"


def test_aggregated_c8(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "sglang" / "bench-serving-qwen2.5-3b-agg-c8.jsonl")
    imp = done.imported
    assert imp.tool == "sglang bench_serving"
    assert imp.engine == "SGLang 0.5.5.post3"
    assert imp.hub_repo == "Qwen/Qwen2.5-3B-Instruct"
    assert INFINITY in imp.warnings
    assert imp.reference_only is None
    (point,) = imp.points
    assert point.label == "concurrency-8"
    f = point.figures
    assert (f.completed, f.requests) == (100, 100)
    assert f.output_tps == 1415.8340658528766
    assert f.total_tps == 2823.6496539865216
    assert f.ttft_ms is not None and f.ttft_ms.p99 == 54.572048513218775
    assert f.e2e_ms is not None and f.e2e_ms.median == 330.32854506745934
    assert f.itl_ms is not None and f.itl_ms.p99 == 22.35477853566408
    # SGLang's random 128 at range ratio 0 is uniform in [1, 128]: kit's 64 at 0.984
    assert imp.workload.random
    assert (imp.workload.input_tokens, imp.workload.range_ratio) == (64, 0.984)
    assert not any(p.field == "quantization" for p in imp.open_pins)  # server_info says none
    engine_pin = next(p for p in imp.open_pins if p.field == "server.engine")
    assert engine_pin.reason == "SGLang 0.5.5.post3 served it; kit serves with vLLM"
    assert isinstance(recipe.bench.load, ConcurrencyLoad) and recipe.bench.load.levels == [8]
    assert isinstance(recipe.bench.dataset, RandomDataset)
    assert recipe.bench.dataset.range_ratio == 0.984
    assert recipe.reference is not None and recipe.reference.engine == "SGLang 0.5.5.post3"


def test_disaggregated_c64_is_reference_only(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "sglang" / "bench-serving-qwen2.5-3b-pd-1p2d-c64.jsonl")
    imp = done.imported
    assert imp.reference_only == "prefill/decode disaggregated serving"
    assert imp.engine == "SGLang 0.5.5.post3 / 0.5.6"
    assert "the servers ran different SGLang versions: 0.5.5.post3, 0.5.6" in imp.warnings
    (point,) = imp.points
    assert point.label == "concurrency-64"
    assert point.figures.output_tps == 657.7236502614013
    assert point.figures.ttft_ms is not None and point.figures.ttft_ms.p99 == 5943.553018989041
    assert (imp.workload.input_tokens, imp.workload.output_tokens) == (256, 64)
    assert "# Reference-only: prefill/decode disaggregated serving." in done.recipe
    assert recipe.reference is not None and recipe.reference.notes is not None
    assert "Reference-only: prefill/decode disaggregated serving." in recipe.reference.notes


def test_several_lines_are_several_points(foreign: Path, tmp_path: Path) -> None:
    line = (foreign / "sglang" / "bench-serving-qwen2.5-3b-agg-c8.jsonl").read_text()
    run = json.loads(line)
    run.pop("server_info")
    second = {**run, "request_rate": 4.0, "max_concurrency": None, "output_throughput": 300.5}
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(run) + "\n" + json.dumps(second) + "\n")
    imp = read_file(path)
    assert [p.label for p in imp.points] == ["concurrency-8", "rate-4"]
    assert imp.points[1].load is not None and imp.points[1].load.arrival == "poisson"
    assert imp.points[1].figures.output_tps == 300.5
    assert isinstance(RateLoad.label(4.0), str)


def test_no_drafting_is_stated(foreign: Path) -> None:
    """server_info.speculative_algorithm null: SGLang ran no speculative decoding, a fact (not
    an open pin)."""
    imp = read_file(foreign / "sglang" / "bench-serving-qwen2.5-3b-agg-c8.jsonl")
    assert imp.speculative is not None and imp.speculative.drafting is False
    assert "speculative" not in {p.field for p in imp.open_pins}
