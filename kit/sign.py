"""Signed report files: a report as one DSSE envelope that anyone can check.

A report (a JSON object) is written as RFC 8785 canonical JSON, base64-encoded into a DSSE
envelope (https://github.com/secure-systems-lab/dsse) whose ``payloadType`` is
``REPORT_MEDIA_TYPE``, and signed with Ed25519 over the DSSE pre-authentication encoding of the
exact payload bytes. An unsigned report is the same envelope with ``"signatures": []``. The
envelope itself is canonical JSON too, so every byte of the file has one meaning.

Reading trusts nothing, in this order: the size limit; a bracket-depth scan before any
parsing; the strict envelope shape; strict base64; the signature over the exact payload bytes
(``verify_envelope``); only then is the payload parsed (``load_payload``, same limits) and
required to be in canonical form, so an edit that still parses is caught even without a key.
Every malformed input raises ``BadInputError``; nothing else escapes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field

from kit.errors import BadInputError, VerificationFailed
from kit.paths import default_config_dir

REPORT_MEDIA_TYPE = "application/vnd.kit.report.v1+json"
INTOTO_STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
MAX_BYTES = 32 * 1024 * 1024
MAX_DEPTH = 64
MAX_SAFE_INT = 2**53 - 1  # larger integers are written as strings (JCS numbers are doubles)

_ENVELOPE_KEYS = frozenset({"payloadType", "payload", "signatures"})
_SIGNATURE_KEYS = frozenset({"keyid", "sig"})
_KEY_FILE_MAX = 64 * 1024
_KEYID = re.compile(r"sha256:[0-9a-f]{64}\Z")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z")
_KEY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}\Z")
# A JSON string, or an unterminated one up to the end: every '"' matches at once, so the scan
# stays linear on hostile input (an unterminated string makes the JSON invalid anyway).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = [0] * 256
_BRACKET_STEP[ord("[")] = _BRACKET_STEP[ord("{")] = 1
_BRACKET_STEP[ord("]")] = _BRACKET_STEP[ord("}")] = -1
_DIGITS_MAX = 400  # longer integer literals are refused before int() sees them
_READ_HINT = "ask the sender for the file exactly as kit wrote it"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class KeyPair(_Model):
    """Where ``generate_keypair`` wrote a key pair."""

    private_key: Path = Field(description="Private key, PKCS8 PEM, file mode 0600.")
    public_key: Path = Field(description="Public key, SubjectPublicKeyInfo PEM.")
    fingerprint: str = Field(description="'sha256:' + hex sha256 of the raw public key.")


class Signature(_Model):
    """One DSSE signature."""

    keyid: str = Field(description="Fingerprint of the signing key, 'sha256:<hex>'.")
    sig: bytes = Field(description="Raw 64-byte Ed25519 signature over the PAE of the payload.")


class Envelope(_Model):
    """A DSSE envelope whose shape has been checked; the payload is not yet trusted."""

    payload_type: str = Field(description="Always REPORT_MEDIA_TYPE.")
    payload: bytes = Field(description="The exact payload bytes that were signed.")
    signatures: tuple[Signature, ...] = Field(description="None (unsigned) or one signature.")


class SignatureCheck(_Model):
    """The outcome of checking an envelope's signature; ``valid`` is None when not checked."""

    signed: bool = Field(description="The envelope carries a signature.")
    keyid: str | None = Field(description="The key the signature claims, if signed.")
    key_matches: bool | None = Field(
        description="The claimed key is the given public key; None without a key or signature."
    )
    valid: bool | None = Field(
        description="True: verified. False: unsigned, other key or bad signature. "
        "None: signed but not checked, because no public key was given."
    )
    reason: str = Field(description="One sentence saying why.")


# ---------------------------------------------------------------------------------------------
# keys


