"""AutoRound placement (quantization.placement): the arguments kit passes to AutoRound, and
that placement is where a build runs, not what it makes: not in the cache key, not a reason to
refuse a comparison, not in the dump of a recipe that does not set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.errors import BadInputError
from kit.model import ModelManifest
from kit.quantize import cache_key, placement_kwargs
from kit.recipe import AutoRoundQuantization, load_recipe
from kit.report.comparability import recipe_diff

SEED = "recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml"


def test_arguments_for_autoround() -> None:
    assert placement_kwargs(None, "cuda") == {
        "device_map": 0, "low_gpu_mem_usage": False, "enable_torch_compile": False,
        "low_cpu_mem_usage": True,
    }  # fmt: skip
    two = {"device_map": [0, 1], "low_gpu_mem_usage": True, "enable_torch_compile": True}
    assert placement_kwargs(two, "cuda")["device_map"] == "0,1"
    assert placement_kwargs({"device_map": "auto"}, "cuda")["device_map"] == "auto"
    assert placement_kwargs(two, "cpu")["device_map"] == "cpu"


def test_the_seed_tunes_for_a_24_gb_card(fixtures_dir: Path) -> None:
    q = load_recipe(fixtures_dir / SEED).recipe.quantization
    assert isinstance(q, AutoRoundQuantization) and q.placement is not None
    assert q.placement.device_map == 0 and q.placement.low_gpu_mem_usage


@pytest.mark.parametrize("value", ["[]", "[0, 0]", "-1", "gpu"])
def test_bad_device_maps(fixtures_dir: Path, value: str) -> None:
    with pytest.raises(BadInputError, match=r"quantization\.placement\.device_map"):
        load_recipe(fixtures_dir / SEED, [f"quantization.placement.device_map={value}"])


def test_placement_is_not_identity(fixtures_dir: Path) -> None:
    plain = load_recipe(fixtures_dir / SEED, ["quantization.placement=null"]).recipe
    placed = load_recipe(fixtures_dir / SEED, ["quantization.placement.device_map=[0, 1]"]).recipe
    assert "placement" not in plain.to_json_dict()["quantization"]
    assert placed.to_json_dict()["quantization"]["placement"]["device_map"] == [0, 1]
    model = ModelManifest.model_construct(identity="x" * 64)  # the key reads its identity only
    for q in (plain.quantization, placed.quantization):
        assert isinstance(q, AutoRoundQuantization)
    keys = {cache_key(model, q, "cal")[0] for q in (plain.quantization, placed.quantization)}  # type: ignore[arg-type]
    assert len(keys) == 1
    assert recipe_diff("quantization", plain.to_json_dict(), placed.to_json_dict()) == []
