"""The engine's Python, checked before the build (native runs): an interpreter given with
``--engine-python`` or ``KIT_ENGINE_PYTHON`` must run and carry the recipe's engine at its
pinned version; a managed engine says whether its venv is there or will be made, and with which
Python, and one still to be made whether its package indexes answer (:func:`install_check`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from kit import engine as engine_mod
from kit.engine import MARKER, managed_dir
from kit.preflight.check import Check
from kit.recipe import Engine, Recipe

# the engine's version read from its metadata, without importing it: seconds, not the minute an
# import of vLLM can take
_VERSIONS = """
import importlib.metadata as md, json, sys
try:
    version = md.version(sys.argv[1])
except md.PackageNotFoundError:
    version = None
print(json.dumps({"python": sys.version.split()[0], "engine": version}))
"""


def engine_python_check(recipe: Recipe, python: str | None = None) -> Check:
    engine = recipe.server.engine
    given = python or os.environ.get("KIT_ENGINE_PYTHON")
    if not given:
        if (managed_dir(engine, recipe.server.patches) / MARKER).exists():
            return Check(
                "engine python", True, f"managed: {engine.name} {engine.version} installed"
            )
        return install_check(engine)
    path = shutil.which(given) or given
    hint = f"install {engine.name}=={engine.version} for {given}, or let kit manage the engine"
    try:
        proc = subprocess.run(
            [path, "-c", _VERSIONS, engine.name],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("engine python", False, f"{given}: cannot run ({exc})", hint)
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("engine python", False, f"{given}: did not answer ({tail})", hint)
    installed = found.get("engine")
    where = f"{given} (Python {found.get('python')})"
    if installed is None:
        return Check("engine python", False, f"{where}: {engine.name} is not installed", hint)
    if installed != engine.version:
        return Check(
            "engine python",
            False,
            f"{where}: {engine.name} {installed}, the recipe pins {engine.version}",
            hint,
        )
    return Check("engine python", True, f"{where}: {engine.name} {installed}")


def install_check(engine: Engine) -> Check:
    """A managed engine still to be installed: whether the package indexes uv would ask
    answer. Each is asked (a HEAD request, seconds): an index that cannot serve is a problem,
    one that does not answer in time is not checked, and offline (pip's no-index, UV_OFFLINE)
    nothing is asked: not checked."""
    py = ".".join(map(str, sys.version_info[:3]))
    what = f"managed: {engine.name} {engine.version} to be installed by uv, with Python {py}"
    sources = engine_mod.package_sources(engine)
    if sources.offline:
        wheels = ", ".join(sources.find_links) or "uv's cache alone"
        return Check(
            "engine python",
            None,
            f"{what}; offline mode ({sources.offline}): no index asked, the wheels come from "
            f"{wheels}",
            f"offline, the install takes {engine.name}=={engine.version} and its dependencies "
            f"from {wheels}: nothing checks that they are there before it runs",
        )
    answers = engine_mod.ask_indexes(sources)
    shown = "; ".join(f"index {a.url}: {a.detail}" for a in answers)
    fix = (
        "check the network, or point PIP_INDEX_URL or UV_INDEX_URL (or pip's index-url: pip "
        "config list) at an index this machine reaches; or install the engine yourself and "
        "pass --engine-python"
    )
    if any(a.ok is False for a in answers):
        return Check("engine python", False, f"{what}; {shown}", fix)
    if any(a.ok is None for a in answers):
        return Check("engine python", None, f"{what}; {shown}", fix)
    return Check("engine python", True, f"{what}; {shown}")
