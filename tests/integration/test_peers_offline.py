"""A peer installed on a host without network, for real: the network cut by a Linux network
namespace (``ip netns``), AIPerf at kit's pin from a local wheel folder that pip downloaded
beforehand (its whole closure, about 230 MB, kept in pytest's cache), uv's cache empty. Made as
``python -m kit.peers install aiperf`` makes it with ``PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR``: in
a venv of its own (uv), and over the host's Python's site-packages (pip,
``KIT_PEERS_SYSTEM_SITE_PACKAGES=1``); without the wheels, exit 3 with ``error:``/``hint:``
lines naming what is missing. Skipped where ``ip netns`` cannot be used (not root, no
iproute2), or the wheels cannot be downloaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.peers.aiperf import VERSION as AIPERF

pytestmark = pytest.mark.integration

TAG = f"py{sys.version_info.major}{sys.version_info.minor}"


@pytest.fixture(scope="module")
def offline() -> Iterator[list[str]]:
    """The command prefix that runs a command with no network but loopback's (down)."""
    if sys.platform != "linux" or shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2) to cut the network with")
    name = f"kit-offline-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"`ip netns add` refused (it needs root): {made.stderr.strip()}")
    try:
        prefix = ["ip", "netns", "exec", name]
        probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            pytest.skip(f"`ip netns exec` refused: {probe.stderr.strip()}")
        yield prefix
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


@pytest.fixture(scope="module")
def wheels(request: pytest.FixtureRequest) -> Path:
    """Every wheel AIPerf needs on this Python, downloaded once (with network) by pip."""
    folder = request.config.cache.mkdir(f"wheels-aiperf-{AIPERF}-{TAG}")
    done = folder / ".complete"
    if not done.exists():
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
             "--only-binary", ":all:", "-d", str(folder), f"aiperf=={AIPERF}"],
            capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.skip(f"cannot download AIPerf's wheels: {proc.stderr.strip()[-300:]}")
        done.write_text("")
    return folder


def install(
    offline: list[str], tmp_path: Path, wheels: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m kit.peers install aiperf`` with the network cut, pip's no-index and
    ``wheels``, a fresh KIT_HOME and uv cache."""
    environ = {k: v for k, v in os.environ.items() if k != "KIT_PEERS_SYSTEM_SITE_PACKAGES"}
    environ.update(
        KIT_HOME=str(tmp_path / "kit"), UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels), **env,
    )  # fmt: skip
    argv = [*offline, sys.executable, "-m", "kit.peers", "install", "aiperf"]
    return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=1800)


def imports_aiperf(offline: list[str], python: str) -> str:
    """The AIPerf version ``python`` imports, with the network cut."""
    code = "import aiperf, importlib.metadata as m; print(m.version('aiperf'))"
    out = subprocess.run(
        [*offline, python, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return out.stdout.strip()


def test_a_venv_of_its_own_from_the_wheels_alone(
    offline: list[str], wheels: Path, tmp_path: Path
) -> None:
    proc = install(offline, tmp_path, wheels)
    assert proc.returncode == 0, proc.stderr
    (made,) = json.loads(proc.stdout)
    assert made["source"] == f"PyPI aiperf=={AIPERF}, its own venv"
    assert made["python"] == str(tmp_path / "kit" / "peers" / f"aiperf-{AIPERF}-{TAG}/bin/python")
    assert made["host_packages"] == []
    assert imports_aiperf(offline, made["python"]) == AIPERF


def test_a_venv_over_the_hosts_packages(offline: list[str], wheels: Path, tmp_path: Path) -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    if subprocess.run([base, "-c", "import pip, venv"], capture_output=True).returncode != 0:
        pytest.skip("this Python's base interpreter has no pip or venv module")
    proc = install(offline, tmp_path, wheels, KIT_PEERS_SYSTEM_SITE_PACKAGES="1")
    assert proc.returncode == 0, proc.stderr
    (made,) = json.loads(proc.stdout)
    root = tmp_path / "kit" / "peers" / f"aiperf-{AIPERF}-{TAG}+system"
    assert made["python"] == str(root / "bin" / "python")
    taken = made["host_packages"]
    assert taken, "AIPerf took none of the host's packages"
    assert made["source"].endswith(f"site-packages ({len(taken)} of its packages from there)")
    # what the host has and satisfies is not installed again
    own = {p.name.lower() for p in root.glob("lib/python*/site-packages/*.dist-info")}
    for entry in taken:
        name, version = entry.split("==")
        assert f"{name.lower().replace('-', '_')}-{version}.dist-info" not in own
    assert imports_aiperf(offline, made["python"]) == AIPERF


def test_without_the_wheels_exit_3_naming_what_is_missing(
    offline: list[str], tmp_path: Path
) -> None:
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    proc = install(offline, tmp_path, empty)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    error = [line for line in lines if line.startswith("error: ")]
    assert error[0] == (
        f"error: could not install aiperf=={AIPERF} (no-index: only {empty} and uv's cache are "
        "looked at):"
    )
    assert any("aiperf was not found in the provided package locations" in e for e in error)
    assert lines[-1].startswith("hint: put the wheels it names into a folder pip's find-links")
