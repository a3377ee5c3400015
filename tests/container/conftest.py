"""Container tests: a real Docker engine and Docker Compose v2, nothing faked.

tests/container/ci-docker.sh (make test-container) installs the engine, starts a private daemon
and runs these with KIT_REQUIRE_DOCKER=1: then a missing engine fails the run instead of
skipping it. Timings of the slow steps go to build/container-timings.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kit import image
from kit.recipe import LoadedRecipe, load_recipe
from kit.signing import KeyPair, generate_keypair

KIT = str(Path(sys.executable).parent / "kit")
# cpu-tiny with a small protocol, to stay fast on 2 cores (a file, so make targets can use it)
SMALL_RECIPE = """\
extends: ../../recipes/cpu-tiny.yaml
name: cpu-tiny-small
bench:
  warmups: 1
  runs: 2
  prompts:
    - name: narrative
      text: Write a detailed 800-word essay explaining transformer attention.
      max_tokens: 48
    - name: code
      text: Write a Python implementation of quicksort with comments explaining each step.
      max_tokens: 32
  prefill: null
"""


def compose_binary() -> list[str] | None:
    from kit.compose import compose_command
    from kit.errors import KitError

    try:
        return compose_command()
    except KitError:
        return None


def _engine_up() -> bool:
    try:
        image.engine_version()
        return True
    except Exception:
        return False


def _require(ok: bool, what: str) -> None:
    if ok:
        return
    if os.environ.get("KIT_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{what} (KIT_REQUIRE_DOCKER=1)")
    pytest.skip(f"{what}: run make test-container")


@pytest.fixture(scope="session")
def compose_cmd() -> list[str]:
    found = compose_binary()
    _require(found is not None, "Docker Compose v2 is not installed")
    assert found is not None
    return found


@pytest.fixture(scope="session")
def docker_engine(compose_cmd: list[str]) -> None:
    _require(_engine_up(), "no Docker engine")


@pytest.fixture(scope="session")
def timings(repo_root: Path) -> Iterator[dict[str, float]]:
    out: dict[str, float] = {}
    yield out
    path = repo_root / "build" / "container-timings.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    sys.stderr.write(f"\ncontainer timings (s): {json.dumps(out)}\n")


@pytest.fixture(scope="session")
def base_image(docker_engine: None, timings: dict[str, float]) -> image.ImageInfo:
    """The CPU base, made here with debootstrap (not pulled: no registry is reachable)."""
    t0 = time.monotonic()
    info = image.bootstrap_base()
    timings["base_image_s"] = round(time.monotonic() - t0, 1)
    return info


@pytest.fixture(scope="session")
def small_recipe(repo_root: Path) -> Path:
    """cpu-tiny with a small protocol, inside the checkout (compose mounts its directory)."""
    path = repo_root / "build" / "container-test" / "cpu-tiny-small.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SMALL_RECIPE)
    return path


@pytest.fixture(scope="session")
def small(small_recipe: Path) -> LoadedRecipe:
    return load_recipe(small_recipe)


@pytest.fixture(scope="session")
def cpu_image(
    base_image: image.ImageInfo, small: LoadedRecipe, timings: dict[str, float]
) -> image.ImageInfo:
    """The CPU engine image for cpu-tiny, built for real (the host's CA bundle and wheelhouse
    go in as build inputs)."""
    t0 = time.monotonic()
    info = image.build(small, ca_bundle=image.host_ca_bundle(), wheelhouse=image.host_wheelhouse())
    timings["image_build_s"] = round(time.monotonic() - t0, 1)
    return info


@pytest.fixture(scope="session")
def keypair(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return generate_keypair(tmp_path_factory.mktemp("keys"), "ci")


@pytest.fixture(scope="session")
def gpu_recipe(repo_root: Path) -> Path:
    """The seed's GPU recipe (two NVIDIA GPUs)."""
    return repo_root / "recipes" / "club3090-qwen3.8-27b-2x3090-dflash2.yaml"


KitRun = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def run_kit(repo_root: Path) -> KitRun:
    """Runs the kit CLI in the checkout: run_kit(*args, env=None, timeout=1800)."""

    def run(
        *args: str, env: dict[str, str] | None = None, timeout: float = 1800
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KIT, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=repo_root,
            env={**os.environ, **(env or {})},
            check=False,
        )

    return run


@pytest.fixture(scope="session")
def project_containers() -> Callable[[str], list[str]]:
    """``project_containers(project)``: every container of a compose project, running or not."""

    def containers(project: str) -> list[str]:
        out = image.docker(
            ["ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={project}"]
        )
        return out.stdout.split()

    return containers


@pytest.fixture(scope="session")
def make() -> str:
    """The make binary."""
    found = shutil.which("make")
    assert found is not None
    return found
