"""kit refuses a private key that group or others may access, as ssh does."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kit import signing
from kit.errors import BadInputError

posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


def test_generated_key_is_private_and_loads(tmp_path: Path) -> None:
    pair = signing.generate_keypair(tmp_path)
    assert stat.S_IMODE(pair.private_key.stat().st_mode) == 0o600
    signing.load_private_key(pair.private_key)


@posix_only
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666, 0o620, 0o601])
def test_key_others_may_access_is_refused(tmp_path: Path, mode: int) -> None:
    path = signing.generate_keypair(tmp_path).private_key
    path.chmod(mode)
    with pytest.raises(BadInputError) as err:
        signing.load_private_key(path)
    assert err.value.message == f"{path}: private key is readable by others (mode {mode:04o})"
    assert err.value.hint == f"chmod 600 {path}"
    path.chmod(0o600)
    signing.load_private_key(path)


@posix_only
@pytest.mark.parametrize("mode", [0o400, 0o600, 0o700])
def test_owner_only_modes_load(tmp_path: Path, mode: int) -> None:
    path = signing.generate_keypair(tmp_path).private_key
    path.chmod(mode)
    signing.load_private_key(path)


@posix_only
def test_mode_is_that_of_the_file_read_through_a_symlink(tmp_path: Path) -> None:
    path = signing.generate_keypair(tmp_path).private_key
    link = tmp_path / "link.key"
    link.symlink_to(path)
    signing.load_private_key(link)  # the link's own mode (0777) does not count
    path.chmod(0o644)
    with pytest.raises(BadInputError, match=r"readable by others \(mode 0644\)"):
        signing.load_private_key(link)


@posix_only
def test_default_signing_key_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = signing.generate_keypair(tmp_path)
    pair.private_key.chmod(0o644)
    monkeypatch.setenv("KIT_SIGNING_KEY", str(pair.private_key))
    with pytest.raises(BadInputError, match="readable by others"):
        signing.signing_key(None)
    with pytest.raises(BadInputError, match="readable by others"):
        signing.signing_key(str(pair.private_key))


@posix_only
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(BadInputError, match="cannot read the private key: not a regular file"):
        signing.load_private_key(fifo)


def test_content_errors_come_before_the_mode(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.key"
    garbage.write_bytes(b"not a key")
    garbage.chmod(0o644)
    with pytest.raises(BadInputError, match="not a readable private key"):
        signing.load_private_key(garbage)
