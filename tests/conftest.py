"""What every suite shares: the checkout's root, tests/fixtures/, and a private kit config dir.

Only this file locates them. Unit tests take ``fixtures_dir`` (they read no file outside
tests/, and tests/unit/conftest.py refuses them ``repo_root``); the suites that check or run
the checkout itself (tests/repo, integration, container) take ``repo_root``. What would
otherwise be needed at a test module's level (parametrizing over recipes/, patches/, ...) is a
parametrized fixture here, ``every_recipe`` and the like, over a constant of this file. (A test
module cannot import this file: pytest keeps one top-level ``conftest`` module at a time, the
last one loaded.)

``KIT_HYPOTHESIS_SCALE=N`` runs every Hypothesis property test with N times the examples its
own settings give it (``-m hypothesis`` selects them all): a deeper search than every run's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
RECIPES = sorted(p for p in (ROOT / "recipes").glob("*.yaml") if not p.name.endswith(".lock.yaml"))
SERIES_DIRS = sorted((ROOT / "patches").iterdir())
EXAMPLE_REPORTS = sorted((ROOT / "examples" / "reports").glob("*.report.json"))
VLLM_BENCH_RESULTS = sorted((FIXTURES / "vllm-bench").glob("*.json"))
FOREIGN_RESULTS = sorted(  # result files of other tools (not their README or provenance)
    p
    for p in (FIXTURES / "foreign").rglob("*")
    if p.is_file() and p.suffix != ".md" and not p.name.startswith(".")
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``KIT_HYPOTHESIS_SCALE=N``: each property test's max_examples times N, once per test
    function (its parametrized items share it)."""
    given = os.environ.get("KIT_HYPOTHESIS_SCALE", "1")
    if not given.isdigit() or int(given) < 1:
        raise pytest.UsageError(f"KIT_HYPOTHESIS_SCALE={given!r}: a whole number of 1 or more")
    if given == "1":
        return
    done: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        test = getattr(test, "__func__", test)  # a method's function
        if not getattr(test, "is_hypothesis_test", False) or id(test) in done:
            continue
        done.add(id(test))
        # the settings that @given and @settings leave on the test, where Hypothesis reads them
        own = test._hypothesis_internal_use_settings
        test._hypothesis_internal_use_settings = settings(
            own, max_examples=own.max_examples * int(given)
        )


@pytest.fixture(scope="session", autouse=True)
def private_config_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """kit's config dir (trust store, redaction secret, default signing key) for the whole run,
    in a temporary directory: no test reads or writes the user's ~/.config/kit."""
    given = os.environ.get("KIT_CONFIG_DIR")
    path = Path(given) if given else tmp_path_factory.mktemp("kit-config")
    os.environ["KIT_CONFIG_DIR"] = str(path)
    yield path
    if given is None:
        os.environ.pop("KIT_CONFIG_DIR", None)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout: recipes/, patches/, schemas/, tests/fixtures/ ... (not for tests/unit)."""
    return ROOT


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """tests/fixtures/: recorded inputs, and copies of the repository files that tests read
    (recipes/, a patch series, example reports, measured results)."""
    return FIXTURES


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


@pytest.fixture(params=FOREIGN_RESULTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def every_foreign_result(request: pytest.FixtureRequest) -> Path:
    """Each result file of another tool in tests/fixtures/foreign/ in turn."""
    path: Path = request.param
    return path
