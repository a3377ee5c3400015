"""bench.quality and reference.quality in a recipe: on by default without changing any
recipe's hash, off with null, and bad settings as `file: field: message`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.errors import RecipeError
from kit.recipe import load_recipe, shown_recipe


def test_set_or_off_is_in_the_hash(fixtures_dir: Path) -> None:
    path = fixtures_dir / "recipes" / "cpu-tiny.yaml"
    base = load_recipe(path).recipe.sha256()
    off = load_recipe(path, ["bench.quality=null"]).recipe
    assert off.bench.quality is None and off.sha256() != base
    k5 = load_recipe(path, ["bench.quality.top_k=5"]).recipe
    assert shown_recipe(k5)["bench"]["quality"]["top_k"] == 5 and k5.sha256() != base


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "bench.quality.garbage_perplexity_ratio=1.2",
            "--set bench.quality.garbage_perplexity_ratio=1.2: bench.quality: "
            "garbage_perplexity_ratio 1.2 must be above max_perplexity_ratio 1.5",
        ),
        (
            "bench.quality.top_k=30",
            "--set bench.quality.top_k=30: bench.quality.top_k: Input should be less than or "
            "equal to 20",
        ),
        (
            "bench.quality.refrence=none",
            "--set bench.quality.refrence=none: bench.quality.refrence: unknown key (did you "
            "mean 'reference'?)",
        ),
        (
            "bench.quality.reference=gpu",
            "--set bench.quality.reference=gpu: bench.quality.reference: Input should be "
            "'auto', 'transformers' or 'none'",
        ),
    ],
)
def test_bad_settings_are_named(fixtures_dir: Path, override: str, message: str) -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", [override])
    assert str(err.value) == message


def test_reference_scores_are_pinned_by_sha256(fixtures_dir: Path, tmp_path: Path) -> None:
    text = (fixtures_dir / "recipes" / "cpu-tiny.yaml").read_text()
    line = text.count("\n") + 5  # the sha256's line, below
    text += (
        "reference:\n  source: x\n  quality:\n    path: r.json\n    sha256: abc\n    source: y\n"
    )
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as err:
        load_recipe(path)
    assert str(err.value) == (
        f"{path}:{line}:5: reference.quality.sha256: String should match pattern '^[0-9a-f]{{64}}$'"
    )
