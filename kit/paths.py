"""Where kit keeps things: the cache root, the config directory, the default signing key, and
how a path is written into a report so that it names no machine; also the one way kit reads a
file it did not write (report, key, recipe, secret), :func:`read_regular`, which never blocks.

Stdlib only: the installer and the CLI's error path import it before anything is installed.
"""

from __future__ import annotations

import os
import stat
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


ELSEWHERE = "…/"  # a path under none of the roots: its last parts only


def display_path(path: Path) -> str:
    """A path for reports, naming no machine: relative to KIT_HOME, else to the working
    directory, else to the user's home. The path is taken as written (made absolute, symlinks
    kept: a venv's ``bin/python`` stays in the venv) and, when that is under no root, with its
    symlinks resolved. A path under none of them (a system python in /usr, a model on a data
    disk) is shown by its last two parts after ``…/``: never absolute. For a path a program
    reads back, use :func:`home_relative`."""
    roots = (
        ("$KIT_HOME/", kit_home()),
        ("./", Path.cwd().resolve()),
        ("~/", Path.home()),
    )
    for candidate in dict.fromkeys((Path(os.path.abspath(path)), path.resolve())):
        for prefix, root in roots:
            for base in dict.fromkeys((Path(os.path.abspath(root)), root.resolve())):
                try:
                    rel = str(candidate.relative_to(base))
                except ValueError:
                    continue
                return prefix.rstrip("/") if rel == "." else prefix + rel
    parts = Path(os.path.abspath(path)).parts[1:]
    return ELSEWHERE + "/".join(parts[-2:])


def home_relative(path: Path) -> str:
    """``$KIT_HOME/...`` for a path under KIT_HOME, else the absolute path: the form a
    container reads back with :func:`from_home_relative` under its own KIT_HOME."""
    try:
        return "$KIT_HOME/" + str(path.resolve().relative_to(kit_home()))
    except ValueError:
        return str(path.resolve())


def from_home_relative(value: str) -> Path:
    """The path :func:`home_relative` wrote, under this process's KIT_HOME."""
    if value.startswith("$KIT_HOME/"):
        return kit_home() / value[len("$KIT_HOME/") :]
    return Path(value)


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


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegularFile(Exception):
    """The path is a FIFO, a directory, a device...: ``kind`` says which."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class FileTooLarge(Exception):
    """Over the limit: ``size`` is the size fstat gave, None when the file grew while read."""

    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size


def read_regular(path: Path, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes (at most ``limit``) of a regular file (a symlink to one is fine) and its
    fstat. Opened non-blocking and checked with fstat before any read, so a FIFO, a device or
    a directory is refused at once (:class:`NotRegularFile`) and an oversize file unread
    (:class:`FileTooLarge`); at most ``limit + 1`` bytes are read in any case. Open and read
    failures raise the ``OSError``; callers turn all three into their own messages."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(
                next((name for test, name in _KINDS if test(info.st_mode)), "not a plain file")
            )
        if info.st_size > limit:
            raise FileTooLarge(info.st_size)
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileTooLarge(None)
    return data, info
