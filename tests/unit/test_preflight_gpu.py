"""GPU preflight and pins: every missing pin and the missing GPUs in one run, exit 2 for the
recipe's faults and 3 for the machine's; the per-card memory estimate (kit.preflight.gpu's
written formula) on given rigs, with the model's config read from a real huggingface_hub cache.

NVML is real: on this machine (no GPU) it cannot start, and the count check says so. A rig is
"forced" by handing ``gpu_checks`` the cards it would show, e.g. 2 x RTX 3090 24 GiB.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import BadInputError, EnvironmentProblem
from kit.preflight import Card, Estimate, gpu_checks, model_shapes, table
from kit.preflight.docker import container_checks
from kit.preflight.gpu import GIB, estimate, visible_cards
from kit.preflight.shape import Shape
from kit.recipe import LoadedRecipe, load_recipe
from kit.runtimes import Native

SEED = "recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml"
H200 = "recipes/h200-synthetic-int4-dflash.yaml"
RTX3090 = Card(index=0, name="NVIDIA GeForce RTX 3090", memory_gib=24.0)
H200_CARD = Card(index=0, name="NVIDIA H200", memory_gib=139.8)


def sized(loaded: LoadedRecipe) -> Estimate:
    """The per-card estimate, where the model's and the draft's shapes are known."""
    shapes = model_shapes(loaded)
    assert isinstance(shapes.target, Shape) and isinstance(shapes.draft_params, int), shapes
    return estimate(loaded.recipe, shapes.target, shapes.draft_params)


def test_the_seed_lists_every_missing_pin_and_the_gpus_in_one_run(fixtures_dir: Path) -> None:
    res = CliRunner().invoke(main, ["preflight", str(fixtures_dir / SEED), "--runtime", "compose"])
    assert res.exit_code == 2, res.output  # the recipe is at fault (and the machine too)
    failed = [line.split()[1] for line in res.stdout.splitlines() if line.startswith("FAILED")]
    cards, _ = visible_cards()
    engine = [c.name.split()[0] for c in container_checks(gpu=True) if not c.ok]
    expected = ["pin", "pin", "pin", *engine] + ([] if len(cards) >= 2 else ["gpus"])
    assert failed == expected
    for needle in (
        "model.revision: Qwen/Qwen3.8-27B is not pinned to a revision",
        "speculative.draft.revision: incoai/Qwen3.8-27B-DFlash2 is not pinned",
        "server.engine.image: vllm/vllm-openai:v0.28.0 is not pinned by digest",
        "--set model.revision=<40-hex sha> (make: SET=...)",
    ):
        assert needle in res.stderr
    if len(cards) < 2:
        assert f"gpus: {len(cards)} visible (" in res.stderr
        assert "tensor_parallel_size 2 needs 2" in res.stderr


def test_a_pinned_recipe_on_a_machine_without_gpus_is_exit_3(fixtures_dir: Path) -> None:
    loaded = load_recipe(fixtures_dir / H200)
    cards, why = visible_cards()
    if cards:
        pytest.skip("this machine has GPUs")
    assert why is not None and why.startswith("NVML could not start")
    with pytest.raises(EnvironmentProblem) as info:
        # native: no image pin, the model is synthetic: only the GPUs fail
        Native().preflight(loaded)
    assert info.value.message.splitlines()[1:] == [
        f"  gpus: 0 visible ({why}); tensor_parallel_size 1 needs 1"
    ]


def test_missing_pins_are_the_recipes_fault_even_with_the_gpus(
    fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kit.preflight.visible_cards", lambda: ([RTX3090, RTX3090], None))
    loaded = load_recipe(fixtures_dir / SEED)
    with pytest.raises(BadInputError) as info:
        Native().preflight(loaded)
    assert [line.split(":")[0].strip() for line in info.value.message.splitlines()[1:]] == [
        "pin model",
        "pin speculative.draft",
    ]


def test_the_forced_2x3090_rig_fits_the_seed(
    fixtures_dir: Path, cached_models: Path, seed_pins: list[str]
) -> None:
    loaded = load_recipe(fixtures_dir / SEED, seed_pins)
    items = gpu_checks(loaded.recipe, [RTX3090, RTX3090], None, model_shapes(loaded))
    assert [(c.name, c.ok) for c in items] == [("gpus", True), ("gpu memory", True)], table(items)
    est = sized(loaded)
    # the formula by hand: the body INT4 g128 with bf16 scales, embeddings and lm_head in
    # bf16, over TP 2; KV int8 at 131072
    body = 64 * (5120 * 128 * 2 * (64 + 8) + 3 * 5120 * 17408)
    embeddings = 2 * 151936 * 5120
    assert est.weights == pytest.approx((body / 2 + body / 128 * 2 + embeddings * 2) / 2 / GIB)
    assert est.kv_cache == pytest.approx(2 * 64 * 8 * 128 * 1 * 131072 / 2 / GIB)
    assert est.total < 0.90 * 24
    assert "of 21.6 GiB usable (0.9 of the smallest card)" in items[1].detail


def test_one_3090_is_refused_with_the_count(
    fixtures_dir: Path, cached_models: Path, seed_pins: list[str]
) -> None:
    loaded = load_recipe(fixtures_dir / SEED, seed_pins)
    items = gpu_checks(loaded.recipe, [RTX3090], None, model_shapes(loaded))
    assert [(c.name, c.ok) for c in items] == [("gpus", False)]
    assert items[0].detail == (
        "1 visible (NVIDIA GeForce RTX 3090 24 GiB); tensor_parallel_size 2 needs 2"
    )


def test_a_context_that_does_not_fit_is_refused(
    fixtures_dir: Path, cached_models: Path, seed_pins: list[str]
) -> None:
    loaded = load_recipe(fixtures_dir / SEED, [*seed_pins, "server.kv_cache_dtype=auto"])
    items = gpu_checks(loaded.recipe, [RTX3090, RTX3090], None, model_shapes(loaded))
    assert not items[1].ok  # a bf16 KV cache at 131072 is 16 GiB a card on top of the weights
    assert "lower server.max_model_len" in items[1].hint


def test_without_the_models_config_the_memory_is_not_checked(
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    seed_pins: list[str],
    offline: None,
) -> None:
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "empty"))
    loaded = load_recipe(fixtures_dir / SEED, seed_pins)
    items = gpu_checks(loaded.recipe, [RTX3090, RTX3090], None, model_shapes(loaded))
    assert (items[1].ok, items[1].state) == (None, "not checked")  # never ok
    assert items[1].detail == (
        "not estimated: model Qwen/Qwen3.8-27B: config.json is not in kit's cache, and "
        "HF_HUB_OFFLINE is set; draft incoai/Qwen3.8-27B-DFlash2: config.json is not in kit's "
        "cache, and HF_HUB_OFFLINE is set"
    )
    assert items[1].hint.startswith("unset HF_HUB_OFFLINE and run kit preflight ")


def test_checks_are_pins_then_resources(fixtures_dir: Path) -> None:
    names = [
        c.name for c in Native().checks(load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml"))
    ]
    assert names == ["engine python", "shm", "cpu-isa", "int4-path", "memory", "disk"]


def test_a_rig_can_be_assumed_from_the_command_line(
    fixtures_dir: Path, seed_pins: list[str], offline: None
) -> None:
    args = ["preflight", str(fixtures_dir / SEED), *[a for p in seed_pins for a in ("--set", p)]]
    res = CliRunner().invoke(main, [*args, "--rig", "2x24"])
    assert res.exit_code == 0, res.output
    assert "ok           gpus                   2 assumed (card 24 GiB, card 24 GiB)" in res.stdout
    one = CliRunner().invoke(main, [*args, "--rig", "1x24"])
    assert one.exit_code == 3
    assert "gpus: 1 assumed (card 24 GiB); tensor_parallel_size 2 needs 2" in one.stderr
    bad = CliRunner().invoke(main, [*args, "--rig", "two"])
    assert bad.exit_code == 2 and "--rig two: expected CARDSxGIB, e.g. 2x24" in bad.stderr
