"""A key file holds one key and nothing else: bytes before or after its PEM block, a second PEM
block or a second OpenSSH line are refused naming the file (the loaders would take the first
key and drop the rest unseen); whitespace around the block is fine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kit.errors import BadInputError
from kit.signing import fingerprint, load_private_key, load_public_key

PEM_HINT = (
    "a key file is its PEM block alone: keep the lines from -----BEGIN to -----END and remove "
    "the rest"
)
TWO_HINT = "keep one key per file: each block runs from its -----BEGIN line to its -----END line"


def pem_pub(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def ssh_pub(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )


def pem_private(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write(path: Path, data: bytes, mode: int = 0o644) -> Path:
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        (lambda pem: pem + b"garbage\n", "after"),
        (lambda pem: b"note: alice's key\n" + pem, "before"),
        (lambda pem: b"x" + pem + b"y", "before and after"),
    ],
    ids=["after", "before", "both"],
)
def test_bytes_around_the_pem_block_are_refused(tmp_path: Path, extra: object, where: str) -> None:
    key = Ed25519PrivateKey.generate()
    pub = write(tmp_path / "k.pub", extra(pem_pub(key)))  # type: ignore[operator]
    with pytest.raises(BadInputError) as info:
        load_public_key(pub)
    assert (info.value.message, info.value.hint) == (
        f"{pub}: bytes {where} the PEM block of the public key",
        PEM_HINT,
    )
    private = write(tmp_path / "k.key", extra(pem_private(key)), 0o600)  # type: ignore[operator]
    with pytest.raises(BadInputError) as info:
        load_private_key(private)
    assert info.value.message == f"{private}: bytes {where} the PEM block of the private key"


def test_two_keys_in_one_file_are_refused(tmp_path: Path) -> None:
    a, b = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    pub = write(tmp_path / "two.pub", pem_pub(a) + pem_pub(b))
    with pytest.raises(BadInputError) as info:
        load_public_key(pub)
    assert (info.value.message, info.value.hint) == (
        f"{pub}: 2 PEM blocks; a public key file holds one key",
        TWO_HINT,
    )
    private = write(tmp_path / "two.key", pem_private(a) + pem_private(b), 0o600)
    with pytest.raises(BadInputError, match=r"2 PEM blocks; a private key file holds one key"):
        load_private_key(private)
    ssh = write(tmp_path / "two.ssh.pub", ssh_pub(a) + b" a\n" + ssh_pub(b) + b" b\n")
    with pytest.raises(BadInputError) as info:
        load_public_key(ssh)
    assert (info.value.message, info.value.hint) == (
        f"{ssh}: 2 lines; an OpenSSH public key is one line",
        "keep one key per file (`ssh-ed25519 AAAA... comment`)",
    )


def test_one_key_with_whitespace_around_it_loads(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    want = fingerprint(key.public_key())
    for name, data in (
        ("plain.pub", pem_pub(key)),
        ("spaced.pub", b"\n\n" + pem_pub(key) + b"\n  \n"),
        ("crlf.pub", pem_pub(key).replace(b"\n", b"\r\n")),
        ("ssh.pub", ssh_pub(key) + b" alice@lab\n"),
    ):
        assert fingerprint(load_public_key(write(tmp_path / name, data))) == want, name
    private = write(tmp_path / "k.key", b"\n" + pem_private(key) + b"\n", 0o600)
    assert fingerprint(load_private_key(private).public_key()) == want
