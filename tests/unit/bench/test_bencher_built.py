"""Bencher is built complete: no attribute is set after ``__init__`` (mypy holds the rest with
``Final``), and each bench returns what it measured as a value of its own."""

from __future__ import annotations

import ast
import inspect
from dataclasses import FrozenInstanceError

import pytest

from kit.bench import runner
from kit.bench.runner import Bencher, BenchRun, Watch
from kit.recipe import Bench, Prompt


def _assigned_outside_init(cls: type) -> list[str]:
    tree = ast.parse(inspect.getsource(cls))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__":
            continue
        for node in ast.walk(fn):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                else []
            )
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                    if t.value.id == "self":
                        found.append(f"{cls.__name__}.{fn.name}: self.{t.attr}")
    return found


def test_no_attribute_is_set_after_init() -> None:
    assert _assigned_outside_init(Bencher) == []
    assert _assigned_outside_init(runner._Run) == []


def test_every_attribute_is_final() -> None:
    src = inspect.getsource(Bencher.__init__) + inspect.getsource(runner._Run.__init__)
    for line in src.splitlines():
        if line.strip().startswith("self.") and "=" in line:
            assert ": Final" in line, line


BENCH = Bench(prompts=[Prompt(name="a", text="hi", max_tokens=8)], runs=2, warmups=1)


def test_the_measurement_is_a_frozen_value() -> None:
    run = BenchRun(result=Bencher("http://127.0.0.1:1", BENCH, "m").run())
    with pytest.raises(FrozenInstanceError):
        run.plan = ()  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        Watch().hooks = ()  # type: ignore[misc]


def test_each_run_starts_afresh() -> None:
    """Two runs of one Bencher against no server: each result holds its own records only."""
    bencher = Bencher("http://127.0.0.1:1", BENCH, "m")
    first, second = bencher.measure(), bencher.measure()
    assert not first.result.complete and not second.result.complete
    assert len(first.result.records) == len(second.result.records) == 1
    assert first.result.records[0] is not second.result.records[0]
    assert first.plan is None
