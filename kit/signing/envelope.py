"""DSSE envelopes around report payloads: seal (signed or marked unsigned), open, check.

A payload is carried as base64 in a DSSE envelope
(https://github.com/secure-systems-lab/dsse) whose ``payloadType`` is ``REPORT_MEDIA_TYPE``, and
signed with Ed25519 over the DSSE pre-authentication encoding of the exact payload bytes. An
unsigned payload is the same envelope with ``"signatures": []``. The envelope is canonical JSON
too, so every byte of the file has one meaning.

Opening trusts nothing, in this order: the size limit; a bracket-depth scan before any parsing;
the strict envelope shape; strict base64 (standard or URL-safe, as DSSE requires verifiers to
accept; one encoding only); the signature over the exact payload bytes
(:func:`verify_envelope`); only then is the payload parsed (:func:`load_payload`, same limits)
and required to be in canonical form, so an edit that still parses is caught even without a
key. Every malformed input raises ``BadInputError``; nothing else escapes.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field

from kit.base import StrictModel
from kit.errors import BadInputError, VerificationFailed
from kit.signing.canonical import (
    MAX_DEPTH,
    READ_HINT,
    canonical_bytes,
    is_canonical,
    parse_json,
    read_limited,
    show,
)
from kit.signing.keys import fingerprint

REPORT_MEDIA_TYPE = "application/vnd.kit.report.v1+json"
MAX_BYTES = 32 * 1024 * 1024

_ENVELOPE_KEYS = frozenset({"payloadType", "payload", "signatures"})
_SIGNATURE_KEYS = frozenset({"keyid", "sig"})
_KEYID = re.compile(r"sha256:[0-9a-f]{64}\Z")


class Signature(StrictModel):
    """One DSSE signature."""

    keyid: str = Field(description="Fingerprint of the signing key, 'sha256:<hex>'.")
    sig: bytes = Field(description="Raw 64-byte Ed25519 signature over the PAE of the payload.")


class Envelope(StrictModel):
    """A DSSE envelope whose shape has been checked; the payload is not yet trusted."""

    payload_type: str = Field(description="Always REPORT_MEDIA_TYPE.")
    payload: bytes = Field(description="The exact payload bytes that were signed.")
    signatures: tuple[Signature, ...] = Field(description="None (unsigned) or one signature.")


class SignatureCheck(StrictModel):
    """The outcome of checking an envelope's signature; ``valid`` is None when not checked."""

    signed: bool = Field(description="The envelope carries a signature.")
    keyid: str | None = Field(description="The key the signature claims, if signed.")
    key_matches: bool | None = Field(
        description="The claimed key is the given public key; None without a key or signature."
    )
    valid: bool | None = Field(
        description="True: verified. False: unsigned, other key or bad signature. "
        "None: signed but not checked, because the key is neither given nor trusted."
    )
    reason: str = Field(description="One sentence saying why.")
    untrusted: bool = Field(
        default=False,
        description="Signed by a key that was neither given nor trusted: not checked.",
    )
    signer: str | None = Field(
        default=None, description="Name of the trusted key that verified it (trust store)."
    )


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


