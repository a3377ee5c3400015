from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import RecipeError
from kit.recipe import (
    AutoRoundQuantization,
    SyntheticDraft,
    SyntheticModel,
    load_recipe,
    recipe_sha256,
)

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_shipped_recipes_validate(path: Path) -> None:
    loaded = load_recipe(path)
    assert loaded.recipe.schema_version == 1
    assert len(loaded.recipe.sha256()) == 64


def test_cpu_tiny_shape() -> None:
    r = load_recipe(ROOT / "recipes/cpu-tiny.yaml").recipe
    assert isinstance(r.model, SyntheticModel)
    assert isinstance(r.quantization, AutoRoundQuantization)
    assert (r.quantization.bits, r.quantization.group_size, r.quantization.sym) == (4, 128, True)
    assert r.speculative.method == "dflash"
    assert isinstance(r.speculative.draft, SyntheticDraft)
    assert r.speculative.num_speculative_tokens == 7
    assert r.bench.ignore_eos is True
    assert r.canonical is False


def test_extends_and_set(tmp_path: Path) -> None:
    base = ROOT / "recipes/cpu-tiny.yaml"
    child = write(
        tmp_path,
        "child.yaml",
        f"""
        extends: {base}
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


def test_extends_switching_union_member_replaces_section(tmp_path: Path) -> None:
    child = write(
        tmp_path,
        "child.yaml",
        f"""
        extends: {ROOT / "recipes/cpu-tiny.yaml"}
        quantization:
          method: none
    """,
    )
    assert load_recipe(child).recipe.quantization.method == "none"


def test_extends_cycle(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "extends: b.yaml\n")
    write(tmp_path, "b.yaml", "extends: a.yaml\n")
    with pytest.raises(RecipeError) as exc:
        load_recipe(tmp_path / "a.yaml")
    assert "extends: cycle a.yaml -> b.yaml -> a.yaml" in exc.value.message


def test_sha256_is_order_independent() -> None:
    assert recipe_sha256({"a": 1, "b": [1, 2]}) == recipe_sha256({"b": [1, 2], "a": 1})
    assert recipe_sha256({"a": 1}) != recipe_sha256({"a": 2})


BAD = [
    # (overrides on cpu-tiny, expected problem lines)
    (
        ["quantization.group_sizee=64"],
        ["quantization.group_sizee: unknown key (did you mean 'group_size'?)"],
    ),
    (
        ["bench.sampling.temprature=0.6"],
        ["bench.sampling.temprature: unknown key (did you mean 'temperature'?)"],
    ),
    (
        ["server.tensor_parallel_size=two"],
        [
            "server.tensor_parallel_size: Input should be a valid integer, unable to parse string "
            "as an integer"
        ],
    ),
    (
        ["quantization.group_size=96"],
        [
            "quantization.group_size 96 does not divide model.shape.hidden_size 256",
            "quantization.group_size 96 does not divide model.shape.intermediate_size 512",
        ],
    ),
    (
        ["server.tensor_parallel_size=2"],
        ["server.tensor_parallel_size: the CPU engine serves with 1"],
    ),
    (["speculative.method=ngram"], ["speculative: method 'ngram' takes no draft"]),
    (["quantization.bits=5"], ["quantization.bits: Input should be 2, 3, 4 or 8"]),
    (["model.source=hubb"], ["model.source: source must be one of hub, local, synthetic"]),
    (["schema_version=2"], ["schema_version: Input should be 1"]),
    (["server.engine.name=sglang"], ["server.engine.name: Input should be 'vllm' or 'vllm-cpu'"]),
    (
        ["bench.prompts.0.max_tokens=0"],
        ["bench.prompts.0.max_tokens: Input should be greater than 0"],
    ),
]


@pytest.mark.parametrize(("overrides", "expected"), BAD)
def test_bad_recipe_messages(overrides: list[str], expected: list[str]) -> None:
    with pytest.raises(RecipeError) as exc:
        load_recipe(ROOT / "recipes/cpu-tiny.yaml", overrides)
    assert exc.value.problems == [f"{ROOT / 'recipes/cpu-tiny.yaml'}: {e}" for e in expected]


def test_hub_model_needs_pinned_revision(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "r.yaml",
        """
        schema_version: 1
        name: hubby
        model: {source: hub, repo_id: Qwen/Qwen3-8B, revision: main}
        quantization: {method: none}
        server: {engine: {name: vllm, version: 0.26.0}}
    """,
    )
    with pytest.raises(RecipeError) as exc:
        load_recipe(p)
    assert exc.value.problems == [
        f"{p}: model.revision: revision 'main' is a moving branch; pin a commit sha"
    ]


def test_missing_sections(tmp_path: Path) -> None:
    p = write(tmp_path, "r.yaml", "schema_version: 1\nname: x\n")
    with pytest.raises(RecipeError) as exc:
        load_recipe(p)
    assert exc.value.problems == [
        f"{p}: model: required field missing",
        f"{p}: quantization: required field missing",
        f"{p}: server: required field missing",
    ]


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    p = write(tmp_path, "r.yaml", "a: [1, 2\n")
    with pytest.raises(RecipeError) as exc:
        load_recipe(p)
    assert exc.value.message.startswith("r.yaml: not valid YAML (line 2, column 1)")
    with pytest.raises(RecipeError) as exc:
        load_recipe(tmp_path / "nope.yaml")
    assert exc.value.message == "nope.yaml: file not found"


def test_bad_set_syntax() -> None:
    with pytest.raises(RecipeError) as exc:
        load_recipe(ROOT / "recipes/cpu-tiny.yaml", ["bench.runs"])
    assert exc.value.message == "--set bench.runs: expected a.b=value"


def test_cli_validate_exit_code_and_lines() -> None:
    runner = CliRunner()
    path = str(ROOT / "recipes/cpu-tiny.yaml")
    res = runner.invoke(main, ["recipe", "validate", path, "--set", "bench.runz=3"])
    assert res.exit_code == 2
    assert res.stderr.strip() == f"{path}: bench.runz: unknown key (did you mean 'runs'?)"
    assert "Traceback" not in res.output
    ok = runner.invoke(main, ["recipe", "validate", path])
    assert ok.exit_code == 0 and ok.stdout.startswith(f"ok: {path} (cpu-tiny, sha256 ")


def test_cli_show_applies_overrides() -> None:
    import json

    res = CliRunner().invoke(
        main, ["recipe", "show", str(ROOT / "recipes/cpu-tiny.yaml"), "--set", "bench.runs=2"]
    )
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["recipe"]["bench"]["runs"] == 2
    assert data["sha256"] == recipe_sha256(data["recipe"])
