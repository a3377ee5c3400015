"""Fixtures of the importer tests: the copies of other tools' result files, and a helper that
imports one into a recipe and checks it with `kit recipe validate`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.importers import ImportedRecipe, import_file
from kit.recipe import Recipe, load_recipe

Imports = Callable[..., tuple[ImportedRecipe, Recipe]]


@pytest.fixture
def foreign(fixtures_dir: Path) -> Path:
    """tests/fixtures/foreign/: vllm/, guidellm/, aiperf/, sglang/, llmperf/, mlperf/."""
    return fixtures_dir / "foreign"


@pytest.fixture
def imports(fixtures_dir: Path, tmp_path: Path) -> Imports:
    """``imports(path, base=None, row=None)``: the file imported into ``tmp_path/<name>.yaml``
    (base: recipes/cpu-tiny.yaml; ``row``: a BENCHMARKS.md row), the recipe checked by `kit
    recipe validate`; the import and the recipe as loaded."""

    def _imports(
        path: Path, base: Path | None = None, row: str | None = None
    ) -> tuple[ImportedRecipe, Recipe]:
        out = tmp_path / f"{path.name}.yaml"
        done = import_file(
            path, base=base or fixtures_dir / "recipes" / "cpu-tiny.yaml", out=out, row=row
        )
        checked = CliRunner().invoke(main, ["recipe", "validate", str(out)])
        assert checked.exit_code == 0, checked.output
        assert checked.stdout.startswith(f"ok: {out} (imported-")
        return done, load_recipe(out).recipe

    return _imports