def open_envelope(
    data: bytes, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> Envelope:
    """Check the size, depth and exact shape of an envelope; its payload stays unparsed."""
    raw = parse_json(data, "the report file", max_bytes, max_depth, max_containers=8)
    if not isinstance(raw, dict) or set(raw) != _ENVELOPE_KEYS:
        keys = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise BadInputError(
            f"the report file is not a kit report envelope (found {show(keys)})",
            hint="expected exactly the keys payloadType, payload and signatures",
        )
    payload_type, signatures = raw["payloadType"], raw["signatures"]
    if payload_type != REPORT_MEDIA_TYPE:
        raise BadInputError(
            f"payloadType is {show(payload_type)}, not {REPORT_MEDIA_TYPE!r}",
            hint="this envelope does not hold a kit report",
        )
    payload = _b64decode(raw["payload"], "payload")
    if not isinstance(signatures, list) or len(signatures) > 1:
        raise BadInputError("signatures must be a list of at most one signature", hint=READ_HINT)
    checked = []
    for entry in signatures:
        if not isinstance(entry, dict) or set(entry) != _SIGNATURE_KEYS:
            raise BadInputError("a signature must have exactly keyid and sig", hint=READ_HINT)
        keyid, sig = entry["keyid"], _b64decode(entry["sig"], "sig")
        if not isinstance(keyid, str) or not _KEYID.match(keyid):
            raise BadInputError(f"keyid {show(keyid)} is not 'sha256:<64 hex>'", hint=READ_HINT)
        if len(sig) != 64:
            raise BadInputError(f"sig is {len(sig)} bytes, an Ed25519 signature is 64")
        checked.append(Signature(keyid=keyid, sig=sig))
    if not _canonical_envelope(raw, data, max_depth):
        raise BadInputError(
            "the report file is not in canonical form: it was reformatted or edited",
            hint="kit writes report files as RFC 8785 canonical JSON; " + READ_HINT,
        )
    return Envelope(payload_type=payload_type, payload=payload, signatures=tuple(checked))


def open_envelope_file(
    path: Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> Envelope:
    """``open_envelope`` on a file, reading at most ``max_bytes + 1`` bytes of it."""
    data = read_limited(path, max_bytes, "report file")
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
        return SignatureCheck(
            signed=True,
            keyid=keyid,
            key_matches=None,
            valid=None,
            reason=f"signed by an untrusted key {keyid}; trust it with `kit keys trust`",
            untrusted=True,
        )
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
    report = parse_json(env.payload, "the report payload", max_bytes, max_depth)
    if not isinstance(report, dict):
        raise BadInputError(f"the report payload is a {type(report).__name__}, not an object")
    if not is_canonical(report, env.payload):
        raise BadInputError(
            "the report payload is not in canonical form: it was edited after it was written",
            hint="kit writes payloads as RFC 8785 canonical JSON; " + READ_HINT,
        )
    return report


def _b64decode(value: Any, field: str) -> bytes:
    # DSSE verifiers accept standard and URL-safe base64; either way one encoding only: the
    # alphabet not mixed, no unused bits, padding as written. Checked on the last quantum rather
    # than by encoding the whole payload again.
    if isinstance(value, str) and value.isascii() and len(value) % 4 == 0:
        for altchars, other in ((None, "-_"), (b"-_", "+/")):
            if any(char in value for char in other):
                continue
            try:
                data = base64.b64decode(value, altchars=altchars, validate=True)
            except (binascii.Error, ValueError):
                continue
            last = len(data) - 3 * (len(value) // 4 - 1)  # the bytes of the last quantum
            if not value or base64.b64encode(data[-last:], altchars=altchars) == value[-4:].encode(
                "ascii"
            ):
                return data
    raise BadInputError(
        f"{field} is not canonical base64 (standard or URL-safe, padded)", hint=READ_HINT
    )


def _canonical_envelope(raw: dict[str, Any], data: bytes, max_depth: int) -> bool:
    """Whether ``data`` is the canonical form of the envelope ``raw``, whose payload is checked
    base64 (ASCII, nothing to escape): the rest is compared with the canonical form of ``raw``
    without its payload, and the payload in place, a slice at a time, so the file is not
    written out again beside itself."""
    payload: str = raw["payload"]
    skeleton = canonical_bytes({**raw, "payload": ""}, max_depth=max_depth)
    head = b'{"payload":"'
    if len(data) != len(skeleton) + len(payload) or not skeleton.startswith(head):
        return False
    if not (data.startswith(head) and data.endswith(skeleton[len(head) :])):
        return False
    view, step = memoryview(data)[len(head) : len(head) + len(payload)], 1 << 20
    return all(
        view[at : at + step] == payload[at : at + step].encode("ascii")
        for at in range(0, len(payload), step)
    )


def read_payload(
    data: bytes,
    public_key: Ed25519PublicKey | None = None,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
) -> tuple[dict[str, Any], SignatureCheck]:
    """Open, verify, then parse a payload; with a key, an unsigned or badly signed report raises
    ``VerificationFailed`` before its payload is parsed."""
    env = open_envelope(data, max_bytes=max_bytes, max_depth=max_depth)
    check = verify_envelope(env, public_key)
    if public_key is not None and not check.valid:
        raise VerificationFailed(
            check.reason, hint="the report was not signed by the holder of this key as it stands"
        )
    return load_payload(env, max_bytes=max_bytes, max_depth=max_depth), check
