"""Peer installs without network: pip's no-index and uv's offline mode passed on to uv, kit
adding no index of its own, and a peer's venv over the host's Python's site-packages, where
pip installs only what they lack. Real uv and real pip, on small wheels built here; the
package index is a closed port, so asking it fails (tests/integration/test_peers_offline.py
does the same with the pinned AIPerf, the network cut)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit import installer
from kit.errors import BadInputError
from kit.figures import AGREEMENT_PCT
from kit.peers import PeerJob, PeerRun, Peers
from kit.peers.__main__ import main as peers_main
from kit.peers.install import ENV_SYSTEM, Host, Venv, peer_venv, system_site_packages
from kit.peers.run import summary_notes
from kit.recipe import Bench

CLOSED = "http://127.0.0.1:9/simple"  # nothing listens there: an index asked fails at once


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of package ``name`` (one module), requiring ``requires``."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kit-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    out = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return out


@pytest.fixture()
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip's no-index and a wheel folder (returned, empty), an index that cannot be asked, a
    fresh uv cache and KIT_HOME: what an air-gapped host sets."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_INDEX_URL", CLOSED)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kit"))
    monkeypatch.delenv(ENV_SYSTEM, raising=False)
    return wheels


def test_no_index_gives_uv_the_wheel_folders_alone(tmp_path: Path) -> None:
    config = {
        "index-url": "https://mirror.example/simple",
        "extra-index-url": "https://extra.example/simple",
        "find-links": f"{tmp_path} {tmp_path}/gone",
        "no-index": "true",
    }
    assert installer.index_options(config) == (["--no-index", "--find-links", str(tmp_path)], {})
    assert installer.index_options({**config, "no-index": "0"})[0][:2] == [
        "--index-url", "https://mirror.example/simple"
    ]  # fmt: skip


def test_no_torch_index_is_added_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    assert installer.torch_cpu_index({}) != []  # a stock pip: PyTorch's CPU index
    assert installer.torch_cpu_index({"no-index": "1"}) == []
    monkeypatch.setenv("UV_OFFLINE", "1")
    assert installer.torch_cpu_index({}) == []


def test_yes_no_as_pip_reads_it() -> None:
    assert [installer.yes_no(v) for v in ("1", "True", " yes", "on")] == [True] * 4
    assert [installer.yes_no(v) for v in ("0", "false", "no", "off", "")] == [False] * 5
    assert installer.yes_no("maybe") is None


def test_uv_installs_from_the_wheel_folder_alone(offline: Path) -> None:
    wheel(offline, "kitdemo", "1.0", ("kitdep>=2",))
    wheel(offline, "kitdep", "2.1")
    python = installer.create_venv(offline.parent / "venv")
    installer.install(python, ["kitdemo==1.0"])
    out = subprocess.run(
        [str(python), "-c", "import kitdemo, kitdep; print(kitdemo.VERSION, kitdep.VERSION)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout == "1.0 2.1\n"


def test_uv_offline_mode_installs_from_the_wheel_folder(
    offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PIP_NO_INDEX")
    monkeypatch.setenv("UV_OFFLINE", "1")
    wheel(offline, "kitdemo", "1.0")
    python = installer.create_venv(offline.parent / "venv")
    installer.install(python, ["kitdemo==1.0", *installer.torch_cpu_index()])


def test_a_missing_wheel_is_named(offline: Path) -> None:
    wheel(offline, "kitdemo", "1.0", ("kitdep>=2",))
    python = installer.create_venv(offline.parent / "venv")
    with pytest.raises(installer.InstallError) as err:
        installer.install(python, ["kitdemo==1.0"])
    message = err.value.message
    assert message.startswith(f"could not install kitdemo==1.0 (no-index: only {offline} and ")
    assert "kitdep" in message and "error: " not in message  # uv's own prefix left out
    assert err.value.exit_code == 3
    assert err.value.hint is not None and "PIP_FIND_LINKS=DIR" in err.value.hint


def _has_pip_and_venv() -> bool:
    base = getattr(sys, "_base_executable", sys.executable)
    probe = [base, "-c", "import pip, venv"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


needs_base_pip = pytest.mark.skipif(
    not _has_pip_and_venv(), reason="this Python's base interpreter has no pip or venv module"
)


@needs_base_pip
def test_a_venv_over_the_host_installs_only_what_it_lacks(offline: Path) -> None:
    # kitdemo needs pip, which the host has and the wheel folder does not
    wheel(offline, "kitdemo", "1.0", ("pip", "kitdep"))
    wheel(offline, "kitdep", "2.1")
    host = Host(python=sys.executable, site_packages=True)
    venv = peer_venv("kitdemo", "1.0", host)
    assert venv.system is not None and venv.python.parent.parent.name.endswith("+system")
    assert [p.split("==")[0] for p in venv.host_packages] == ["pip"]
    own = {p.name.split("-")[0] for p in venv.python.parent.parent.glob("lib/*/site-packages/*")}
    assert {"kitdemo", "kitdep"} <= own and "pip" not in own
    assert "over the engine's Python's site-packages (1 of its packages" in venv.source(
        "kitdemo", "1.0"
    )
    assert peer_venv("kitdemo", "1.0", host) == venv  # made once


@needs_base_pip
def test_over_the_host_a_missing_wheel_is_named(offline: Path) -> None:
    wheel(offline, "kitdemo", "1.0", ("kitdep>=2",))
    with pytest.raises(installer.InstallError) as err:
        peer_venv("kitdemo", "1.0", Host(python=sys.executable, site_packages=True))
    assert "kitdep" in err.value.message and "no-index" in err.value.message
    assert err.value.exit_code == 3


def test_the_variable_decides_over_the_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SYSTEM, raising=False)
    assert system_site_packages(True) is True and system_site_packages(False) is False
    monkeypatch.setenv(ENV_SYSTEM, "0")
    assert system_site_packages(True) is False
    monkeypatch.setenv(ENV_SYSTEM, "yes")
    assert system_site_packages(False) is True
    job = PeerJob(
        url="http://127.0.0.1:1", model="m", tokenizer=Path("t"), out_dir=Path("o"),
        python=sys.executable, bench=Bench(peers_system_site_packages=False), torch="2.11.0",
    )  # fmt: skip
    assert job.host == Host(python=sys.executable, torch="2.11.0", site_packages=True)
    monkeypatch.setenv(ENV_SYSTEM, "maybe")
    with pytest.raises(BadInputError, match="KIT_PEERS_SYSTEM_SITE_PACKAGES='maybe'"):
        job.host  # noqa: B018


def test_the_recipe_setting_keeps_old_hashes() -> None:
    # a late field: at its default it is left out of the recipe's JSON, so of its hash
    assert "peers_system_site_packages" in Bench.late_fields
    assert Bench(peers_system_site_packages=True).peers_system_site_packages


def test_install_command_fails_with_exit_3_naming_the_package(offline: Path) -> None:
    result = CliRunner().invoke(peers_main, ["install", "aiperf"])
    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("hint: put the wheels it names into a folder pip's find-links")
    assert any(
        line.startswith("error: could not install aiperf==0.13.0 (no-index: only ")
        for line in lines
    )
    assert any("aiperf" in line and "unsatisfiable" in line for line in lines)


def test_the_report_says_which_packages_came_from_the_host() -> None:
    run = PeerRun(
        tool="guidellm", name="guidellm", version="0.8.1",
        source=Venv(Path("p"), "py", ("torch==2.11.0+cu130", "numpy==2.4.6")).source(
            "guidellm", "0.8.1"
        ),
        host_packages=["torch==2.11.0+cu130", "numpy==2.4.6"],
    )  # fmt: skip
    block = Peers(
        tolerance_pct=AGREEMENT_PCT, rule="", kit_definitions={}, kit=[], runs=[run], agree=None
    )
    assert run.source == (
        "PyPI guidellm==0.8.1, its own venv over the engine's Python's site-packages "
        "(2 of its packages from there)"
    )
    assert summary_notes(block) == [
        "guidellm 0.8.1 ran in a venv over the engine's Python's site-packages, 2 of its "
        "packages from there (torch==2.11.0+cu130, numpy==2.4.6; the peers block lists them)"
    ]
