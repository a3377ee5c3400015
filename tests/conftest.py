"""What every suite shares: the checkout's root.

Only this file locates it. Tests take the ``repo_root`` fixture; what would otherwise be needed
at a test module's level (parametrizing over recipes/) is a parametrized fixture here,
``every_recipe``, over a constant of this file. (A test module cannot import this file:
pytest keeps one top-level ``conftest`` module at a time, the last one loaded.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout: recipes/, patches/, schemas/, tests/fixtures/ ..."""
    return ROOT


@pytest.fixture(params=RECIPES, ids=lambda p: p.name)
def every_recipe(request: pytest.FixtureRequest) -> Path:
    """Each recipe file of recipes/ in turn: a test that takes it runs once per recipe."""
    path: Path = request.param
    return path
