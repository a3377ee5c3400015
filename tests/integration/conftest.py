"""Real vLLM CPU servers on the cpu-tiny recipe's AutoRound-INT4 model.

``server`` is shared by the session; ``own_server`` is a test's own, for tests that kill or
break it. Both come from ``start_server``: a free port, /health waited for, and the server log
in the failure if the server dies while booting.

The engine venv, the synthetic model and its quantization are built once and cached in
KIT_HOME (the Makefile sets it to .kit/ in the checkout), so later sessions reuse them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from kit import engine as engine_mod
from kit.build import Built, build
from kit.engine import EngineEnv
from kit.recipe import LoadedRecipe, load_recipe
from kit.serve import NativeRuntime, RunningServer

ServerStarter = Callable[[LoadedRecipe, Path], AbstractContextManager[RunningServer]]


@pytest.fixture(scope="session", autouse=True)
def kit_home_in_checkout(repo_root: Path) -> None:
    """KIT_HOME defaults to .kit/ in the checkout, as under make."""
    os.environ.setdefault("KIT_HOME", str(repo_root / ".kit"))


@pytest.fixture(scope="session")
def cpu_recipe(repo_root: Path) -> LoadedRecipe:
    return load_recipe(repo_root / "recipes" / "cpu-tiny.yaml")


@pytest.fixture(scope="session")
def built(cpu_recipe: LoadedRecipe) -> Built:
    return build(cpu_recipe)


@pytest.fixture(scope="session")
def engine_env(cpu_recipe: LoadedRecipe) -> EngineEnv:
    server = cpu_recipe.recipe.server
    return engine_mod.resolve(server.engine, server.patches)


@pytest.fixture(scope="session")
def pristine_engine(cpu_recipe: LoadedRecipe) -> EngineEnv:
    """The same engine without the patch series: the 'before' of every patch test."""
    return engine_mod.ensure_managed(cpu_recipe.recipe.server.engine, None)


@pytest.fixture(scope="session")
def start_server(built: Built, engine_env: EngineEnv) -> ServerStarter:
    """Starts a server for a recipe (cpu-tiny or a variant of it) on the built model, its log
    in the given directory; the server stops when the returned context exits."""

    def start(loaded: LoadedRecipe, log_dir: Path) -> AbstractContextManager[RunningServer]:
        return NativeRuntime(engine_env).start(
            loaded.recipe, built.served_dir, built.draft_dir, log_dir / "server.log"
        )

    return start


@pytest.fixture(scope="session")
def server(
    cpu_recipe: LoadedRecipe,
    start_server: ServerStarter,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningServer]:
    """The session's server: tests may use it, never stop it."""
    with start_server(cpu_recipe, tmp_path_factory.mktemp("server")) as srv:
        yield srv


@pytest.fixture
def own_server(
    cpu_recipe: LoadedRecipe, start_server: ServerStarter, tmp_path: Path
) -> Iterator[RunningServer]:
    """A server of the test's own, which it may kill."""
    with start_server(cpu_recipe, tmp_path) as srv:
        yield srv
