"""A peer's own venv: its PyPI package at the pinned version, made once under
``$KIT_HOME/peers/<package>-<version>-py<XY>``: a venv of kit's Python that uv fills with all
of it, or, with ``bench.peers_system_site_packages`` (``KIT_PEERS_SYSTEM_SITE_PACKAGES``), a
venv over the engine's Python's site-packages that pip fills with only what they lack."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kit import installer
from kit.errors import BadInputError
from kit.paths import display_path, kit_home

log = logging.getLogger(__name__)

MARKER = "kit-peer.json"
ENV_SYSTEM = "KIT_PEERS_SYSTEM_SITE_PACKAGES"

# the distributions a package requires, directly or not, that a venv takes from outside itself
# (its system site-packages); run by the venv's python, argv: the packages
_FROM_HOST = r"""
import importlib.metadata as md, json, re, sys
def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()
dists = {}
for dist in md.distributions():  # sys.path order: the venv's own first
    dists.setdefault(norm(dist.metadata["Name"] or ""), dist)
seen, todo = set(), [norm(n) for n in sys.argv[1:]]
while todo:
    name = todo.pop()
    if name in seen or name not in dists:
        continue
    seen.add(name)
    for req in dists[name].requires or []:
        if "extra" in req.partition(";")[2]:  # only with an extra of it
            continue
        todo.append(norm(re.match(r"[A-Za-z0-9._-]+", req.strip()).group()))
outside = [d for n, d in dists.items() if n in seen
           and not str(d.locate_file("")).startswith(sys.prefix + "/")]
print(json.dumps(sorted(f"{d.metadata['Name']}=={d.version}" for d in outside)))
"""


@dataclass(frozen=True)
class Host:
    """The engine's interpreter a tool runs beside (``python``, with ``pythonpath``), its vLLM
    and torch versions, and whether a tool's venv is made over its site-packages
    (``site_packages``)."""

    python: str
    pythonpath: str | None = None
    engine_version: str | None = None
    torch: str | None = None
    site_packages: bool = False


@dataclass(frozen=True)
class Venv:
    """A tool's venv: its python, the interpreter whose site-packages it sees (None: its own
    packages only), and those of them it uses (``name==version``)."""

    python: Path
    system: str | None = None
    host_packages: tuple[str, ...] = ()

    def source(self, package: str, version: str) -> str:
        """Where the tool runs from, in words (the report's ``source``)."""
        if self.system is None:
            return f"PyPI {package}=={version}, its own venv"
        return (
            f"PyPI {package}=={version}, its own venv over the engine's Python's site-packages "
            f"({len(self.host_packages)} of its packages from there)"
        )


def system_site_packages(setting: bool) -> bool:
    """Whether a tool's venv is made over the engine's Python's site-packages: ``$KIT_PEERS_
    SYSTEM_SITE_PACKAGES`` where set (1/0, yes/no, ...), else ``setting`` (the recipe's)."""
    given = os.environ.get(ENV_SYSTEM)
    if given is None:
        return setting
    value = installer.yes_no(given)
    if value is None:
        raise BadInputError(
            f"{ENV_SYSTEM}={given!r} is neither yes nor no",
            hint="set it to 1 (the peers' venvs use the host's packages) or 0 (each its own), "
            "or unset it (the recipe's bench.peers_system_site_packages)",
        )
    return value


def venv_dir(
    package: str, version: str, variant: str | None = None, tag: str | None = None
) -> Path:
    """The venv's folder: ``tag`` the Python's ``XY`` (default: kit's)."""
    tag = tag or f"{sys.version_info.major}{sys.version_info.minor}"
    return (
        kit_home() / "peers" / (f"{package}-{version}-py{tag}" + (f"+{variant}" if variant else ""))
    )


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


def peer_venv(
    package: str,
    version: str,
    host: Host,
    extra: list[str] | None = None,
    variant: str | None = None,
) -> Venv:
    """The venv of ``package==version`` for a run beside ``host``: :func:`ensure_venv`'s, or,
    with ``host.site_packages``, one over the host's site-packages (:func:`over_host`)."""
    if not host.site_packages:
        return Venv(ensure_venv(package, version, extra, variant))
    return over_host(package, version, host.python, extra, variant)


def _run(python: str | Path, args: list[str]) -> str:
    """``python`` run with ``args``, without another interpreter's paths; its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    try:
        proc = subprocess.run(
            [str(python), *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise installer.InstallError(f"{python}: cannot run: {exc}") from None
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise installer.InstallError(f"{python} failed: {why}")
    return proc.stdout


def from_host(python: Path, packages: list[str]) -> tuple[str, ...]:
    """The distributions ``packages`` require, directly or not, that the venv of ``python``
    takes from outside itself, ``name==version``."""
    return tuple(json.loads(_run(python, ["-c", _FROM_HOST, *packages]).strip().splitlines()[-1]))


def over_host(
    package: str,
    version: str,
    system: str,
    extra: list[str] | None = None,
    variant: str | None = None,
) -> Venv:
    """A venv over the site-packages of ``system`` (a Python), holding ``package==version``
    (``extra``: more requirements), made now if it is not there or was made over another
    Python: ``system``'s pip installs only what its packages lack or do not satisfy. Raises
    InstallError with pip's last lines."""
    where = os.path.realpath(shutil.which(system) or system)
    tag = _run(where, ["-c", "import sys; print('%d%d' % sys.version_info[:2])"]).strip()
    root = venv_dir(package, version, f"{variant}+system" if variant else "system", tag)
    python = root / "bin" / "python"
    marker = root / MARKER
    if marker.exists() and python.exists():
        made = json.loads(marker.read_text())
        if made.get("system") == where:
            return Venv(python, where, tuple(made.get("host_packages", [])))
    if root.exists():
        shutil.rmtree(root)
    log.info(
        "peers: installing %s==%s into %s over the site-packages of %s (one time)",
        package, version, display_path(root), display_path(Path(where)),
    )  # fmt: skip
    t0 = time.monotonic()
    installer.system_venv(root, where)
    installer.pip_install(python, [f"{package}=={version}", *(extra or [])])
    used = from_host(python, [package])
    took = round(time.monotonic() - t0, 1)
    marker.write_text(
        json.dumps(
            {"package": package, "version": version, "s": took, "system": where,
             "host_packages": list(used)}
        )
    )  # fmt: skip
    log.info(
        "peers: %s installed in %.0f s, %d of its packages from there", package, took, len(used)
    )
    return Venv(python, where, used)
