"""A peer's own venv: its PyPI package at the pinned version, made once with uv (kit's one
download cache) under ``$KIT_HOME/peers/<package>-<version>-py<XY>``."""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from pathlib import Path

from kit import installer
from kit.paths import display_path, kit_home

log = logging.getLogger(__name__)

MARKER = "kit-peer.json"


def venv_dir(package: str, version: str, variant: str | None = None) -> Path:
    tag = f"{package}-{version}-py{sys.version_info.major}{sys.version_info.minor}"
    return kit_home() / "peers" / (tag + (f"+{variant}" if variant else ""))


def ensure_venv(
    package: str, version: str, extra: list[str] | None = None, variant: str | None = None
) -> Path:
    """The python of the venv holding ``package==version`` (``extra``: more requirements or uv
    arguments, which ``variant`` names in the venv's folder), made now if it is not there (a
    half-made one is made again). Raises InstallError with uv's last lines."""
    root = venv_dir(package, version, variant)
    python = root / "bin" / "python"
    if (root / MARKER).exists() and python.exists():
        return python
    if root.exists():
        shutil.rmtree(root)
    log.info("peers: installing %s==%s into %s (one time)", package, version, display_path(root))
    t0 = time.monotonic()
    installer.create_venv(root)
    installer.install(python, [f"{package}=={version}", *(extra or [])])
    took = round(time.monotonic() - t0, 1)
    (root / MARKER).write_text(json.dumps({"package": package, "version": version, "s": took}))
    log.info("peers: %s installed in %.0f s", package, took)
    return python
