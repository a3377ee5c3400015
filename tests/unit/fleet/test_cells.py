"""kit.fleet: a sweep's cells, rig classes, and the report a Ray job prints in its log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kit.errors import BadInputError
from kit.fleet.cells import expand, rig_class
from kit.fleet.job import report_from_log, report_lines
from kit.fleet.ray_jobs import unplaceable


def test_cells_are_recipes_times_each_combination_times_rigs() -> None:
    cells = expand(
        ("my-recipes/cpu-tiny.yaml",),
        ("bench.prefill=null",),
        ("bench.runs=3", "bench.runs=5", "bench.warmups=1"),
        ("cpu-a", "rig:cpu-b"),
    )
    assert [c.name for c in cells] == [
        "cpu-tiny_runs-3_warmups-1_cpu-a",
        "cpu-tiny_runs-3_warmups-1_cpu-b",
        "cpu-tiny_runs-5_warmups-1_cpu-a",
        "cpu-tiny_runs-5_warmups-1_cpu-b",
    ]
    assert cells[0].sets == ["bench.prefill=null", "bench.runs=3", "bench.warmups=1"]
    assert {c.rig for c in cells} == {"cpu-a", "cpu-b"}  # "rig:" is the resource's prefix
    assert [c.name for c in expand(("a/x.yaml",), (), (), ())] == ["x"]


def test_bad_sweeps_are_refused_before_anything_runs() -> None:
    with pytest.raises(BadInputError, match="expected KEY=VALUE"):
        expand(("r.yaml",), (), ("bench.runs",), ())
    with pytest.raises(BadInputError, match="the value is given twice"):
        expand(("r.yaml",), (), ("bench.runs=3", "bench.runs=3"), ())
    with pytest.raises(BadInputError, match="two cells would share a folder: x"):
        expand(("a/x.yaml", "b/x.yaml"), (), (), ())


def test_rig_classes_name_card_count_model_and_memory() -> None:
    assert rig_class([("NVIDIA H200", 143771)], None) == "1x-nvidia-h200-140g"
    two = [("NVIDIA GeForce RTX 3090", 24576)] * 2
    assert rig_class(two, None) == "2x-nvidia-geforce-rtx-3090-24g"
    assert rig_class([], ["avx2", "avx512f"]) == "cpu-avx512"
    assert rig_class([], ["avx2"]) == "cpu-avx2"


def test_a_report_travels_through_a_job_log_byte_for_byte() -> None:
    data = os.urandom(20_000)
    log = "before\n" + "\n".join(report_lines(data)) + "\nafter\n"
    got, rest = report_from_log(log)
    assert got == data and rest == "before\nafter\n"
    assert report_from_log("no report here\n") == (None, "no report here\n")


def test_a_cell_no_node_can_run_fails_at_once(fixtures_dir: Path) -> None:
    (cell,) = expand((str(fixtures_dir / "recipes" / "cpu-tiny.yaml"),), (), (), ("cpu-x",))
    nodes = [{"CPU": 1.0, "rig:cpu-a": 1.0}, {"CPU": 1.0, "rig:cpu-b": 1.0}]
    assert unplaceable(cell, nodes) == (
        "no node of the cluster offers rig:cpu-x: 1 (rig classes there: rig:cpu-a, rig:cpu-b)"
    )
    assert unplaceable(cell, [*nodes, {"rig:cpu-x": 1.0}]) is None
    assert unplaceable(cell, None) is None  # the dashboard did not say: Ray decides
