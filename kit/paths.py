"""Where kit keeps things: the cache root, the config directory, the default signing key, and
how a path is written into a report so that it names no machine.

Stdlib only: the installer and the CLI's error path import it before anything is installed.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_HOME = "KIT_HOME"
ENV_CONFIG_DIR = "KIT_CONFIG_DIR"
ENV_SIGNING_KEY = "KIT_SIGNING_KEY"


def kit_home() -> Path:
    """Root of kit's caches: ``$KIT_HOME``, else ``$XDG_CACHE_HOME/kit``, else ~/.cache/kit."""
    env = os.environ.get(ENV_HOME)
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return (base / "kit").resolve()


def display_path(path: Path) -> str:
    """A path for reports: relative to KIT_HOME, else to the working directory, else to the
    user's home, so reports name no machine's absolute paths where it can be helped. The path
    is taken as written (made absolute, symlinks kept: a venv's ``bin/python`` stays in the
    venv) and, when that is under no root, with its symlinks resolved."""
    roots = (
        ("$KIT_HOME/", kit_home()),
        ("./", Path.cwd().resolve()),
        ("~/", Path.home()),
    )
    for candidate in dict.fromkeys((Path(os.path.abspath(path)), path.resolve())):
        for prefix, root in roots:
            for base in dict.fromkeys((Path(os.path.abspath(root)), root.resolve())):
                try:
                    return prefix + str(candidate.relative_to(base))
                except ValueError:
                    continue
    return str(path.resolve())


def default_config_dir() -> Path:
    """``$KIT_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/kit``, else ``~/.config/kit``."""
    if value := os.environ.get(ENV_CONFIG_DIR):
        return Path(value).expanduser()
    if value := os.environ.get("XDG_CONFIG_HOME"):
        return Path(value).expanduser() / "kit"
    return Path.home() / ".config" / "kit"


def default_private_key_path() -> Path:
    """``$KIT_SIGNING_KEY`` (e.g. a mounted secret), else ``kit.key`` in the config dir."""
    if value := os.environ.get(ENV_SIGNING_KEY):
        return Path(value).expanduser()
    return default_config_dir() / "kit.key"
