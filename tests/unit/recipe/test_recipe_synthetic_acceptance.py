"""speculative.synthetic_acceptance: its forms, their errors, the rates each resolves to, and
what vLLM is given (docs/synthetic-acceptance.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kit.errors import BadInputError, RecipeError
from kit.recipe import Recipe, load_recipe
from kit.recipe.acceptance import (
    conditional_rates,
    geometric_rates,
    resolve,
    solve_conditional,
    step_rates,
    target,
    target_of,
)
from kit.recipe.protocol import AcceptanceFigures
from kit.recipe.sources import SyntheticAcceptance
from kit.serve import server_args, speculative_config

SA = "speculative.synthetic_acceptance"
SEED = "club3090-qwen3.8-27b-2x3090-dflash2.yaml"


def tiny(fixtures_dir: Path, *sets: str) -> Recipe:
    return load_recipe(
        fixtures_dir / "recipes" / "cpu-tiny.yaml", [f"{SA}.{s}" for s in sets]
    ).recipe


def problems(fixtures_dir: Path, *sets: str, recipe: str = "cpu-tiny.yaml") -> list[str]:
    with pytest.raises(RecipeError) as exc:
        load_recipe(fixtures_dir / "recipes" / recipe, list(sets))
    return exc.value.problems


# ---------------------------------------------------------------------------------------------
# the math


def test_geometric_rates_are_powers_of_c() -> None:
    assert geometric_rates(0.5, 4) == [0.5, 0.25, 0.125, 0.0625]
    assert geometric_rates(1.0, 3) == [1.0, 1.0, 1.0]
    assert geometric_rates(0.0, 2) == [0.0, 0.0]


def test_the_solved_conditional_rate_accepts_the_mean() -> None:
    for mean in (0.0, 0.5, 3.35, 6.9, 7.0):
        c = solve_conditional(mean, 7)
        assert 0 <= c <= 1
        assert math.isclose(sum(geometric_rates(c, 7)), mean, abs_tol=1e-12)
    # c + c^2 = 0.75 has the root c = 0.5
    assert math.isclose(solve_conditional(0.75, 2), 0.5, abs_tol=1e-15)
    with pytest.raises(ValueError, match=r"outside 0\.\.7"):
        solve_conditional(7.5, 7)


def test_the_step_schedule_is_vllms() -> None:
    # vLLM: [1] * floor(L - 1) + [frac(L - 1)] + [0] * rest, for L = 1 + mean
    rates = step_rates(3.35, 7)
    assert rates[:3] == [1.0, 1.0, 1.0] and rates[4:] == [0.0, 0.0, 0.0]
    assert math.isclose(rates[3], 0.35)
    assert step_rates(7.0, 7) == [1.0] * 7  # the fraction's slot is cut at k
    assert step_rates(0.0, 3) == [0.0, 0.0, 0.0]
    assert step_rates(2.0, 3) == [1.0, 1.0, 0.0]


def test_conditional_rates_are_vllms_conversion() -> None:
    assert conditional_rates([0.8, 0.4, 0.1]) == [0.8, 0.5, 0.25]
    assert conditional_rates([1.0, 0.35, 0.0, 0.0]) == [1.0, 0.35, 0.0, 0.0]  # 0 after a 0


def test_every_form_resolves_to_k_unconditional_rates() -> None:
    def of(figures: AcceptanceFigures | None = None, **form: object) -> list[float]:
        return resolve(SyntheticAcceptance.model_validate(form), 4, figures).rates

    assert of(rates=[0.9, 0.5, 0.5, 0.1]) == [0.9, 0.5, 0.5, 0.1]
    assert of(conditional=0.5) == [0.5, 0.25, 0.125, 0.0625]
    # 0.9375 accepted per step is c = 0.5 over 4 positions, in either convention
    per_draft = of(mean=0.9375, convention="accepted_per_draft")
    length = of(mean=1.9375, convention="acceptance_length", profile="geometric")
    for got in (per_draft, length):
        assert all(math.isclose(a, b) for a, b in zip(got, [0.5, 0.25, 0.125, 0.0625], strict=True))
    assert of(mean=2.5, convention="acceptance_length", profile="step") == [1.0, 0.5, 0.0, 0.0]
    figures = AcceptanceFigures(accepted=30, drafted=80, drafts=20)  # 1.5 per step
    assert of(figures, **{"from": "reference", "profile": "step"}) == [1.0, 0.5, 0.0, 0.0]
    with pytest.raises(ValueError, match="has no acceptance"):
        of(None, **{"from": "reference"})


def test_the_target_says_what_was_asked_and_what_it_means() -> None:
    acc = SyntheticAcceptance(mean=4.35, convention="acceptance_length", profile="step")
    t = resolve(acc, 7, None)
    assert (t.form, t.mean, t.convention, t.profile, t.conditional) == (
        "mean", 4.35, "acceptance_length", "step", None,
    )  # fmt: skip
    assert math.isclose(t.accepted_per_draft, 3.35) and math.isclose(t.acceptance_length, 4.35)
    assert t.conditional_rates == conditional_rates(t.rates)
    geo = resolve(SyntheticAcceptance(conditional=0.9), 7, None)
    assert (geo.form, geo.profile, geo.conditional) == ("conditional", "geometric", 0.9)
    assert math.isclose(geo.accepted_per_draft, sum(0.9**i for i in range(1, 8)))


# ---------------------------------------------------------------------------------------------
# recipes


def test_the_seed_at_its_published_acceptance(fixtures_dir: Path) -> None:
    loaded = load_recipe(fixtures_dir / "recipes" / SEED, [f"{SA}.from=reference"])
    t = target(loaded.recipe.speculative, loaded.recipe.reference)
    assert t is not None and t.form == "reference" and t.profile == "geometric"
    assert math.isclose(t.accepted_per_draft, 50512 / 15088)  # 3.35 of 7 per step
    assert len(t.rates) == 7


def test_a_recipe_without_it_hashes_as_before(fixtures_dir: Path) -> None:
    plain = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml").recipe
    assert "synthetic_acceptance" not in plain.to_json_dict()["speculative"]
    assert target(plain.speculative, plain.reference) is None
    assert target_of(plain.to_json_dict()) is None


def test_from_round_trips_as_written(fixtures_dir: Path) -> None:
    recipe = load_recipe(fixtures_dir / "recipes" / SEED, [f"{SA}.from=reference"]).recipe
    data = recipe.to_json_dict()
    assert data["speculative"]["synthetic_acceptance"]["from"] == "reference"
    again = Recipe.model_validate(json.loads(json.dumps(data)))
    assert again == recipe and again.sha256() == recipe.sha256()
    assert target_of(data) == target(recipe.speculative, recipe.reference)


def test_one_form_only(fixtures_dir: Path) -> None:
    both = [f"{SA}.conditional=0.5", f"{SA}.rates=[0.5,0.2,0.1,0.1,0.1,0.1,0.1]"]
    assert problems(fixtures_dir, *both) == [
        f"--set {both[1]}: {SA}: give exactly one of mean, rates, conditional or from "
        "(got rates and conditional)"
    ]
    none = f"{SA}.profile=step"
    assert problems(fixtures_dir, none) == [
        f"--set {none}: {SA}: give exactly one of mean, rates, conditional or from (got none)"
    ]


def test_a_mean_states_its_convention(fixtures_dir: Path) -> None:
    mean = f"{SA}.mean=3"
    assert problems(fixtures_dir, mean) == [
        f"--set {mean}: {SA}: mean needs a convention (accepted_per_draft or acceptance_length)"
    ]
    wrong = f"{SA}.convention=tokens"
    assert problems(fixtures_dir, mean, wrong)[0].startswith(f"--set {wrong}: {SA}.convention: ")


def test_a_profile_is_for_a_mean_or_the_reference(fixtures_dir: Path) -> None:
    sets = [f"{SA}.conditional=0.5", f"{SA}.profile=step"]
    assert problems(fixtures_dir, *sets) == [
        f"--set {sets[1]}: {SA}: profile is only for mean or from, not conditional"
    ]


def test_rates_are_probabilities_non_increasing_one_per_draft_token(fixtures_dir: Path) -> None:
    over = f"{SA}.rates=[1.2,0.5,0.4,0.3,0.2,0.1,0]"
    assert problems(fixtures_dir, over) == [
        f"--set {over}: {SA}.rates.0: Input should be less than or equal to 1"
    ]
    rising = f"{SA}.rates=[0.5,0.6,0.4,0.3,0.2,0.1,0]"
    assert problems(fixtures_dir, rising) == [
        f"--set {rising}: {SA}: rates must be non-increasing (unconditional: position 2 cannot "
        "be accepted more often than position 1): 0.6 after 0.5"
    ]
    short = f"{SA}.rates=[0.5,0.4]"
    assert problems(fixtures_dir, short) == [
        f"--set {short}: {SA}.rates: 2 rates for speculative.num_speculative_tokens 7: give one "
        "per draft token"
    ]
    negative = f"{SA}.conditional=-0.1"
    assert problems(fixtures_dir, negative) == [
        f"--set {negative}: {SA}.conditional: Input should be greater than or equal to 0"
    ]


def test_a_mean_lies_within_its_convention(fixtures_dir: Path) -> None:
    per_draft = [f"{SA}.mean=7.5", f"{SA}.convention=accepted_per_draft"]
    assert problems(fixtures_dir, *per_draft) == [
        f"--set {per_draft[0]}: {SA}.mean: 7.5 is outside 0..7 (accepted_per_draft, 7 draft tokens)"
    ]
    length = [f"{SA}.mean=0.5", f"{SA}.convention=acceptance_length"]
    assert problems(fixtures_dir, *length) == [
        f"--set {length[0]}: {SA}.mean: 0.5 is outside 1..8 (acceptance_length, 7 draft tokens)"
    ]
    assert tiny(fixtures_dir, "mean=8", "convention=acceptance_length").speculative


def test_it_needs_speculative_decoding(fixtures_dir: Path) -> None:
    sets = [
        "speculative.method=none",
        "speculative.num_speculative_tokens=0",
        "speculative.draft=null",
        f"{SA}.conditional=0.5",
    ]
    assert problems(fixtures_dir, *sets) == [
        f"--set {sets[3]}: {SA}: needs speculative decoding (speculative.method is none)"
    ]


def test_from_reference_needs_published_acceptance(fixtures_dir: Path) -> None:
    ref = f"{SA}.from=reference"
    assert problems(fixtures_dir, ref) == [
        f"--set {ref}: {SA}.from: reference, but the recipe's reference has no acceptance "
        "(reference.acceptance)"
    ]


def test_extra_cannot_set_it_behind_kits_back(fixtures_dir: Path) -> None:
    sneak = "speculative.extra.rejection_sample_method=synthetic"
    assert problems(fixtures_dir, sneak) == [
        f"--set {sneak}: speculative.extra.rejection_sample_method: kit sets it from "
        f"{SA}, which states the acceptance (and the report records it)"
    ]


def test_target_of_an_embedded_recipe_that_does_not_resolve() -> None:
    data = {"speculative": {"num_speculative_tokens": 2, "synthetic_acceptance": {"rates": [1]}}}
    with pytest.raises(BadInputError, match=f"recipe: {SA}: does not resolve"):
        target_of(data)


# ---------------------------------------------------------------------------------------------
# what vLLM is given


def test_vllm_is_given_the_resolved_unconditional_rates(fixtures_dir: Path) -> None:
    for sets in (
        ("mean=4.35", "convention=acceptance_length", "profile=step"),
        ("mean=3.35", "convention=accepted_per_draft"),
        ("conditional=0.8",),
        ("rates=[0.9,0.8,0.7,0.6,0.5,0.4,0.3]",),
    ):
        recipe = tiny(fixtures_dir, *sets)
        t = target(recipe.speculative, recipe.reference)
        cfg = speculative_config(recipe, None)
        assert t is not None and cfg is not None
        assert cfg["rejection_sample_method"] == "synthetic"
        assert cfg["synthetic_acceptance_rates"] == t.rates
        assert "synthetic_acceptance_length" not in cfg
    args = server_args(recipe, Path("m"), Path("d"), "127.0.0.1", 8000)
    spec = json.loads(args[args.index("--speculative-config") + 1])
    assert spec["synthetic_acceptance_rates"] == [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]


def test_a_real_acceptance_run_is_rendered_as_before(fixtures_dir: Path) -> None:
    cfg = speculative_config(load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml").recipe, None)
    assert cfg == {"method": "dflash", "num_speculative_tokens": 7}


@pytest.mark.parametrize(("mean", "rate"), [(0.0, 0.0), (7.0, 1.0)])
def test_a_geometric_mean_at_either_end_gives_exact_rates(mean: float, rate: float) -> None:
    # none or all accepted: vLLM gets exactly 0 or 1, not a rate a hair inside the end
    assert geometric_rates(solve_conditional(mean, 7), 7) == [rate] * 7


def test_a_no_draft_baseline_is_one_override(fixtures_dir: Path) -> None:
    """``--set speculative.method=none`` drops the whole section: the draft, its tokens and the
    synthetic acceptance go with the method."""
    path = fixtures_dir / "recipes" / "h200-synthetic-int4-dflash2-seed-acceptance.yaml"
    assert load_recipe(path).recipe.speculative.synthetic_acceptance is not None
    spec = load_recipe(path, ["speculative.method=none"]).recipe.speculative
    assert (spec.method, spec.num_speculative_tokens, spec.draft) == ("none", 0, None)
    assert spec.synthetic_acceptance is None
    # the same for a quantization: method none takes none of autoround's settings
    quant = load_recipe(path, ["quantization.method=none"]).recipe.quantization
    assert quant.method == "none"
    # another method keeps the section's other settings (dflash2 for dflash: test_recipe_dflash2)