def generate_keypair(
    dest_dir: Path | None = None, name: str = "kit", *, force: bool = False
) -> KeyPair:
    """Write a new Ed25519 key pair as ``<name>.key`` (mode 0600) and ``<name>.pub``."""
    if not _KEY_NAME.match(name):
        raise BadInputError(
            f"key name {_show(name)} is not a plain file name",
            hint="use letters, digits, '.', '_' and '-' only",
        )
    directory = default_config_dir() if dest_dir is None else dest_dir
    private_path, public_path = directory / f"{name}.key", directory / f"{name}.pub"
    if not force:
        for path in (private_path, public_path):
            if path.exists() or path.is_symlink():
                raise BadInputError(
                    f"{path} already exists",
                    hint="pass force=True to replace it; reports signed with the old key "
                    "will then only verify against the old public key",
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
        raise BadInputError(f"{e.filename} already exists", hint="pass force=True") from None
    except OSError as e:
        raise BadInputError(f"cannot write the key pair in {directory}: {e.strerror}") from None
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
    """Read an unencrypted Ed25519 private key (PKCS8 PEM)."""
    data = _read_limited(path, _KEY_FILE_MAX, "private key")
    hint = "expected an unencrypted Ed25519 private key in PKCS8 PEM form, as kit generates"
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
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Read an Ed25519 public key (SubjectPublicKeyInfo PEM)."""
    data = _read_limited(path, _KEY_FILE_MAX, "public key")
    hint = "expected an Ed25519 public key in PEM form, as kit generates (the .pub file)"
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        if b"PRIVATE KEY-----" in data:
            hint = "this is a private key: keep it secret and pass the .pub file beside it"
        raise BadInputError(f"{path}: not a readable public key", hint=hint) from None
    if not isinstance(key, Ed25519PublicKey):
        raise BadInputError(f"{path}: not an Ed25519 key", hint=hint)
    return key


def fingerprint(public_key: Ed25519PublicKey) -> str:
    """``sha256:<hex>`` of the raw 32-byte public key; the keyid in envelopes."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


# ---------------------------------------------------------------------------------------------
# canonical JSON


def canonical_bytes(obj: Any, *, max_depth: int = MAX_DEPTH) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value.

    JCS numbers are IEEE doubles, so integers beyond +/-(2**53 - 1) are written as decimal
    strings; NaN and infinities, non-string keys, lone surrogates, non-JSON types and nesting
    deeper than ``max_depth`` raise ``BadInputError`` naming the JSON path.
    """
    data: bytes = rfc8785.dumps(_jcs_value(obj, "$", 0, max_depth))
    return data


def _jcs_value(value: Any, path: str, depth: int, max_depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        _check_text(value, path)
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > MAX_SAFE_INT else value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadInputError(f"{path}: {value} is not a JSON number", hint="use null")
        return value
    if not isinstance(value, (Mapping, list, tuple)):
        raise BadInputError(f"{path}: a {type(value).__name__} is not a JSON value")
    if depth >= max_depth:
        raise BadInputError(f"{path}: nested deeper than {max_depth} levels")
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise BadInputError(f"{path}: key {_show(key)} is not a string")
            child = f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)[:80]}]"
            _check_text(key, child)
            out[key] = _jcs_value(item, child, depth + 1, max_depth)
        return out
    return [_jcs_value(item, f"{path}[{i}]", depth + 1, max_depth) for i, item in enumerate(value)]


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInputError(f"{path}: text with a lone surrogate is not valid Unicode") from None


def _show(value: object, limit: int = 80) -> str:
    # Strangers' text goes into messages escaped and cut short.
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...'"


# ---------------------------------------------------------------------------------------------
# writing


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def sign_report(report: Mapping[str, Any], private_key: Ed25519PrivateKey) -> bytes:
    """File bytes of a signed envelope holding the canonical report."""
    payload = canonical_bytes(_require_object(report))
    signature = {
        "keyid": fingerprint(private_key.public_key()),
        "sig": _b64(private_key.sign(pae(REPORT_MEDIA_TYPE, payload))),
    }
    return _envelope_bytes(payload, [signature])


def unsigned_report(report: Mapping[str, Any]) -> bytes:
    """File bytes of an envelope with ``"signatures": []``: the file says it is unsigned."""
    return _envelope_bytes(canonical_bytes(_require_object(report)), [])


def _require_object(report: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(report, Mapping):
        raise BadInputError(f"a report is a JSON object, not a {type(report).__name__}")
    return report


def _envelope_bytes(payload: bytes, signatures: list[dict[str, str]]) -> bytes:
    data = canonical_bytes(
        {"payloadType": REPORT_MEDIA_TYPE, "payload": _b64(payload), "signatures": signatures}
    )
    if len(data) > MAX_BYTES:  # never write a file that kit itself would refuse to read
        raise BadInputError(f"the report file would be {len(data)} bytes, over {MAX_BYTES}")
    return data


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# ---------------------------------------------------------------------------------------------
# reading


def open_envelope(
    data: bytes, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> Envelope:
    """Check the size, depth and exact shape of an envelope; its payload stays unparsed."""
    raw = _parse_json(data, "the report file", max_bytes, max_depth)
    if not isinstance(raw, dict) or set(raw) != _ENVELOPE_KEYS:
        keys = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise BadInputError(
            f"the report file is not a kit report envelope (found {_show(keys)})",
            hint="expected exactly the keys payloadType, payload and signatures",
        )
    payload_type, signatures = raw["payloadType"], raw["signatures"]
    if payload_type != REPORT_MEDIA_TYPE:
        raise BadInputError(
            f"payloadType is {_show(payload_type)}, not {REPORT_MEDIA_TYPE!r}",
            hint="this envelope does not hold a kit report",
        )
    payload = _b64decode(raw["payload"], "payload")
    if not isinstance(signatures, list) or len(signatures) > 1:
        raise BadInputError("signatures must be a list of at most one signature", hint=_READ_HINT)
    checked = []
    for entry in signatures:
        if not isinstance(entry, dict) or set(entry) != _SIGNATURE_KEYS:
            raise BadInputError("a signature must have exactly keyid and sig", hint=_READ_HINT)
        keyid, sig = entry["keyid"], _b64decode(entry["sig"], "sig")
        if not isinstance(keyid, str) or not _KEYID.match(keyid):
            raise BadInputError(f"keyid {_show(keyid)} is not 'sha256:<64 hex>'", hint=_READ_HINT)
        if len(sig) != 64:
            raise BadInputError(f"sig is {len(sig)} bytes, an Ed25519 signature is 64")
        checked.append(Signature(keyid=keyid, sig=sig))
    if canonical_bytes(raw, max_depth=max_depth) != data:
        raise BadInputError(
            "the report file is not in canonical form: it was reformatted or edited",
            hint="kit writes report files as RFC 8785 canonical JSON; " + _READ_HINT,
        )
    return Envelope(payload_type=payload_type, payload=payload, signatures=tuple(checked))


def open_envelope_file(
    path: Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> Envelope:
    """``open_envelope`` on a file, reading at most ``max_bytes + 1`` bytes of it."""
    data = _read_limited(path, max_bytes, "report file")
    try:
        return open_envelope(data, max_bytes=max_bytes, max_depth=max_depth)
    except BadInputError as e:
        raise BadInputError(f"{path}: {e.message}", hint=e.hint) from None


def verify_envelope(env: Envelope, public_key: Ed25519PublicKey | None) -> SignatureCheck:
    """Check the signature over the exact payload bytes; never parses the payload."""
    if not env.signatures:
        return SignatureCheck(
            signed=False, keyid=None, key_matches=None, valid=False, reason="the report is unsigned"
        )
    keyid, sig = env.signatures[0].keyid, env.signatures[0].sig
    matches: bool | None
    valid: bool | None
    if public_key is None:
        matches, valid = None, None
        reason = f"signed by {keyid}; not checked, because no public key was given"
    elif keyid != (expected := fingerprint(public_key)):
        matches, valid = False, False
        reason = f"signed by {keyid}, not by the given key {expected}"
    else:
        matches, valid = True, _holds(public_key, sig, pae(env.payload_type, env.payload))
        reason = (
            f"valid signature by {keyid}"
            if valid
            else "the signature does not match the payload: the report was altered"
        )
    return SignatureCheck(signed=True, keyid=keyid, key_matches=matches, valid=valid, reason=reason)


def _holds(public_key: Ed25519PublicKey, sig: bytes, message: bytes) -> bool:
    try:
        public_key.verify(sig, message)
    except InvalidSignature:
        return False
    return True


def load_payload(
    env: Envelope, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> dict[str, Any]:
    """Parse the payload (after ``verify_envelope``) and require its canonical form.

    JSON numbers have one kind: a float with an integral value (2.0) reads back as an int (2),
    and an integer beyond +/-(2**53 - 1), which canonical JSON only writes for a double, reads
    back as a float.
    """
    report = _parse_json(env.payload, "the report payload", max_bytes, max_depth)
    if not isinstance(report, dict):
        raise BadInputError(f"the report payload is a {type(report).__name__}, not an object")
    if canonical_bytes(report, max_depth=max_depth) != env.payload:
        raise BadInputError(
            "the report payload is not in canonical form: it was edited after it was written",
            hint="kit writes payloads as RFC 8785 canonical JSON; " + _READ_HINT,
        )
    return report


def read_report(
    data: bytes,
    public_key: Ed25519PublicKey | None = None,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
) -> tuple[dict[str, Any], SignatureCheck]:
    """Open, verify, then parse; with a key, an unsigned or badly signed report raises
    ``VerificationFailed`` before its payload is parsed."""
    env = open_envelope(data, max_bytes=max_bytes, max_depth=max_depth)
    check = verify_envelope(env, public_key)
    if public_key is not None and not check.valid:
        raise VerificationFailed(
            check.reason, hint="the report was not signed by the holder of this key as it stands"
        )
    return load_payload(env, max_bytes=max_bytes, max_depth=max_depth), check


def _parse_json(data: bytes, what: str, max_bytes: int, max_depth: int) -> Any:
    if not isinstance(data, bytes):
        raise BadInputError(f"{what} must be bytes, not {type(data).__name__}")
    if len(data) > max_bytes:
        raise BadInputError(f"{what} is {len(data)} bytes, over the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInputError(f"{what} is not UTF-8 (byte {e.start})", hint=_READ_HINT) from None
    # Depth first, without recursion: strings removed, then the running count of brackets.
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii")
    depth = max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)
    if depth > max_depth:
        raise BadInputError(f"{what} is nested deeper than {max_depth} levels", hint=_READ_HINT)
    try:
        return json.loads(
            text, object_pairs_hook=_unique_keys, parse_int=_parse_int, parse_constant=_no_constant
        )
    except ValueError as e:  # JSONDecodeError, and the hooks below
        raise BadInputError(f"{what} is not valid JSON: {e}", hint=_READ_HINT) from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key in an object")
    return out


def _parse_int(text: str) -> int | float:
    if len(text) > _DIGITS_MAX:
        raise ValueError(f"an integer with more than {_DIGITS_MAX} digits")
    value = int(text)
    return float(value) if abs(value) > MAX_SAFE_INT else value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _b64decode(value: Any, field: str) -> bytes:
    if isinstance(value, str):
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            pass
        else:
            if _b64(data) == value:  # one encoding only: no unused bits, padding as written
                return data
    raise BadInputError(f"{field} is not canonical standard base64", hint=_READ_HINT)


def _read_limited(path: Path, max_bytes: int, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise BadInputError(f"{path}: cannot read the {what}: {e.strerror}") from None
    if len(data) > max_bytes:
        raise BadInputError(f"{path}: the {what} is over the {max_bytes}-byte limit")
    return data


# ---------------------------------------------------------------------------------------------
# in-toto


def intoto_statement(
    subjects: Mapping[str, str], predicate_type: str, predicate: Mapping[str, Any]
) -> dict[str, Any]:
    """An in-toto v1 Statement about files named in ``subjects`` (name -> sha256 hex)."""
    if not subjects:
        raise BadInputError("an in-toto statement needs at least one subject")
    for name, digest in subjects.items():
        if not isinstance(digest, str) or not _SHA256_HEX.match(digest):
            raise BadInputError(f"subject {_show(name)}: digest is not 64 lowercase hex digits")
    if not predicate_type:
        raise BadInputError("an in-toto statement needs a predicate type URI")
    return {
        "_type": INTOTO_STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": d}} for name, d in subjects.items()],
        "predicateType": predicate_type,
        "predicate": dict(predicate),
    }
