"""kit.recipe.protocol: the reference protocol and a bench's departures from it."""

from __future__ import annotations

from pathlib import Path

from kit.recipe import REFERENCE_PROMPTS, Bench, departures, load_recipe


def test_prompt_order_is_not_a_departure() -> None:
    assert departures(Bench(prompts=list(reversed(REFERENCE_PROMPTS)))) == []


def test_departures_name_each_difference(fixtures_dir: Path) -> None:
    recipe = load_recipe(fixtures_dir / "recipes/cpu-tiny.yaml").recipe
    reasons = departures(recipe.bench)
    assert reasons[0] == "ignore_eos: runs generate to max_tokens whatever the model says"
    assert "prompt 'narrative': max_tokens 256 (reference 1000)" in reasons
    assert recipe.canonical is False
