"""A real vLLM CPU server for the session: the cpu-tiny recipe's AutoRound-INT4 model.

The engine venv, the synthetic model and its quantization are built once and cached in
KIT_HOME (the Makefile sets it to .kit/ in the checkout), so later sessions reuse them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit import engine as engine_mod
from kit.engine import EngineEnv
from kit.pipeline import Built, build
from kit.recipe import LoadedRecipe, load_recipe
from kit.serve import NativeRuntime, RunningServer

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("KIT_HOME", str(ROOT / ".kit"))


@pytest.fixture(scope="session")
def cpu_recipe() -> LoadedRecipe:
    return load_recipe(ROOT / "recipes" / "cpu-tiny.yaml")


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
def server(
    cpu_recipe: LoadedRecipe,
    built: Built,
    engine_env: EngineEnv,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningServer]:
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    runtime = NativeRuntime(engine_env)
    with runtime.start(cpu_recipe.recipe, built.served_dir, built.draft_dir, log_path) as srv:
        yield srv
