"""The trust store: the public keys whose signatures kit accepts without ``--key``.

Layout: the directory ``trusted/`` in kit's config dir (:func:`kit.paths.default_config_dir`),
one file per key, ``<name>.pub``, holding the key as SubjectPublicKeyInfo PEM exactly as kit
writes public keys; the name is the file's stem. Nothing else lives there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import Field

from kit.base import StrictModel
from kit.errors import BadInputError
from kit.paths import default_config_dir
from kit.signing.canonical import show
from kit.signing.envelope import Candidate, Envelope, SignatureCheck, check_signatures
from kit.signing.keys import fingerprint, load_public_key

TRUST_DIR = "trusted"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}\Z")
_FINGERPRINT_PREFIX = re.compile(r"sha256:[0-9a-f]{4,64}\Z")
_MAX_KEYS = 1000


class TrustedKey(StrictModel):
    """One key of the trust store."""

    name: str = Field(description="The file stem in the trust store.")
    fingerprint: str = Field(description="'sha256:<hex>' of the raw public key, recomputed.")
    path: Path = Field(description="The key's file in the trust store.")


class TrustStore(StrictModel):
    """The public keys trusted to sign reports; see the module docstring for the layout."""

    directory: Path = Field(description="The trust store directory (``<config>/trusted``).")
    threshold: int = Field(
        default=1, ge=1, description="Signatures by distinct trusted keys a report needs."
    )

    @classmethod
    def default(cls) -> TrustStore:
        """The store in kit's config dir."""
        return cls(directory=default_config_dir() / TRUST_DIR)

    def _entries(self) -> list[tuple[TrustedKey, Ed25519PublicKey]]:
        try:
            paths = sorted(p for p in self.directory.iterdir() if p.name.endswith(".pub"))
        except FileNotFoundError:
            return []
        except OSError as e:
            raise BadInputError(
                f"cannot read the trust store {self.directory}: {e.strerror}",
                hint="check that folder's permissions, or point KIT_CONFIG_DIR at another",
            ) from None
        if len(paths) > _MAX_KEYS:
            raise BadInputError(
                f"the trust store {self.directory} holds over {_MAX_KEYS} keys",
                hint="remove those you no longer trust with `kit keys untrust NAME`",
            )
        out = []
        for path in paths:
            try:
                key = load_public_key(path)
            except BadInputError as e:
                raise BadInputError(
                    f"trust store: {e.message}",
                    hint=f"remove it with `kit keys untrust {path.name[:-4]}`",
                ) from None
            # the fingerprint is never stored, it is recomputed from the key each time, so
            # renaming or editing a file cannot make it vouch for another key
            out.append(
                (TrustedKey(name=path.name[:-4], fingerprint=fingerprint(key), path=path), key)
            )
        return out

    def trusted(self) -> list[TrustedKey]:
        """Every trusted key, by name."""
        return [entry for entry, _ in self._entries()]

    def add_own(self, public_key_path: Path) -> TrustedKey:
        """Trust a key this install just made, under its file stem, or under the stem and the
        fingerprint's first digits when that name is taken by another key (an older pair)."""
        stem = public_key_path.stem
        taken = {entry.name for entry in self.trusted()}
        fp = fingerprint(load_public_key(public_key_path))
        for entry in self.trusted():
            if entry.fingerprint == fp:
                return entry
        name = stem if stem not in taken else f"{stem}-{fp.removeprefix('sha256:')[:12]}"
        return self.add(public_key_path, name)

    def add(self, public_key_path: Path, name: str | None = None) -> TrustedKey:
        """Trust the Ed25519 public key in ``public_key_path`` under ``name`` (default: the
        file's stem; letters, digits, '.', '_' and '-'). Trusting a key already trusted returns
        its entry unchanged. The directory is created mode 0700, files 0644 and never written
        through an existing file or symlink."""
        key = load_public_key(public_key_path)
        fp = fingerprint(key)
        name = public_key_path.stem if name is None else name
        if not _NAME.match(name):
            raise BadInputError(
                f"key name {show(name)} is not a plain file name",
                hint="use letters, digits, '.', '_' and '-' only (--name NAME)",
            )
        for entry in self.trusted():
            if entry.fingerprint == fp:
                return entry
            if entry.name == name:
                raise BadInputError(
                    f"the name {name!r} is already trusted for another key {entry.fingerprint}",
                    hint="pick another name with --name, or `kit keys untrust` the old one",
                )
        pem = key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        path = self.directory / f"{name}.pub"
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
        except FileExistsError:
            raise BadInputError(
                f"{path} already exists", hint="pick another name with --name"
            ) from None
        except OSError as e:
            raise BadInputError(
                f"cannot write {path}: {e.strerror}",
                hint="check that folder's permissions, or point KIT_CONFIG_DIR at another",
            ) from None
        return TrustedKey(name=name, fingerprint=fp, path=path)

    def remove(self, name_or_fingerprint: str) -> TrustedKey:
        """Stop trusting the key with this name, or this fingerprint or a unique prefix of it
        (``sha256:3f2a``, at least 4 hex digits; a trailing ``...`` is ignored); returns what
        was removed. A prefix that more than one key has is refused, naming them."""
        if not name_or_fingerprint.startswith("sha256:") and _NAME.match(name_or_fingerprint):
            path = self.directory / f"{name_or_fingerprint}.pub"
            if path.is_file() and not path.is_symlink():
                # by name: works even for an unreadable file, so a broken entry can be removed
                try:
                    fp = fingerprint(load_public_key(path))
                except BadInputError:
                    fp = "unreadable"
                path.unlink()
                return TrustedKey(name=name_or_fingerprint, fingerprint=fp, path=path)
        prefix = name_or_fingerprint.rstrip(".…").lower()
        if _FINGERPRINT_PREFIX.match(prefix):
            matches = [e for e in self.trusted() if e.fingerprint.startswith(prefix)]
            if len(matches) == 1:
                matches[0].path.unlink()
                return matches[0]
            if matches:
                raise BadInputError(
                    f"{prefix} is the start of {len(matches)} trusted keys' fingerprints: "
                    + ", ".join(f"{e.name} ({e.fingerprint})" for e in matches),
                    hint="give more of the fingerprint, or the key's name",
                )
        raise BadInputError(
            f"no trusted key named {show(name_or_fingerprint)}",
            hint="`kit keys list` shows the trusted keys by name and fingerprint",
        )

    def find(self, keyid: str) -> tuple[TrustedKey, Ed25519PublicKey] | None:
        """The trusted key whose fingerprint is ``keyid``, if any."""
        for entry, key in self._entries():
            if entry.fingerprint == keyid:
                return entry, key
        return None

    def verify(self, env: Envelope) -> SignatureCheck:
        """Check the envelope's signatures against the trusted keys: valid when at least
        ``threshold`` distinct trusted keys verify one; untrusted (not checked) when none of
        the signatures names or is verified by a trusted key.

        Authentication is by the key itself: a signature's keyid is only a hint of which
        trusted key to try (one without a keyid, or naming none, is tried with each), and the
        envelope is accepted when signatures by ``threshold`` distinct trusted keys verify
        (:func:`kit.signing.envelope.check_signatures`); the keyid alone never counts.
        Signatures no trusted key verifies give an untrusted check (not checked,
        ``untrusted=True``), which readers refuse unless told to allow it."""
        candidates = [
            Candidate(key, entry.fingerprint, entry.name) for entry, key in self._entries()
        ]
        return check_signatures(env, candidates, self.threshold)
