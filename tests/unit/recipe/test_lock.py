"""Lock files: ``kit lock`` resolves what a recipe leaves open with the real huggingface_hub
client against a local hub stand-in (tests/hubserver.py, via HF_ENDPOINT), every kit command
applies the lock until the recipe changes, ``--set`` still wins, and a report records each
pin and where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hubserver import HUB_TINY_RECIPE, Hub, serving_hub

from kit.cli import main
from kit.errors import EnvironmentProblem, RecipeError
from kit.lock import resolve_image
from kit.recipe import load_recipe
from kit.recipe.lock import lock_path, pin_sources, read_lock
from kit.report.assemble import new_report


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hub:
    repos = {}
    for repo, files in {
        "kit-test/tiny": {"config.json": '{"architectures": ["Qwen3ForCausalLM"]}'},
        "kit-test/tiny-draft": {"config.json": '{"architectures": ["DFlashDraftModel"]}'},
    }.items():
        root = tmp_path / "hub-files" / repo
        root.mkdir(parents=True)
        for name, text in files.items():
            (root / name).write_text(text)
        repos[repo] = root
    with serving_hub(repos) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


@pytest.fixture
def recipe(tmp_path: Path, fixtures_dir: Path) -> Path:
    path = tmp_path / "recipes" / "hub-tiny.yaml"
    path.parent.mkdir()
    (tmp_path / "recipes" / "cpu-tiny.yaml").write_text(
        (fixtures_dir / "recipes" / "cpu-tiny.yaml").read_text()
    )
    path.write_text(HUB_TINY_RECIPE)
    return path


def test_kit_lock_resolves_through_the_hub_and_every_load_applies_it(
    hub: Hub, recipe: Path
) -> None:
    res = CliRunner().invoke(main, ["lock", str(recipe)])
    assert res.exit_code == 0, res.output
    written = Path(res.stdout.strip())
    assert written == lock_path(recipe) == recipe.with_name("hub-tiny.lock.yaml")
    lock = read_lock(written)
    assert lock is not None
    assert [(p.field, p.value, p.resolved_from) for p in lock.pins] == [
        ("model.revision", hub.sha["kit-test/tiny"], "kit-test/tiny@main"),
        ("speculative.draft.revision", hub.sha["kit-test/tiny-draft"], "kit-test/tiny-draft@main"),
    ]
    assert "GET /api/models/kit-test/tiny" in hub.requests  # the real client asked the hub
    assert lock.recipe_sha256 == load_recipe(recipe, use_lock=False).recipe.sha256()
    loaded = load_recipe(recipe)
    assert loaded.lock_file == written
    assert loaded.recipe.model.revision == hub.sha["kit-test/tiny"]  # type: ignore[union-attr]
    report = new_report(loaded, "20261201T120000Z-abcdef")
    assert [(p.field, p.value, p.source) for p in report.pins] == [
        ("model.revision", hub.sha["kit-test/tiny"], "lock"),
        ("speculative.draft.revision", hub.sha["kit-test/tiny-draft"], "lock"),
    ]
    # --set still wins, and says so
    other = "c" * 40
    pinned = load_recipe(recipe, [f"model.revision={other}"])
    assert pinned.recipe.model.revision == other  # type: ignore[union-attr]
    assert pin_sources(pinned.recipe, pinned.locked, pinned.overrides)[0].source == "set"


def test_a_recipe_changed_since_its_lock_is_refused(hub: Hub, recipe: Path) -> None:
    assert CliRunner().invoke(main, ["lock", str(recipe)]).exit_code == 0
    recipe.write_text(recipe.read_text().replace("name: hub-tiny", "name: hub-tiny-2"))
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe)
    assert info.value.problems == [
        f"{lock_path(recipe)}: recipe_sha256: the recipe changed since it was locked"
    ]
    assert info.value.hint is not None and "kit lock" in info.value.hint


def test_without_a_lock_the_pins_are_unpinned(recipe: Path) -> None:
    loaded = load_recipe(recipe)
    assert loaded.lock_file is None
    assert [p.source for p in new_report(loaded, "r").pins] == ["unpinned", "unpinned"]


def test_an_unknown_repository_is_an_environment_problem(hub: Hub, recipe: Path) -> None:
    recipe.write_text(recipe.read_text().replace("kit-test/tiny-draft", "kit-test/nowhere"))
    res = CliRunner().invoke(main, ["lock", str(recipe)])
    assert res.exit_code == 3
    assert "kit-test/nowhere@main: the hub could not resolve it" in res.stderr
    assert not lock_path(recipe).exists()


def test_a_lock_file_is_not_a_recipe_and_a_bad_one_is_named(hub: Hub, recipe: Path) -> None:
    assert CliRunner().invoke(main, ["lock", str(recipe)]).exit_code == 0
    with pytest.raises(RecipeError, match="a lock file, not a recipe"):
        load_recipe(lock_path(recipe))
    data = json.loads("".join(lock_path(recipe).read_text().splitlines(True)[2:]))
    data["pins"][0]["value"] = 7
    lock_path(recipe).write_text(json.dumps(data))
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe)
    assert info.value.problems == [
        f"{lock_path(recipe)}: pins.0.value: Input should be a valid string"
    ]


def test_an_image_digest_without_docker_is_an_environment_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker CLI on it
    with pytest.raises(EnvironmentProblem, match="no docker CLI to resolve the image's digest"):
        resolve_image("vllm/vllm-openai:v0.28.0")


def test_nothing_to_resolve_writes_no_lock(tmp_path: Path, fixtures_dir: Path) -> None:
    recipe = tmp_path / "tiny.yaml"
    recipe.write_bytes((fixtures_dir / "recipes" / "cpu-tiny.yaml").read_bytes())
    res = CliRunner().invoke(main, ["lock", str(recipe)])
    assert res.exit_code == 0, res.output
    assert res.stdout == ""
    assert res.stderr == f"nothing to resolve: every pin of {recipe} is exact; no lock written\n"
    assert not lock_path(recipe).exists()


def test_a_lock_the_recipe_outgrew_is_removed_when_nothing_is_left_open(
    hub: Hub, recipe: Path
) -> None:
    assert CliRunner().invoke(main, ["lock", str(recipe)]).exit_code == 0
    pinned = recipe.read_text().replace("revision: null", f"revision: {'c' * 40}")
    recipe.write_text(pinned)
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe)
    assert info.value.hint == f"run `kit lock {recipe}` again (or remove {lock_path(recipe).name})"
    # the hint, followed: nothing is open now, so the old lock goes and none is written
    res = CliRunner().invoke(main, ["lock", str(recipe)])
    assert res.exit_code == 0, res.output
    assert res.stderr == (
        f"removed {lock_path(recipe)}: it locked an earlier version of the recipe\n"
        f"nothing to resolve: every pin of {recipe} is exact; no lock written\n"
    )
    assert not lock_path(recipe).exists()
    assert load_recipe(recipe).recipe.model.revision == "c" * 40  # type: ignore[union-attr]


def test_a_bad_lock_names_the_recipe_to_lock_again(hub: Hub, recipe: Path) -> None:
    assert CliRunner().invoke(main, ["lock", str(recipe)]).exit_code == 0
    lock_path(recipe).write_text('{"kind": "kit.lock"}')
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe)
    assert info.value.hint == f"run `kit lock {recipe}` again to rewrite it"


def test_the_no_docker_hint_names_what_works(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker CLI on it
    with pytest.raises(EnvironmentProblem) as info:
        resolve_image("vllm/vllm-openai:v0.28.0")
    assert info.value.hint == (
        "install Docker; or leave the image open with `kit lock RECIPE --no-image` (a native run "
        "does not use it), or pin it in the recipe (server.engine.image: NAME:TAG@sha256:...)"
    )
    assert "--set" not in info.value.hint  # kit lock has none
