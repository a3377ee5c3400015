"""AutoRound preflight: the per-block peak (kit.preflight.autoround's written formula) against
the committed 24 GiB-capped measurement, and the placements it passes or refuses on given
rigs, with the model's config read from a real huggingface_hub cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.preflight import model_shapes, table
from kit.preflight.autoround import autoround_checks, tuning_estimate
from kit.preflight.gpu import Card
from kit.preflight.shape import Shape, Unknown
from kit.recipe import AutoRoundQuantization, LoadedRecipe, load_recipe
from kit.runtimes import Native

SEED = "recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml"
RTX3090 = Card(index=0, name="NVIDIA GeForce RTX 3090", memory_gib=24.0)
# experiments/results/autoround-24gb-h200-2026-12-01.json, copied
MEASURED = Path("results/autoround-24gb-h200-2026-12-01.json")


def target(loaded: LoadedRecipe) -> Shape | Unknown:
    return model_shapes(loaded).target


def arms(fixtures_dir: Path) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = json.loads((fixtures_dir / MEASURED).read_text())["results"]
    return results


@pytest.mark.parametrize("arm", ["block-inputs-on-card", "block-inputs-in-ram"])
def test_the_formula_meets_the_capped_measurement_from_above(fixtures_dir: Path, arm: str) -> None:
    run = next(r for r in arms(fixtures_dir) if r["arm"] == arm)
    s = run["shape"]
    shape = Shape(
        s["hidden_size"],
        s["intermediate_size"],
        run["layers"],
        s["num_attention_heads"],
        s["num_key_value_heads"],
        s["head_dim"],
        s["vocab_size"],
    )
    q = AutoRoundQuantization.model_validate(
        {
            "method": "autoround",
            "iters": run["iters"],
            "nsamples": run["nsamples"],
            "seqlen": run["seqlen"],
            "batch_size": run["batch_size"],
            "placement": run["placement"],
        }
    )
    est = tuning_estimate(shape, q)
    # never below what AutoRound allocated, and not far above it (a preflight that refused
    # placements which fit would be as wrong as one that passed those which do not)
    assert run["peak_allocated_gib"] <= est.allocated <= run["peak_allocated_gib"] * 1.08
    assert run["peak_reserved_gib"] <= est.need - 0.5
    assert est.need <= run["cap_gib"]  # it ran under the cap without running out of memory
    assert run["out_of_memory"] is None


def test_the_seeds_placement_fits_two_3090s(
    fixtures_dir: Path, cached_models: Path, seed_pins: list[str]
) -> None:
    loaded = load_recipe(fixtures_dir / SEED, seed_pins)
    items = autoround_checks(loaded.recipe, [RTX3090, RTX3090], 128.0, target(loaded))
    assert [(c.name, c.ok) for c in items] == [
        ("autoround memory", True),
        ("autoround host memory", True),
    ], table(items)
    assert "on card 0 while a block is tuned" in items[0].detail
    assert "block inputs in host RAM;" in items[0].detail  # the seed sets low_gpu_mem_usage


def test_block_inputs_that_do_not_fit_the_card_are_refused_with_the_fix(
    fixtures_dir: Path,
    cached_models: Path,
    seed_pins: list[str],
) -> None:
    more = [*seed_pins, "quantization.nsamples=256"]
    on_card = load_recipe(
        fixtures_dir / SEED, [*more, "quantization.placement.low_gpu_mem_usage=false"]
    )
    items = autoround_checks(on_card.recipe, [RTX3090, RTX3090], None, target(on_card))
    assert [(c.name, c.ok) for c in items] == [("autoround memory", False)]
    assert "block inputs on the card 15.0" in items[0].detail
    assert "low_gpu_mem_usage: true" in items[0].hint
    in_ram = load_recipe(fixtures_dir / SEED, more)
    assert autoround_checks(in_ram.recipe, [RTX3090, RTX3090], None, target(in_ram))[0].ok


def test_a_block_spread_over_two_cards_halves_its_part(
    fixtures_dir: Path,
    cached_models: Path,
    seed_pins: list[str],
) -> None:
    big = [*seed_pins, "quantization.batch_size=32"]
    one = load_recipe(fixtures_dir / SEED, big)
    assert not autoround_checks(one.recipe, [RTX3090, RTX3090], None, target(one))[0].ok
    two = load_recipe(fixtures_dir / SEED, [*big, "quantization.placement.device_map=[0, 1]"])
    item = autoround_checks(two.recipe, [RTX3090, RTX3090], None, target(two))[0]
    assert item.ok and "over 2 card(s)" in item.detail, item.detail


def test_a_device_map_naming_a_missing_card_is_the_recipes_fault(
    fixtures_dir: Path,
    cached_models: Path,
    seed_pins: list[str],
) -> None:
    loaded = load_recipe(fixtures_dir / SEED, [*seed_pins, "quantization.placement.device_map=2"])
    [item] = autoround_checks(loaded.recipe, [RTX3090, RTX3090], None, target(loaded))
    assert (item.ok, item.fault) == (False, "recipe")
    assert item.detail == "quantization.placement: device_map 2 names card(s) [2], and there are 2"


def test_host_ram_for_the_whole_model_is_checked(
    fixtures_dir: Path, cached_models: Path, seed_pins: list[str]
) -> None:
    loaded = load_recipe(fixtures_dir / SEED, seed_pins)
    host = autoround_checks(loaded.recipe, [RTX3090, RTX3090], 32.0, target(loaded))[1]
    assert not host.ok  # 27B in bf16 is 46 GiB, and the seed keeps the block inputs in RAM
    assert host.detail == (
        "about 58 GiB while quantizing (the model in bf16 46 + block inputs 7.5 + 4) of 32 GiB "
        "available"
    )


def test_published_checkpoints_cpu_and_rtn_builds_have_no_such_item(fixtures_dir: Path) -> None:
    for name in ("syvai-qwen3.8-27b-1x3090-dflash2.yaml", "h200-synthetic-int4-dflash.yaml"):
        loaded = load_recipe(fixtures_dir / "recipes" / name)
        assert autoround_checks(loaded.recipe, [Card(0, "card", 24.0)], 64.0, target(loaded)) == []
    names = [
        c.name for c in Native().checks(load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml"))
    ]
    assert not any(n.startswith("autoround") for n in names)


def test_the_cli_shows_the_autoround_item_for_an_assumed_rig(
    fixtures_dir: Path, cached_models: Path, seed_pins: list[str], offline: None
) -> None:
    # offline: the configs are cached, the disk is not sized
    args = ["preflight", str(fixtures_dir / SEED), *[a for p in seed_pins for a in ("--set", p)]]
    res = CliRunner().invoke(main, [*args, "--rig", "2x24"])
    assert res.exit_code == 0, res.output
    assert "ok           autoround memory" in res.stdout
    assert "autoround host memory" not in res.stdout  # not this machine's RAM
    tight = [
        "--set",
        "quantization.placement.low_gpu_mem_usage=false",
        "--set",
        "quantization.nsamples=256",
    ]
    refused = CliRunner().invoke(main, [*args, *tight, "--rig", "2x24"])
    assert refused.exit_code == 3
    assert "autoround memory: about" in refused.stderr
