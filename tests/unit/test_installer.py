"""kit.installer: pip's package locations passed on to uv, and the pinned uv version."""

from __future__ import annotations

import hashlib
import http.server
import json
import platform
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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


def test_a_venv_made_for_real(tmp_path: Path) -> None:
    python = installer.create_venv(tmp_path / "venv", seed=True)
    out = subprocess.run(
        [str(python), "-c", "import sys, pip; print(sys.prefix)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(out.stdout.strip()) == tmp_path / "venv"
    installer.uninstall(python, ["no-such-package-kit-test"])  # absent: not an error


# --- the uv bootstrap without pip (stock Debian/Ubuntu python3 has neither pip nor venv) ---


def _wheel(path: Path, binary: bytes) -> str:
    """A wheel laid out as uv's: the binary under uv-VERSION.data/scripts/uv; its sha256."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"uv-{installer.UV_VERSION}.data/scripts/uv", binary)
        zf.writestr(f"uv-{installer.UV_VERSION}.dist-info/RECORD", "")
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def simple_index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 691 simple index on localhost that lists the files in ``files/``."""
    files = tmp_path / "files"
    files.mkdir()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/simple/uv/":
                assert installer.SIMPLE_JSON in self.headers.get("Accept", "")
                listing = {"files": [{"filename": f.name, "url": f"../../files/{f.name}"}
                                     for f in files.iterdir()]}  # fmt: skip
                body, kind = json.dumps(listing).encode(), installer.SIMPLE_JSON
            elif self.path.startswith("/files/") and (files / self.path[7:]).is_file():
                body, kind = (files / self.path[7:]).read_bytes(), "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple", files
    finally:
        server.shutdown()
        server.server_close()


def _pin(name: str, sha: str) -> dict[str, tuple[str, str]]:
    return {platform.machine(): (name, sha)}


def test_uv_from_an_index_without_pip(
    simple_index: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, files = simple_index
    name = f"uv-{installer.UV_VERSION}-py3-none-test.whl"
    sha = _wheel(files / name, b"#!/bin/sh\necho uv-from-index\n")
    monkeypatch.setattr(installer, "_pip_config", lambda: {"index-url": index})
    binary = installer.fetch_uv(tmp_path / "tools", _pin(name, sha))
    assert binary == tmp_path / "tools" / "bin" / "uv"
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True)
    assert out.stdout == "uv-from-index\n"


def test_uv_wheel_with_another_hash_is_refused(
    simple_index: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, files = simple_index
    name = f"uv-{installer.UV_VERSION}-py3-none-test.whl"
    _wheel(files / name, b"#!/bin/sh\necho tampered\n")
    monkeypatch.setattr(installer, "_pip_config", lambda: {"index-url": index})
    with pytest.raises(installer.InstallError) as err:
        installer.fetch_uv(tmp_path / "tools", _pin(name, "0" * 64))
    assert "kit pins " + "0" * 64 in str(err.value) and "hint: install uv" in str(err.value)
    assert not (tmp_path / "tools" / "bin" / "uv").exists()


def test_uv_from_a_find_links_folder_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    name = f"uv-{installer.UV_VERSION}-py3-none-test.whl"
    sha = _wheel(wheels / name, b"#!/bin/sh\necho offline\n")
    # the index is unreachable (a closed port): the wheel folder is tried first and is enough
    monkeypatch.setattr(
        installer, "_pip_config",
        lambda: {"find-links": str(wheels), "index-url": "http://127.0.0.1:9/simple"},
    )  # fmt: skip
    binary = installer.fetch_uv(tmp_path / "tools", _pin(name, sha))
    assert subprocess.run([str(binary)], capture_output=True, text=True).stdout == "offline\n"


def test_uv_bootstrap_failure_names_every_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        installer, "_pip_config", lambda: {"index-url": "http://127.0.0.1:9/simple"}
    )
    with pytest.raises(installer.InstallError) as err:
        installer.fetch_uv(tmp_path / "tools", _pin("uv-x.whl", "0" * 64))
    assert "http://127.0.0.1:9/simple" in str(err.value)
    with pytest.raises(installer.InstallError, match="pins no uv wheel for"):
        installer.fetch_uv(tmp_path / "tools", {"no-such-machine": ("uv-x.whl", "0" * 64)})


def test_pinned_uv_wheels_are_this_version() -> None:
    for name, sha in installer.UV_WHEELS.values():
        assert name.startswith(f"uv-{installer.UV_VERSION}-") and len(sha) == 64


def test_no_pip_means_the_wheel_bootstrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KIT_UV", raising=False)
    monkeypatch.setenv("KIT_HOME", str(tmp_path))
    monkeypatch.setattr(installer.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "uv", None)  # as if this Python had no uv package
    monkeypatch.setattr(installer.importlib.util, "find_spec", lambda name: None)
    called: list[Path] = []
    monkeypatch.setattr(installer, "fetch_uv", lambda target: called.append(target) or target)
    installer.uv_binary()
    assert called == [tmp_path / "tools" / f"uv-{installer.UV_VERSION}"]


def test_cpu_torch_index_only_on_a_stock_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KIT_TORCH_INDEX", raising=False)
    stock = installer.torch_cpu_index({})
    assert stock == [
        "--extra-index-url", installer.TORCH_CPU_INDEX, "--index-strategy", "unsafe-best-match"
    ]  # fmt: skip
    # a machine with its own package locations carries its torch there (and may not reach
    # PyTorch's index, which would fail the whole install)
    assert installer.torch_cpu_index({"find-links": "/opt/wheels"}) == []
    assert installer.torch_cpu_index({"index-url": "https://mirror.example/simple"}) == []
    monkeypatch.setenv("KIT_TORCH_INDEX", "https://torch.example/cpu")
    assert installer.torch_cpu_index({"find-links": "/w"})[:2] == [
        "--extra-index-url", "https://torch.example/cpu"
    ]  # fmt: skip
    monkeypatch.setenv("KIT_TORCH_INDEX", "")
    assert installer.torch_cpu_index({}) == []


def test_index_strategy_is_passed_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(installer, "uv_binary", lambda: "true")
    monkeypatch.setattr(
        installer, "_pip_config", lambda: {"extra-index-url": "https://extra.example/simple"}
    )
    real_run = subprocess.run

    def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        seen.append(list(argv))
        return real_run(["true"], **kw)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(installer.subprocess, "run", run)
    installer.install(tmp_path / "python", ["six", "--index-strategy", "unsafe-best-match"])
    assert seen[0].count("--index-strategy") == 1
    assert "https://extra.example/simple" in seen[0]
