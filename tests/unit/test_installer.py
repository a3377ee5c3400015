"""kit.installer: pip's package locations passed on to uv, and the pinned uv version."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import tomllib

from kit import installer


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("UV_INDEX_URL", "UV_INDEX_STRATEGY", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)


def test_pip_locations_become_uv_arguments(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    cert = tmp_path / "ca.pem"
    cert.write_text("x")
    args, env = installer.index_options(
        {
            "index-url": "https://mirror.example/simple",
            "extra-index-url": f"file://{tmp_path}/missing https://extra.example/simple",
            "find-links": f"{wheels} {tmp_path}/gone",
            "cert": str(cert),
        }
    )
    assert args == [
        "--index-url",
        "https://mirror.example/simple",
        "--extra-index-url",
        "https://extra.example/simple",
        "--find-links",
        str(wheels),
        # pip takes the best version across its indexes; uv is told to do the same
        "--index-strategy",
        "unsafe-best-match",
    ]
    assert env == {"SSL_CERT_FILE": str(cert)}


def test_no_pip_settings_no_arguments() -> None:
    assert installer.index_options({}) == ([], {})


def test_uv_settings_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("UV_INDEX_URL", "https://uv.example/simple")
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "own.pem"))
    cert = tmp_path / "ca.pem"
    cert.write_text("x")
    args, env = installer.index_options({"index-url": "https://pip.example", "cert": str(cert)})
    assert args == [] and env == {}


def test_pinned_uv_matches_pyproject(repo_root: Path) -> None:
    deps = tomllib.loads((repo_root / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"uv=={installer.UV_VERSION}" in deps


def test_a_venv_made_for_real(tmp_path: Path) -> None:
    python = installer.create_venv(tmp_path / "venv", seed=True)
    out = subprocess.run(
        [str(python), "-c", "import sys, pip; print(sys.prefix)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(out.stdout.strip()) == tmp_path / "venv"
    installer.uninstall(python, ["no-such-package-kit-test"])  # absent: not an error
