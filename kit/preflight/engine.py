"""The engine's Python, checked before the build (native runs): an interpreter given with
``--engine-python`` or ``KIT_ENGINE_PYTHON`` must run and carry the recipe's engine at its
pinned version (read from its metadata, without importing it: seconds, not the minute an import
of vLLM can take); a managed engine says whether its venv is there or will be made, and with
which Python.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from kit.engine import MARKER, managed_dir
from kit.preflight.check import Check
from kit.recipe import Recipe

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
        root = managed_dir(engine, recipe.server.patches)
        ready = (root / MARKER).exists()
        py = ".".join(map(str, sys.version_info[:3]))
        return Check(
            "engine python",
            True,
            f"managed: {engine.name} {engine.version} "
            + ("installed" if ready else f"to be installed by uv, with Python {py}"),
        )
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
