"""Every committed recipe (recipes/, kit/data/) validates, can run, and fits the rig it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.preflight import Card, gpu_checks, model_shapes, table
from kit.recipe import Engine, departures, load_recipe, recipe_file_json_schema, shown_recipe
from kit.recipe.quality import Quality
from kit.recipe.yamlsafe import load_yaml

VALIDATOR = jsonschema.Draft202012Validator(recipe_file_json_schema())
H200_CARD = Card(index=0, name="NVIDIA H200", memory_gib=139.8)


def _messages(data: Any) -> list[str]:
    return sorted(e.message for e in VALIDATOR.iter_errors(data))


def test_shipped_recipes_validate(every_recipe: Path) -> None:
    loaded = load_recipe(every_recipe)
    assert loaded.recipe.schema_version == 1
    assert len(loaded.recipe.sha256()) == 64


def test_shipped_recipe_files_validate(every_recipe: Path) -> None:
    data, _ = load_yaml(every_recipe.read_text(), str(every_recipe))
    assert _messages(data) == []


def test_every_committed_recipe_can_run(repo_root: Path) -> None:
    recipes = sorted(str(p) for p in (repo_root / "recipes").glob("*.yaml"))
    res = CliRunner().invoke(main, ["recipe", "validate", *recipes])
    assert res.exit_code == 0, res.output


def test_recipe_series_matches_engine(repo_root: Path) -> None:
    from kit.recipe.runnable import series_problems

    for path in sorted((repo_root / "recipes").glob("*.yaml")):
        server = load_recipe(path).recipe.server
        assert series_problems(server.engine, server.patches, path.name) == []
    assert series_problems(Engine(name="vllm", version="0.27.1"), "vllm-0.28.0", "r.yaml") == [
        "r.yaml: server.patches: series vllm-0.28.0 is for vllm 0.28.0, the recipe's engine is "
        "vllm 0.27.1"
    ]


def test_the_h200_recipes_fit_an_h200(repo_root: Path, every_recipe: Path) -> None:
    loaded = load_recipe(every_recipe)
    if loaded.recipe.server.engine.device != "cuda" or "h200" not in every_recipe.name:
        pytest.skip("an H200 recipe")
    cards = [H200_CARD] * loaded.recipe.server.tensor_parallel_size
    items = gpu_checks(loaded.recipe, cards, None, model_shapes(loaded))
    assert all(c.ok for c in items), table(items)
    assert "GiB a card" in items[1].detail


def test_on_by_default_and_unsaid_in_the_recipes_hash(every_recipe: Path) -> None:
    recipe = load_recipe(every_recipe).recipe
    assert recipe.bench.quality == Quality()
    # a late field at its default: the recipe hashes as it did before the probe existed
    assert "quality" not in shown_recipe(recipe)["bench"]


def test_the_shipped_reference_protocol_is_canonical(repo_root: Path) -> None:
    recipe = load_recipe(repo_root / "kit/data/reference-protocol.yaml").recipe
    assert departures(recipe.bench) == [] and recipe.canonical is True
