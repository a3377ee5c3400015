"""What every suite shares: the checkout's root.

Only this file locates it. Tests take the ``repo_root`` fixture; what would otherwise be needed
at a test module's level (parametrizing over recipes/, patches/, ...) is a parametrized
fixture here, ``every_recipe`` and the like, over a constant of this file. (A test module
cannot import this file: pytest keeps one top-level ``conftest`` module at a time, the last
one loaded.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
SERIES_DIRS = sorted((ROOT / "patches").iterdir())
EXAMPLE_REPORTS = sorted((ROOT / "examples" / "reports").glob("*.report.json"))
VLLM_BENCH_RESULTS = sorted((ROOT / "tests" / "fixtures" / "vllm-bench").glob("*.json"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout: recipes/, patches/, schemas/, tests/fixtures/ ..."""
    return ROOT


@pytest.fixture(params=RECIPES, ids=lambda p: p.name)
def every_recipe(request: pytest.FixtureRequest) -> Path:
    """Each recipe file of recipes/ in turn: a test that takes it runs once per recipe."""
    path: Path = request.param
    return path


@pytest.fixture(params=SERIES_DIRS, ids=lambda p: p.name)
def every_series(request: pytest.FixtureRequest) -> Path:
    """Each directory of patches/ (a patch series) in turn."""
    path: Path = request.param
    return path


@pytest.fixture(params=EXAMPLE_REPORTS, ids=lambda p: p.name)
def every_example_report(request: pytest.FixtureRequest) -> Path:
    """Each signed example report of examples/reports/ in turn."""
    path: Path = request.param
    return path


@pytest.fixture(params=VLLM_BENCH_RESULTS, ids=lambda p: p.name)
def every_vllm_bench_result(request: pytest.FixtureRequest) -> Path:
    """Each `vllm bench serve` result recorded in tests/fixtures/vllm-bench/ in turn."""
    path: Path = request.param
    return path
