"""DFlash2 in recipes: the synthetic draft's DFlash2 settings and their checks, the
deterministic-acceptance settings, and the two H200 DFlash2 recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import RecipeError
from kit.recipe import DFlash2Draft, SyntheticDraft, SyntheticModel, load_recipe

DFLASH2 = ["speculative.method=dflash2"]


def problems(fixtures_dir: Path, overrides: list[str]) -> list[str]:
    with pytest.raises(RecipeError) as exc:
        load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", overrides)
    return exc.value.problems


def test_dflash2_settings_default_to_the_released_checkpoint() -> None:
    d = DFlash2Draft()
    assert (d.conv_kernel_size, d.conv_group_size, d.selector_rank, d.selector_top_k) == (
        2, 16, 256, 16,
    )  # fmt: skip
    assert d.weights == "random"


def test_dflash2_settings_are_checked_against_the_target(fixtures_dir: Path) -> None:
    sets = [
        "speculative.draft.dflash2.conv_group_size=48",
        "speculative.draft.dflash2.conv_kernel_size=9",
        "speculative.draft.dflash2.selector_top_k=1025",
    ]
    assert problems(fixtures_dir, DFLASH2 + sets) == [
        f"--set {sets[0]}: speculative.draft.dflash2.conv_group_size 48 does not divide "
        "model.shape.hidden_size 256",
        f"--set {sets[1]}: speculative.draft.dflash2.conv_kernel_size 9 exceeds the 8 query "
        "tokens of a draft step (1 + speculative.num_speculative_tokens)",
        f"--set {sets[2]}: speculative.draft.dflash2.selector_top_k 1025 exceeds the vocabulary "
        "of one shard, model.shape.vocab_size 1024 / server.tensor_parallel_size 1",
    ]
    zero = "speculative.draft.dflash2.selector_rank=0"
    assert problems(fixtures_dir, [*DFLASH2, zero]) == [
        f"--set {zero}: speculative.draft.dflash2.selector_rank: Input should be greater than 0"
    ]


def test_dflash2_settings_need_method_dflash2(fixtures_dir: Path) -> None:
    top_k = "speculative.draft.dflash2.selector_top_k=8"
    # the file has no dflash2 section: the --set that made it is the place named
    assert problems(fixtures_dir, [top_k]) == [
        f"--set {top_k}: speculative.draft.dflash2: only for method dflash2 (the method is dflash)"
    ]


def test_deterministic_settings_go_together(fixtures_dir: Path) -> None:
    token0 = "speculative.draft.dflash2.weights=token0"
    assert problems(fixtures_dir, [*DFLASH2, token0]) == [
        f"--set {token0}: speculative.draft.dflash2.weights token0 needs "
        "model.mask_picks_token0: true (and model.zero_final_norm: true)"
    ]
    mask = "model.mask_picks_token0=true"
    assert problems(fixtures_dir, [mask]) == [
        f"--set {mask}: model.mask_picks_token0 needs model.zero_final_norm: true (the zero norm "
        "keeps the target's own logits at 0 whatever lm_head row 0 holds)"
    ]
    zero = "speculative.draft.zero_final_norm=true"
    both = [*DFLASH2, token0, mask, "model.zero_final_norm=true", zero]
    assert problems(fixtures_dir, both) == [
        f"--set {token0}: speculative.draft.dflash2.weights token0 needs the draft's final "
        "norm: set speculative.draft.zero_final_norm: false"
    ]
    ok = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", both[:-1]).recipe
    assert isinstance(ok.speculative.draft, SyntheticDraft)
    assert ok.speculative.draft.dflash2 == DFlash2Draft(weights="token0")


def test_cli_names_the_field_and_exits_2(fixtures_dir: Path) -> None:
    path = str(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    bad = "speculative.draft.dflash2.conv_group_size=48"
    res = CliRunner().invoke(main, ["recipe", "validate", path, "--set", DFLASH2[0], "--set", bad])
    assert res.exit_code == 2
    assert res.stderr == (
        f"--set {bad}: speculative.draft.dflash2.conv_group_size 48 does not divide "
        "model.shape.hidden_size 256\n"
    )


def test_the_h200_dflash2_recipe_is_the_dflash_one_with_dflash2(fixtures_dir: Path) -> None:
    one = load_recipe(fixtures_dir / "recipes" / "h200-synthetic-int4-dflash.yaml").recipe
    two = load_recipe(fixtures_dir / "recipes" / "h200-synthetic-int4-dflash2.yaml").recipe
    d1, d2 = one.speculative.draft, two.speculative.draft
    assert isinstance(d1, SyntheticDraft) and isinstance(d2, SyntheticDraft)
    assert two.speculative.method == "dflash2" and two.speculative.num_speculative_tokens == 7
    assert d2.dflash2 == DFlash2Draft()  # the released checkpoint's values, random weights
    assert d2.model_copy(update={"dflash2": None}) == d1  # same v1 part, same seed
    assert two.server.patches == "vllm-0.26.0" and two.server.engine == one.server.engine
    assert two.rig is not None and (two.rig.gpus, two.rig.auto) == (1, False)
    a, b = one.to_json_dict(), two.to_json_dict()
    for key in ("name", "description", "speculative", "rig"):
        a.pop(key, None)
        b.pop(key)
    b["server"]["patches"] = None
    assert a["bench"].pop("vllm_bench") is not None and b["bench"].pop("vllm_bench") is None
    assert a == b


def test_the_token0_recipe_is_deterministic(fixtures_dir: Path) -> None:
    r = load_recipe(fixtures_dir / "recipes" / "h200-synthetic-tiny-dflash2-token0.yaml").recipe
    assert isinstance(r.model, SyntheticModel) and isinstance(r.speculative.draft, SyntheticDraft)
    assert r.model.zero_final_norm and r.model.mask_picks_token0
    assert r.speculative.draft.dflash2 == DFlash2Draft(weights="token0")
    assert not r.speculative.draft.zero_final_norm
    assert r.bench.sampling.temperature == 0 and r.bench.ignore_eos
    assert r.server.patches == "vllm-0.26.0" and r.rig is not None and not r.rig.auto


def test_recipes_without_dflash2_keep_their_json(fixtures_dir: Path) -> None:
    r = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml").recipe.to_json_dict()
    assert "dflash2" not in r["speculative"]["draft"]
    assert "mask_picks_token0" not in r["model"]
