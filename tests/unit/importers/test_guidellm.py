"""guidellm reports: metadata.version 1 (0.5, with request records) and 2 (0.8, a mock
server), read with their real values; other versions refused with the reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.importers import ImportedRecipe
from kit.recipe import Recipe
from kit.recipe.patterns import ConcurrencyLoad, RateLoad
from kit.recipe.traffic import RandomDataset

Imports = Callable[..., tuple[ImportedRecipe, Recipe]]  # the `imports` fixture


def test_v1_concurrent_4_with_request_records(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "guidellm" / "v0.5dev-qwen3-4b-sanity-c4.json")
    imp = done.imported
    assert (imp.tool, imp.tool_version) == ("guidellm", "0.5.0.dev0")
    assert imp.layout == "benchmarks report, metadata.version 1"
    assert imp.hub_repo == "Qwen/Qwen3-4B-Thinking-2507"
    assert imp.workload.backend_url == "http://0.0.0.0:8000"
    assert imp.workload.endpoint == "/v1/completions"
    assert imp.workload.dataset == "aime_2024_v2.jsonl"  # the file's name, not /root/...
    assert imp.workload.ignore_eos is True and imp.workload.output_tokens == 1024
    (point,) = imp.points
    assert point.label == "concurrency-4"
    assert point.load is not None and point.load.requests == 4
    f = point.figures
    assert (f.requests, f.completed, f.failed) == (4, 4, 0)
    assert f.output_tps == 165.59511945248636
    assert f.duration_s == 24.909644603729248
    assert f.ttft_ms is not None and f.ttft_ms.p99 == 172.63293266296387
    # guidellm's inter_token_latency is kit's TPOT; its time_per_output_token has no kit name
    assert f.tpot_ms is not None and f.tpot_ms.mean == 24.17877651496134
    assert f.itl_ms is None
    tpot_e2e = next(iter(point.other.values()))
    assert tpot_e2e.mean == 24.32290418073535
    assert f.e2e_ms is not None and f.e2e_ms.mean == pytest.approx(24908.65981578827)
    assert point.per_request is not None and point.per_request.count == 4
    assert isinstance(recipe.bench.load, ConcurrencyLoad) and recipe.bench.load.levels == [4]
    assert isinstance(recipe.bench.dataset, RandomDataset)
    assert recipe.bench.dataset.output_tokens == 1024 and recipe.bench.dataset.ignore_eos
    assert recipe.bench.dataset.input_tokens == 99  # prompt_token_count mean
    assert recipe.server.max_model_len == 2048  # 99 + 1024 fits cpu-tiny's


def test_v1_synchronous_records_beyond_the_counted_ones(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "guidellm" / "v0.5dev-gpt-oss-20b-tp4.json")
    imp = done.imported
    (point,) = imp.points
    assert point.label == "concurrency-1"  # synchronous
    assert point.load is not None and point.load.requests == 30  # max_requests
    assert (point.figures.completed, point.figures.requests) == (25, 25)
    assert point.figures.output_tps == 33.417378943280085
    assert point.figures.ttft_ms is not None and point.figures.ttft_ms.p99 == 60.7762336730957
    assert point.per_request is not None and point.per_request.count == 30
    assert point.per_request.ttft_ms is not None and point.per_request.ttft_ms.max == pytest.approx(
        173.8572120666504
    )
    assert imp.warnings == [
        "concurrency-1: 30 request records, 25 counted in the figures (guidellm leaves its "
        "warm-up and cool-down out)"
    ]
    assert isinstance(recipe.bench.load, ConcurrencyLoad) and recipe.bench.load.requests == 30


def test_v2_constant_rates_on_a_mock_server(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "guidellm" / "v0.8dev-schema-v2-mockserver-llmd-fixture.json")
    imp = done.imported
    assert (imp.tool_version, imp.layout) == (
        "0.8.0.dev18",
        "benchmarks report, metadata.version 2",
    )
    assert [p.label for p in imp.points] == ["rate-2", "rate-4"]
    assert [p.figures.output_tps for p in imp.points] == [3.1950675815128577, 6.377131566888984]
    assert [p.figures.request_throughput for p in imp.points] == [
        0.39843430656414264,
        0.7940882013937378,
    ]
    assert imp.points[0].figures.ttft_ms is not None
    assert imp.points[0].figures.ttft_ms.p99 == 11.686325073242188
    assert all(p.per_request is None for p in imp.points)  # request lists are empty
    assert imp.workload.random and (imp.workload.input_tokens, imp.workload.output_tokens) == (
        32,
        8,
    )
    assert imp.hub_repo is None
    assert (
        "the backend looks like a mock server (model 'e2e-mock-model'): its figures are not from "
        "real inference"
    ) in imp.warnings
    load = recipe.bench.load
    assert isinstance(load, RateLoad)
    assert (load.rates, load.arrival, load.requests) == ([2.0, 4.0], "constant", 2)
    assert load.max_concurrency is None  # guidellm's own cap of 10240 is not the run's
    assert recipe.reference is not None and set(recipe.reference.points) == {"rate-2", "rate-4"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["metadata"].update(version=3),
            "guidellm report metadata.version 3: kit reads versions 1 and 2",
        ),
        (
            lambda d: d.pop("metadata"),
            "a guidellm report with neither metadata.version (guidellm 0.4 on) nor the 0.2-0.3 "
            "layout (benchmarks with args and run_stats)",
        ),
    ],
)
def test_other_versions_refused(
    foreign: Path, tmp_path: Path, change: Callable[[dict[str, object]], object], message: str
) -> None:
    data = json.loads((foreign / "guidellm" / "v0.5dev-qwen3-4b-sanity-c4.json").read_text())
    change(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    res = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "r.yaml")])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == f"error: report.json: {message}"
    assert not (tmp_path / "r.yaml").exists()


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_v03_report(foreign: Path, imports: Imports, suffix: str) -> None:
    """guidellm 0.3's own test asset (a stripped real run), as JSON and as YAML: benchmarks
    with args, run_stats, worker and request_loader, no metadata."""
    done, recipe = imports(foreign / "guidellm" / f"v0.3-benchmarks_stripped.{suffix}")
    imp = done.imported
    assert imp.layout == f"benchmarks report, guidellm 0.2-0.3 layout ({suffix.upper()})"
    assert imp.model == "example_model" and imp.hub_repo is None
    assert imp.workload.random and (imp.workload.input_tokens, imp.workload.output_tokens) == (
        256,
        128,
    )
    (point,) = imp.points
    assert point.label == "concurrency-1"  # the synchronous strategy
    f = point.figures
    assert (f.requests, f.completed, f.failed) == (47, 46, 0)
    assert f.output_tps == 198.13346751788123
    assert f.ttft_ms is not None and f.ttft_ms.p99 == 21.281957626342773
    assert f.tpot_ms is not None and f.tpot_ms.mean == 4.941609043733832  # its inter_token_latency
    assert imp.warnings == [
        "concurrency-1: 1 request records, 47 counted in the figures (the report keeps only a "
        "sample of the records; its figures are over all of them)",
        "concurrency-1: a time-bounded benchmark (max_duration 30 s, no request count): 47 "
        "requests were counted in it, and kit's point sends that many",
        "concurrency-1: 1 request(s) still running at the end (incomplete) are in the total, not "
        "in the figures",
    ]
    assert imp.notes == ["profile: a sweep of 10 strategies; the file holds 1 benchmark(s)"]
    assert isinstance(recipe.bench.dataset, RandomDataset)
    assert recipe.bench.dataset.input_tokens == 256
