"""AIPerf 0.10 exports: profile_export_aiperf.json (schema 1.3) and the CSV (CRLF, three
tables), read with their real values; the two agree."""

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
from kit.recipe.patterns import ConcurrencyLoad
from kit.recipe.traffic import RandomDataset

# what kit says of a file it cannot import (kit.errors.BadInputError's hint)
BAD_INPUT_HINT = f"hint: {BadInputError.default_hint}\n"

Imports = Callable[..., tuple[ImportedRecipe, Recipe]]  # the `imports` fixture
STEM = "v0.10-qwen3.6-nvfp4-rtx5090-agent-c2_profile_export_aiperf"


def test_json_export(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "aiperf" / f"{STEM}.json")
    imp = done.imported
    assert (imp.tool, imp.tool_version) == ("aiperf", "0.10.0")
    assert imp.layout == "profile_export_aiperf.json, schema_version 1.3"
    assert imp.model == "qwen3.6-nvfp4"  # the served name; the hub id is the tokenizer's
    assert imp.hub_repo == "nvidia/Qwen3.6-35B-A3B-NVFP4"
    assert imp.workload.backend_url == "http://localhost:8000"
    assert imp.workload.dataset == "multi_turn file nvfp4_agent.jsonl (96 entries)"
    (point,) = imp.points
    assert point.label == "concurrency-2"
    assert point.load is not None
    assert (point.load.requests, point.load.warmup_requests) == (96, 16)
    f = point.figures
    assert (f.completed, f.failed) == (96, 0)
    assert f.output_tps == 324.31424631925347
    assert f.total_tps == 2454.2643011558785
    assert f.request_throughput == 0.7460502167796494
    assert f.duration_s == 128.677665177
    assert f.ttft_ms is not None and f.ttft_ms.p99 == 292.49688644999986
    assert f.ttft_ms.median == 136.4860965  # AIPerf's p50
    # AIPerf's inter_token_latency is kit's TPOT, its inter_chunk_latency kit's ITL
    assert f.tpot_ms is not None and f.tpot_ms.mean == 5.670039629867334
    assert f.itl_ms is not None and f.itl_ms.mean == 5.69182754358604
    assert f.e2e_ms is not None and f.e2e_ms.p99 == 10438.077710599999
    assert (
        "96 of 96 requests did not produce the output length the dataset asked for (by -78.8 % "
        "on average): the model stopped early"
    ) in imp.warnings
    load = recipe.bench.load
    assert isinstance(load, ConcurrencyLoad)
    assert (load.levels, load.requests, load.warmup_requests) == ([2], 96, 16)
    assert isinstance(recipe.bench.dataset, RandomDataset)
    assert (recipe.bench.dataset.input_tokens, recipe.bench.dataset.output_tokens) == (2855, 435)
    assert recipe.server.max_model_len == 4096  # raised from cpu-tiny's 2048 for 2855 + 435
    assert recipe.model.source == "hub" and recipe.model.repo_id == "nvidia/Qwen3.6-35B-A3B-NVFP4"


def test_csv_export(foreign: Path, imports: Imports) -> None:
    path = foreign / "aiperf" / f"{STEM}.csv"
    assert path.read_bytes().count(b"\r\n") == path.read_bytes().count(b"\n")  # CRLF kept
    done, recipe = imports(path)
    imp = done.imported
    assert (imp.layout, imp.tool_version, imp.model) == ("profile_export_aiperf.csv", None, None)
    (point,) = imp.points
    assert (point.label, point.load) == ("point-1", None)
    f = point.figures
    assert (f.completed, f.output_tps, f.request_throughput) == (96, 324.31, 0.75)
    assert f.ttft_ms is not None and (f.ttft_ms.mean, f.ttft_ms.p99) == (154.26, 292.5)
    assert f.itl_ms is not None and f.itl_ms.median == 5.42
    assert any(p.field == "bench.load" for p in imp.open_pins)
    assert recipe.bench.load is None  # nothing to run: the reference is the figures
    assert recipe.reference is not None and recipe.reference.points["point-1"].total_tps == 2454.26


