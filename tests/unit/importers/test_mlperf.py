"""MLPerf Inference v4.1 LoadGen summaries (llama2-70b-99): scenario, throughput, latencies
from ns, reference-only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import BadInputError
from kit.importers import ImportedRecipe, read_file
from kit.recipe import Recipe
from kit.recipe.patterns import RateLoad

# what kit says of a file it cannot import (kit.errors.BadInputError's hint)
BAD_INPUT_HINT = f"hint: {BadInputError.default_hint}\n"

Imports = Callable[..., tuple[ImportedRecipe, Recipe]]  # the `imports` fixture
NVIDIA = "v4.1-nvidia-dgx-h100x8-llama2-70b-99"


def test_server_scenario(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "mlperf" / f"{NVIDIA}-server_mlperf_log_summary.txt")
    imp = done.imported
    assert (imp.tool, imp.layout) == ("mlperf loadgen", "mlperf_log_summary.txt, Server scenario")
    assert imp.reference_only is not None and imp.model is None
    (point,) = imp.points
    assert point.label == "rate-75"  # target_qps
    assert point.load is not None and point.load.arrival == "poisson"
    assert point.load.requests == 180000  # 75 qps for min_duration 2400 s
    f = point.figures
    assert (f.request_throughput, f.output_tps) == (74.42, 21605.79)
    assert f.ttft_ms is not None
    assert f.ttft_ms.mean == pytest.approx(275.926440)  # 275926440 ns
    assert f.ttft_ms.p99 == pytest.approx(461.278089)
    assert f.tpot_ms is not None and f.tpot_ms.median == pytest.approx(156.419276)
    assert f.e2e_ms is not None and f.e2e_ms.p90 == pytest.approx(81390.733301)
    assert "LoadGen constraint ttft_latency: 2000 ms (p99)" in imp.notes
    assert isinstance(recipe.bench.load, RateLoad) and recipe.bench.load.rates == [75.0]
    assert "Reference-only: an MLPerf LoadGen run" in done.recipe


def test_offline_scenario(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "mlperf" / f"{NVIDIA}-offline_mlperf_log_summary.txt")
    (point,) = done.imported.points
    assert (point.label, point.load) == ("offline", None)
    f = point.figures
    assert (f.request_throughput, f.output_tps) == (84.4792, 24524.9)
    assert f.ttft_ms is None  # the Offline summary has no first-token figures
    assert f.e2e_ms is not None and f.e2e_ms.median == pytest.approx(1319288.278637)
    assert recipe.bench.load is None
    assert recipe.reference is not None and recipe.reference.points["offline"].output_tps == 24524.9


def test_amd_server(foreign: Path) -> None:
    imp = read_file(
        foreign / "mlperf" / "v4.1-amd-8xmi300x-llama2-70b-99-server_mlperf_log_summary.txt"
    )
    (point,) = imp.points
    assert point.label == "rate-73.5"
    assert (point.figures.request_throughput, point.figures.output_tps) == (71.74, 21028.23)
    assert point.figures.ttft_ms is not None
    assert point.figures.ttft_ms.p99 == pytest.approx(1604.171041)
    assert "model: the summary names none (SUT 'PySUT')" in imp.notes


def test_accuracy_summary_refused(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_summary.txt"
    path.write_text(
        "================================================\n"
        "MLPerf Results Summary\n"
        "================================================\n"
        "SUT name : PySUT\nScenario : Server\nMode     : AccuracyOnly\n"
    )
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (
        "error: mlperf_log_summary.txt: an MLPerf AccuracyOnly summary (Mode is not "
        "PerformanceOnly): kit imports the performance runs\n" + BAD_INPUT_HINT
    )


def test_invalid_result_warns(foreign: Path, tmp_path: Path) -> None:
    text = (foreign / "mlperf" / f"{NVIDIA}-server_mlperf_log_summary.txt").read_text()
    path = tmp_path / "mlperf_log_summary.txt"
    path.write_text(text.replace("Result is : VALID", "Result is : INVALID"))
    assert "LoadGen's result is INVALID, not VALID" in read_file(path).warnings


def test_single_stream(foreign: Path, imports: Imports) -> None:
    """SingleStream labels its throughput "QPS w/ loadgen overhead" (kit said it held none)."""
    done, recipe = imports(
        foreign / "mlperf" / "v4.1-nvidia-orin-gptj-99-singlestream_mlperf_log_summary.txt"
    )
    imp = done.imported
    assert imp.layout == "mlperf_log_summary.txt, SingleStream scenario"
    (point,) = imp.points
    assert point.label == "concurrency-1"
    assert point.load is not None and point.load.requests == 13368  # min_query_count
    f = point.figures
    assert (f.request_throughput, f.output_tps) == (0.36, None)  # gptj: no token figures
    assert f.e2e_ms is not None and f.e2e_ms.p90 == pytest.approx(4149.771822)
    assert "LoadGen's QPS w/o loadgen overhead: 0.36 (kit takes the figure with it)" in imp.notes
    assert recipe.reference is not None and recipe.reference.points["concurrency-1"]


def test_interactive_named_as_such(foreign: Path) -> None:
    """v5.0 llama2-70b-interactive: LoadGen's Server scenario under TTFT 450 ms / TPOT 40 ms."""
    imp = read_file(
        foreign
        / "mlperf"
        / "v5.0-nvidia-b200x8-llama2-70b-interactive-99-server_mlperf_log_summary.txt"
    )
    assert imp.layout == (
        "mlperf_log_summary.txt, Server scenario under Interactive latency bounds (TTFT p99 450 "
        "ms, TPOT p99 40 ms: an Interactive benchmark)"
    )
    (point,) = imp.points
    assert point.label == "rate-220"
    assert (point.figures.request_throughput, point.figures.output_tps) == (217.93, 59409.25)
    assert point.figures.tpot_ms is not None
    assert point.figures.tpot_ms.p99 == pytest.approx(39.122504)


def test_summary_without_throughput_is_refused_truly(foreign: Path, tmp_path: Path) -> None:
    """A PerformanceOnly summary whose throughput lines are gone: the message names them."""
    text = foreign / "mlperf" / "v4.1-nvidia-orin-gptj-99-singlestream_mlperf_log_summary.txt"
    path = tmp_path / "mlperf_log_summary.txt"
    path.write_text(
        "".join(line for line in text.read_text().splitlines(keepends=True) if "QPS" not in line)
    )
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        "error: mlperf_log_summary.txt: an MLPerf SingleStream summary without a throughput "
        "line kit reads (Samples per second, Completed samples per second, QPS w/ loadgen "
        "overhead)"
    )
