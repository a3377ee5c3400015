"""The recipe mount of the compose stack: the containers run as another user than the one who
owns the checkout, so a directory that user cannot read (a 0700 clone) is mounted from a
readable copy of the recipe files, which the loader in the container reads alike."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from kit import compose
from kit.errors import EnvironmentProblem
from kit.recipe import load_recipe


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def private_checkout(tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 0700 checkout: recipes/ and patches/ at its root, a test recipe two levels down that
    extends the repository's cpu-tiny (so the mount is the checkout's root)."""
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kithome"))
    root = tmp_path / "clone"
    (root / "recipes").mkdir(parents=True)
    (root / "patches").mkdir()
    (root / "recipes" / "cpu-tiny.yaml").write_text(
        (fixtures_dir / "recipes" / "cpu-tiny.yaml").read_text()
    )
    test = root / "build" / "t" / "small.yaml"
    test.parent.mkdir(parents=True)
    test.write_text("extends: ../../recipes/cpu-tiny.yaml\nname: small\n")
    root.chmod(0o700)
    return test


def test_a_private_checkout_is_mounted_from_a_readable_copy(private_checkout: Path) -> None:
    loaded = load_recipe(private_checkout)
    values = compose.render(loaded)
    mount = Path(values["KIT_RECIPE_DIR"])
    assert values["KIT_RECIPE_FILE"] == "build/t/small.yaml"
    assert not mount.is_relative_to(private_checkout.parents[2])
    assert mode(mount) == 0o755 and mode(mount / "build" / "t") == 0o755
    assert mode(mount / "build" / "t" / "small.yaml") == 0o644
    assert sorted(p.name for p in mount.iterdir()) == ["build", "patches", "recipes"]
    # what the container's loader makes of the copy: the same recipe
    again = load_recipe(mount / values["KIT_RECIPE_FILE"])
    assert again.recipe.sha256() == loaded.recipe.sha256()
    assert values["KIT_RECIPE_SHA256"] == loaded.recipe.sha256()


def test_a_readable_checkout_is_mounted_as_it_is(private_checkout: Path) -> None:
    root = private_checkout.parents[2]
    root.chmod(0o755)
    values = compose.render(load_recipe(private_checkout))
    assert values["KIT_RECIPE_DIR"] == str(root.resolve())


def test_local_files_in_a_private_checkout_are_refused_with_the_chmod(
    private_checkout: Path,
) -> None:
    model = private_checkout.parent / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    loaded = load_recipe(
        private_checkout,
        ["model={source: local, path: model}", "speculative={method: none}"],
    )
    with pytest.raises(EnvironmentProblem) as info:
        compose.render(loaded)
    assert "the containers' user cannot read this directory (mode 700)" in info.value.message
    assert info.value.hint is not None and info.value.hint.startswith("chmod o+rx ")
