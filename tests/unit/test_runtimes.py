"""The runtimes, one class each (kit.runtimes): what a report's server.runtime maps to, what each
checks before a run, how it probes the host and where it finds the engine's processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kit.preflight.docker
from kit.preflight import Check
from kit.probe.hostspeed import WitnessPlan
from kit.recipe import load_recipe
from kit.report.schema import ServerInfo
from kit.runtimes import BY_NAME, Compose, External, MultiNode, Native, Place, named, serving

MINE = frozenset(os.sched_getaffinity(0))
FAR = "http://192.0.2.1:8000"  # TEST-NET-1: never this host


def test_every_name_a_report_can_hold_maps_to_one_runtime() -> None:
    names = ServerInfo.model_fields["runtime"].annotation.__args__  # type: ignore[union-attr]
    assert sorted(BY_NAME) == sorted(names)
    assert [type(serving(n)) for n in ("native", "compose", "external")] == [
        Native,
        Compose,
        External,
    ]
    assert isinstance(serving(None), External)  # no server facts yet: nothing is kit's to see
    assert named("kubernetes") is None and named(["native"]) is None  # never written by kit
    assert [r.label for r in BY_NAME.values()] == ["", "", " (external server)"]
    assert [r.knows_engine for r in BY_NAME.values()] == [True, True, False]


def test_a_recipe_with_nodes_runs_on_the_multi_node_runtime(fixtures_dir: Path) -> None:
    two = load_recipe(fixtures_dir / "recipes" / "cpu-tiny-2nodes.yaml").recipe
    one = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml").recipe
    assert isinstance(Native().for_recipe(two), MultiNode)
    assert type(Native().for_recipe(one)) is Native
    assert isinstance(Compose().for_recipe(two), Compose)  # its nodes are containers
    assert MultiNode.name == "native"  # the report says so, and lists the nodes


def test_each_runtime_lists_its_own_preflight_items(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kit.preflight.docker, "engine_info", lambda: (None, "no answer"))
    loaded = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    place = Place(out_dir=tmp_path)

    def names(items: list[Check]) -> list[str]:
        return [c.name for c in items]

    assert names(Native().own_checks(loaded, place)) == ["engine python", "output", "shm"]
    # the image of a CPU recipe is built locally: no pin to check; the image's engine serves
    assert names(Compose().own_checks(loaded, place)) == ["docker", "output"]
    assert names(External().checks(loaded, place)) == []  # no dataset file: nothing to pin
    assert names(Native().checks(loaded, place)) == [
        "engine python", "output", "shm", "cpu-isa", "int4-path", "memory", "disk",
    ]  # fmt: skip


def test_each_runtime_plans_the_witness_and_the_clock() -> None:
    assert Native().witness_plan(FAR, None) == WitnessPlan(MINE)  # kit's child: here
    assert External().witness_plan("http://127.0.0.1:8000", None) == WitnessPlan(MINE)
    assert External().witness_plan(FAR, None) == WitnessPlan(
        None, "host-speed witness not run: the server is not on this host"
    )
    assert Compose().witness_plan(FAR, None) == WitnessPlan(
        None, "host-speed witness not run: in a container, the engine's cores are unknown"
    )
    assert Compose().engine_clock("worker 0: cores [0]") is None  # not kit's child
    assert External().engine_clock(None) is None


def test_only_the_native_runtime_sees_the_engines_processes() -> None:
    assert Compose().engine_processes() is None and External().engine_processes() is None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        found = Native().engine_processes()
        assert found is not None and child.pid in found and os.getpid() not in found
        readings = Native().memory_probe("cpu").read
        assert readings is not None and not isinstance(readings(), str)
    finally:
        child.kill()
        child.wait()
    assert Compose().memory_probe("cpu").note == (
        "not measured: the engine's processes are in another container"
    )
    assert Compose().memory_probe("cuda").source == "nvml"  # NVML reads the card anywhere
