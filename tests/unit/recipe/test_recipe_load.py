"""kit.recipe.load: YAML, ``extends``, ``--set``, and the CLI commands that read a recipe."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import RecipeError
from kit.recipe import load_recipe, recipe_sha256


def test_extends_and_set(fixtures_dir: Path, write: Callable[[str, str], Path]) -> None:
    base = write("base.yaml", (fixtures_dir / "recipes/cpu-tiny.yaml").read_text())
    child = write(
        "child.yaml",
        """
        extends: base.yaml
        name: child
        bench:
          runs: 2
    """,
    )
    loaded = load_recipe(child, ["bench.warmups=1", "server.max_model_len=1024"])
    r = loaded.recipe
    assert r.name == "child"
    assert (r.bench.runs, r.bench.warmups, r.server.max_model_len) == (2, 1, 1024)
    # untouched values come from the parent
    assert r.quantization == load_recipe(base).recipe.quantization
    assert loaded.chain[0] == child.resolve() and loaded.chain[1] == base.resolve()


def test_extends_switching_union_member_replaces_section(
    fixtures_dir: Path, write: Callable[[str, str], Path]
) -> None:
    write("base.yaml", (fixtures_dir / "recipes/cpu-tiny.yaml").read_text())
    child = write(
        "child.yaml",
        """
        extends: base.yaml
        quantization:
          method: none
    """,
    )
    assert load_recipe(child).recipe.quantization.method == "none"


def test_extends_cycle(tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    write("a.yaml", "extends: b.yaml\n")
    write("b.yaml", "extends: a.yaml\n")
    with pytest.raises(RecipeError) as exc:
        load_recipe(tmp_path / "a.yaml")
    assert "extends: cycle a.yaml -> b.yaml -> a.yaml" in exc.value.message


def test_not_yaml_and_missing_file(tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    p = write("r.yaml", "a: [1, 2\n")
    with pytest.raises(RecipeError) as exc:
        load_recipe(p)
    assert exc.value.message.startswith(f"{p}:2:1: not valid YAML: ")
    with pytest.raises(RecipeError) as exc:
        load_recipe(tmp_path / "nope.yaml")
    assert exc.value.message == f"{tmp_path / 'nope.yaml'}: file not found"


def test_bad_set_syntax(fixtures_dir: Path) -> None:
    with pytest.raises(RecipeError) as exc:
        load_recipe(fixtures_dir / "recipes/cpu-tiny.yaml", ["bench.runs"])
    assert exc.value.message == "--set bench.runs: expected a.b=value"


def test_cli_validate_exit_code_and_lines(fixtures_dir: Path) -> None:
    runner = CliRunner()
    path = str(fixtures_dir / "recipes/cpu-tiny.yaml")
    res = runner.invoke(main, ["recipe", "validate", path, "--set", "bench.runz=3"])
    assert res.exit_code == 2
    assert (
        res.stderr.strip() == "--set bench.runz=3: bench.runz: unknown key (did you mean 'runs'?)"
    )
    assert "Traceback" not in res.output
    ok = runner.invoke(main, ["recipe", "validate", path])
    assert ok.exit_code == 0 and ok.stdout.startswith(f"ok: {path} (cpu-tiny, sha256 ")


def test_cli_show_applies_overrides(fixtures_dir: Path) -> None:
    res = CliRunner().invoke(
        main,
        ["recipe", "show", str(fixtures_dir / "recipes/cpu-tiny.yaml"), "--set", "bench.runs=2"],
    )
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["recipe"]["bench"]["runs"] == 2
    assert data["sha256"] == recipe_sha256(data["recipe"])
