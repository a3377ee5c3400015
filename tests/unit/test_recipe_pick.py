"""kit recipe pick: the recipe `make reproduce` runs on this rig, from the cards and each
recipe's rig: block."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import BadInputError, EnvironmentProblem
from kit.preflight import Card
from kit.preflight.rig import meets, pick
from kit.recipe import Rig, load_recipe

SEED = "club3090-qwen3.8-27b-2x3090-dflash2.yaml"
ONE_CARD = "syvai-qwen3.8-27b-1x3090-dflash2.yaml"


def cards(n: int, gib: float, name: str = "NVIDIA GeForce RTX 3090") -> list[Card]:
    return [Card(index=i, name=name, memory_gib=gib) for i in range(n)]


@pytest.mark.parametrize(
    ("rig", "expected"),
    [
        (cards(2, 24.0), SEED),
        (cards(1, 24.0), ONE_CARD),
        # a 24 GB card that NVML shows a little under 24 GiB still counts
        (cards(1, 23.99, "NVIDIA GeForce RTX 4090"), ONE_CARD),
        # more cards or bigger ones than a recipe needs: the one that uses the most cards
        (cards(4, 80.0, "NVIDIA H100 80GB HBM3"), SEED),
        (cards(1, 140.0, "NVIDIA H200"), ONE_CARD),
        # two unequal cards: only the big one counts for the seed's rig
        ([Card(0, "RTX 3090", 24.0), Card(1, "RTX 3060", 12.0)], ONE_CARD),
        ([], "cpu-tiny.yaml"),
    ],
)
def test_the_recipe_for_each_rig(fixtures_dir: Path, rig: list[Card], expected: str) -> None:
    chosen = pick(fixtures_dir / "recipes", rig, None if rig else "no NVML")
    assert chosen.path == fixtures_dir / "recipes" / expected


def test_no_recipe_for_the_rig_lists_every_recipe_and_its_needs(fixtures_dir: Path) -> None:
    with pytest.raises(EnvironmentProblem) as err:
        pick(fixtures_dir / "recipes", cards(1, 16.0, "NVIDIA RTX A4000"))
    lines = err.value.message.splitlines()
    assert lines[0].endswith("is made for this rig: 1 x NVIDIA RTX A4000 16 GiB")
    listed = {line.split()[0].rsplit("/", 1)[-1]: line for line in lines[1:]}
    recipes = sorted(p.name for p in (fixtures_dir / "recipes").glob("*.yaml"))
    assert sorted(listed) == [r for r in recipes if not r.endswith(".lock.yaml")]
    assert listed[SEED].endswith("2 x >= 24 GiB")
    assert listed[ONE_CARD].endswith("1 x >= 24 GiB")
    assert "only when named" in listed["h200-synthetic-int4-dflash.yaml"]
    assert "no GPU" in listed["cpu-tiny.yaml"]
    assert "make reproduce RECIPE=" in err.value.hint


def test_auto_false_is_never_picked(tmp_path: Path, fixtures_dir: Path) -> None:
    text = (fixtures_dir / "recipes" / ONE_CARD).read_text()
    (tmp_path / "lent.yaml").write_text(
        text.replace("  memory_gib: 24\n", "  memory_gib: 24\n  auto: false\n")
    )
    with pytest.raises(EnvironmentProblem, match="only when named"):
        pick(tmp_path, cards(1, 24.0))


def test_a_broken_recipe_does_not_stop_the_pick(tmp_path: Path, fixtures_dir: Path) -> None:
    (tmp_path / "a-broken.yaml").write_text("schema_version: 1\nname: [\n")
    (tmp_path / ONE_CARD).write_text((fixtures_dir / "recipes" / ONE_CARD).read_text())
    (tmp_path / "x.lock.yaml").write_text("not a recipe")
    assert pick(tmp_path, cards(1, 24.0)).path == tmp_path / ONE_CARD


def test_memory_slack_is_three_percent() -> None:
    rig = Rig(gpus=1, memory_gib=24)
    assert meets(rig, cards(1, 23.3)) and not meets(rig, cards(1, 23.2))
    assert not meets(Rig(gpus=2, memory_gib=24), cards(1, 48.0))


def test_rig_is_checked_against_the_recipe(fixtures_dir: Path) -> None:
    with pytest.raises(
        BadInputError, match=r"rig.gpus 1 is fewer than server.tensor_parallel_size 2"
    ):
        load_recipe(fixtures_dir / "recipes" / SEED, ["rig.gpus=1"])
    with pytest.raises(BadInputError, match="rig: is for GPU recipes"):
        load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", ["rig.gpus=1", "rig.memory_gib=8"])


def test_a_recipe_without_rig_keeps_its_sha256(fixtures_dir: Path) -> None:
    loaded = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    assert "rig" not in loaded.recipe.to_json_dict()
    assert load_recipe(fixtures_dir / "recipes" / SEED).recipe.to_json_dict()["rig"] == {
        "gpus": 2, "memory_gib": 24.0, "auto": True
    }  # fmt: skip


def test_cli_prints_the_path_and_says_why(
    fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(fixtures_dir)
    res = CliRunner().invoke(main, ["recipe", "pick", "--rig", "2x24"])
    assert res.exit_code == 0, res.output
    assert res.stdout == f"recipes/{SEED}\n"
    assert "meet club3090-qwen3.8-27b-2x3090-dflash2's rig (2 x >= 24 GiB)" in res.stderr
    res = CliRunner().invoke(main, ["recipe", "pick", "--rig", "1x8"])
    assert res.exit_code == 3 and res.stdout == ""
    res = CliRunner().invoke(main, ["recipe", "pick", "--dir", "no-such-dir"])
    assert res.exit_code == 2 and "--dir no-such-dir: no such directory" in res.stderr