def test_json_and_csv_agree(foreign: Path) -> None:
    (j,) = read_file(foreign / "aiperf" / f"{STEM}.json").points
    (c,) = read_file(foreign / "aiperf" / f"{STEM}.csv").points
    for name in ("output_tps", "total_tps", "duration_s"):
        assert getattr(c.figures, name) == pytest.approx(getattr(j.figures, name), abs=0.005)
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        jf, cf = getattr(j.figures, name), getattr(c.figures, name)
        for stat in ("mean", "median", "p90", "p99"):
            assert getattr(cf, stat) == pytest.approx(getattr(jf, stat), abs=0.005)


def test_newer_schema_refused(foreign: Path, tmp_path: Path) -> None:
    data = json.loads((foreign / "aiperf" / f"{STEM}.json").read_text())
    data["schema_version"] = "2.0"
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(data))
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (
        "error: profile_export_aiperf.json: AIPerf schema_version 2.0: kit reads schema 1.x "
        "(AIPerf 0.x profile_export_aiperf.json)\n" + BAD_INPUT_HINT
    )


def test_time_bounded_run(foreign: Path, imports: Imports) -> None:
    """AIPerf 0.11, --benchmark-duration 300: no request count; 2044 completed in it."""
    done, recipe = imports(
        foreign / "aiperf" / "v0.11-qwen3-4b-c16-time-bounded_profile_export_aiperf.json"
    )
    imp = done.imported
    (point,) = imp.points
    assert point.load is not None
    assert (point.load.requests, point.load.duration_s) == (None, 300.0)
    assert point.figures.completed == 2044
    assert imp.warnings == [
        "concurrency-16: a time-bounded run (the profiling phase ran 300 s, "
        "--benchmark-duration), not a request count: 2044 requests completed in it, and kit's "
        "point sends that many"
    ]
    assert (
        "#   - bench.load.requests at concurrency-16: 2044, the requests that completed in the "
        "file's 300\n#     s (it bounded the point by time, kit bounds it by a count)"
    ) in done.recipe
    assert isinstance(recipe.bench.load, ConcurrencyLoad) and recipe.bench.load.requests == 2044


def test_sweep_aggregate_csv(foreign: Path, imports: Imports) -> None:
    """profile_export_aiperf_sweep.csv: 12 concurrency points in one recipe, means only."""
    done, recipe = imports(
        foreign / "aiperf" / "v0.11-qwen3-4b-c16-768_profile_export_aiperf_sweep.csv"
    )
    imp = done.imported
    assert imp.layout == "profile_export_aiperf_sweep.csv (sweep aggregate)"
    assert [p.label for p in imp.points][:3] == [
        "concurrency-16",
        "concurrency-32",
        "concurrency-64",
    ]
    assert len(imp.points) == 12
    f = imp.points[0].figures
    assert (f.completed, f.output_tps, f.request_throughput, f.duration_s) == (
        2044,
        1792.23,
        6.81,
        299.94,
    )
    assert f.ttft_ms is not None and (f.ttft_ms.mean, f.ttft_ms.median) == (28.74, None)
    assert f.tpot_ms is not None and f.tpot_ms.mean == 8.78  # inter_token_latency
    assert f.itl_ms is not None and f.itl_ms.mean == 8.85  # inter_chunk_latency
    last = imp.points[-1]
    assert last.label == "concurrency-768" and last.figures.completed == 5097
    assert (
        "every point ran about 300 s with a different request count: a time-bounded sweep (the "
        "file does not state the bound); kit's points send a count of requests "
        "(bench.load.requests)"
    ) in imp.warnings
    load = recipe.bench.load
    assert isinstance(load, ConcurrencyLoad) and load.levels[0] == 16 and len(load.levels) == 12
    assert recipe.reference is not None and len(recipe.reference.points) == 12
