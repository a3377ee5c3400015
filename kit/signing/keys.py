"""Ed25519 signing keys: generate a pair, load either half (a public key as PEM or OpenSSH),
write a public key in either form, name a key by its fingerprint, and pick the key a run signs
with."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Literal

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field

from kit.base import StrictModel
from kit.errors import BadInputError
from kit.paths import default_config_dir, default_private_key_path
from kit.signing.canonical import read_limited, read_regular_file, show

log = logging.getLogger(__name__)

_KEY_FILE_MAX = 64 * 1024

_KEY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}\Z")
_OPENSSH = b"ssh-"
_BEGIN = b"-----BEGIN "
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)

PublicKeyFormat = Literal["pem", "openssh"]


class KeyPair(StrictModel):
    """Where ``generate_keypair`` wrote a key pair."""

    private_key: Path = Field(description="Private key, PKCS8 PEM, file mode 0600.")
    public_key: Path = Field(description="Public key, SubjectPublicKeyInfo PEM.")
    fingerprint: str = Field(description="'sha256:' + hex sha256 of the raw public key.")


def generate_keypair(
    dest_dir: Path | None = None, name: str = "kit", *, force: bool = False
) -> KeyPair:
    """Write a new Ed25519 key pair as ``<name>.key`` (mode 0600) and ``<name>.pub``."""
    if not _KEY_NAME.match(name):
        raise BadInputError(
            f"key name {show(name)} is not a plain file name",
            hint="use letters, digits, '.', '_' and '-' only",
        )
    directory = default_config_dir() if dest_dir is None else dest_dir
    private_path, public_path = directory / f"{name}.key", directory / f"{name}.pub"
    if not force:
        for path in (private_path, public_path):
            if path.exists() or path.is_symlink():
                raise BadInputError(
                    f"{path} already exists",
                    hint="add --force to replace it (`kit keys generate --force`); reports "
                    "signed with the old key then verify only against the old public key",
                )
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_new(private_path, private_pem, 0o600, replace=force)
        try:
            _write_new(public_path, public_pem, 0o644, replace=force)
        except OSError:
            private_path.unlink(missing_ok=True)
            raise
    except FileExistsError as e:
        raise BadInputError(
            f"{e.filename} already exists", hint="add --force to replace it"
        ) from None
    except OSError as e:
        raise BadInputError(
            f"cannot write the key pair in {directory}: {e.strerror}",
            hint="write it elsewhere with --dir DIR, or check that folder's permissions",
        ) from None
    return KeyPair(
        private_key=private_path, public_key=public_path, fingerprint=fingerprint(key.public_key())
    )


def _write_new(path: Path, data: bytes, mode: int, *, replace: bool) -> None:
    # O_EXCL: never write through an existing file or symlink; the mode is set at creation.
    if replace:
        path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)  # the umask may have cleared bits; it never adds any
        f.write(data)


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Read an unencrypted Ed25519 private key (PKCS8 PEM) from a file only its owner may
    access: like ssh, kit refuses a key that group or others could read or change."""
    data, mode = read_regular_file(path, _KEY_FILE_MAX, "private key")
    hint = "expected an unencrypted Ed25519 private key in PKCS8 PEM form, as kit generates"
    _one_key(data, path, "private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise BadInputError(f"{path}: the private key is encrypted", hint=hint) from None
    except (ValueError, UnsupportedAlgorithm):
        if b"PUBLIC KEY-----" in data:
            hint = "this is a public key; pass the private key file"
        raise BadInputError(f"{path}: not a readable private key", hint=hint) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInputError(f"{path}: not an Ed25519 key", hint=hint)
    if os.name == "posix" and mode & 0o077:
        raise BadInputError(
            f"{path}: private key is readable by others (mode {mode:04o})",
            hint=f"chmod 600 {path}",
        )
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Read an Ed25519 public key: SubjectPublicKeyInfo PEM, as kit writes it, or one OpenSSH
    line (``ssh-ed25519 AAAA... [comment]``), as ``ssh-keygen`` writes it."""
    data = read_limited(path, _KEY_FILE_MAX, "public key")
    hint = (
        "expected an Ed25519 public key in PEM form, as kit generates (the .pub file), or in "
        "OpenSSH form (ssh-ed25519 AAAA...)"
    )
    _one_key(data, path, "public key")
    key: object
    try:
        if data.lstrip().startswith(_OPENSSH):
            key = serialization.load_ssh_public_key(data.strip())
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        if b"PRIVATE KEY-----" in data:
            hint = "this is a private key: keep it secret and pass the .pub file beside it"
        raise BadInputError(f"{path}: not a readable public key", hint=hint) from None
    if not isinstance(key, Ed25519PublicKey):
        raise BadInputError(f"{path}: not an Ed25519 key", hint=hint)
    return key


def _one_key(data: bytes, path: Path, what: str) -> None:
    """Refuse a key file that holds more than its one key: a second PEM block or OpenSSH line
    (the loaders would take the first and drop the rest unseen), or bytes before or after the
    PEM block. A file with no PEM block is left to the loader to refuse."""
    blocks = data.count(_BEGIN)
    if blocks > 1:
        raise BadInputError(
            f"{path}: {blocks} PEM blocks; a {what} file holds one key",
            hint="keep one key per file: each block runs from its -----BEGIN line to its "
            "-----END line",
        )
    text = data.strip()
    if text.startswith(_OPENSSH) and len(text.splitlines()) > 1:
        raise BadInputError(
            f"{path}: {len(text.splitlines())} lines; an OpenSSH {what} is one line",
            hint="keep one key per file (`ssh-ed25519 AAAA... comment`)",
        )
    found = _PEM_BLOCK.search(data)
    if found is None:
        return
    extra = [
        w
        for w, part in (("before", data[: found.start()]), ("after", data[found.end() :]))
        if part.strip()
    ]
    if extra:
        raise BadInputError(
            f"{path}: bytes {' and '.join(extra)} the PEM block of the {what}",
            hint="a key file is its PEM block alone: keep the lines from -----BEGIN to -----END "
            "and remove the rest",
        )


def public_key_bytes(public_key: Ed25519PublicKey, fmt: PublicKeyFormat = "pem") -> bytes:
    """The public key as SubjectPublicKeyInfo PEM, or as one OpenSSH line with the fingerprint
    as its comment; :func:`load_public_key` reads both."""
    if fmt == "openssh":
        line = public_key.public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        return line + b" kit-" + fingerprint(public_key).encode("ascii") + b"\n"
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def fingerprint(public_key: Ed25519PublicKey) -> str:
    """``sha256:<hex>`` of the raw 32-byte public key; the keyid in envelopes."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def signing_key(path: str | None, sign: bool = True) -> Ed25519PrivateKey | None:
    """The private key to sign with: ``path``, else $KIT_SIGNING_KEY, else the default key
    when it exists; None (an unsigned report) when there is none or signing is off."""
    if not sign:
        return None
    if path:
        return load_private_key(Path(path))
    default = default_private_key_path()
    if default.exists():
        return load_private_key(default)
    log.warning(
        "report: no signing key at %s: the report will be unsigned "
        "(create one with `kit keys generate`)",
        default,
    )
    return None
