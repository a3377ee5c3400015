"""DSSE envelopes around report payloads: seal (signed or marked unsigned), open, check.

A payload is carried as base64 in a DSSE envelope
(https://github.com/secure-systems-lab/dsse) whose ``payloadType`` is ``REPORT_MEDIA_TYPE``, and
signed with Ed25519 over the DSSE pre-authentication encoding of the exact payload bytes.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

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

MAX_SIGNATURES = 16  # co-signatures an envelope may carry
_MAX_SIG_BYTES = 1024  # another tool's co-signature may use another algorithm
_ENVELOPE_KEYS = frozenset({"payloadType", "payload", "signatures"})
_SIGNATURE_KEYS = frozenset({"keyid", "sig"})
_KEYID = re.compile(r"[\x21-\x7e]{1,256}\Z")


class Signature(StrictModel):
    """One DSSE signature."""

    keyid: str | None = Field(
        description="The signer's hint of its key (kit: its fingerprint); None when absent."
    )
    sig: bytes = Field(description="Raw signature over the PAE of the payload (Ed25519: 64 bytes).")


class Envelope(StrictModel):
    """A DSSE envelope whose shape has been checked; the payload is not yet trusted."""

    payload_type: str = Field(description="The payloadType, REPORT_MEDIA_TYPE for a report.")
    payload: bytes = Field(description="The exact payload bytes that were signed.")
    signatures: tuple[Signature, ...] = Field(
        description=f"None (unsigned) up to {MAX_SIGNATURES} signatures (co-signed)."
    )


class Candidate(NamedTuple):
    """A public key a reader accepts signatures from: the key, its fingerprint (the keyid kit
    writes) and its trust-store name, if any."""

    key: Ed25519PublicKey
    fingerprint: str
    name: str | None = None


class SignatureCheck(StrictModel):
    """The outcome of checking an envelope's signature; ``valid`` is None when not checked."""

    signed: bool = Field(description="The envelope carries a signature.")
    keyid: str | None = Field(
        description="The first key that verified, else the first keyid claimed, if signed."
    )
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
    keyids: tuple[str, ...] = Field(
        default=(), description="Fingerprints of the distinct keys whose signatures verified."
    )
    signers: tuple[str, ...] = Field(
        default=(), description="Trust-store names of those keys, where they have one."
    )


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def sign_report(report: Mapping[str, Any], private_key: Ed25519PrivateKey) -> bytes:
    """File bytes of a signed envelope holding the canonical report."""
    return sign_payload(canonical_bytes(_require_object(report)), private_key)


def sign_payload(
    payload: bytes, private_key: Ed25519PrivateKey, payload_type: str = REPORT_MEDIA_TYPE
) -> bytes:
    """File bytes of a canonical envelope holding ``payload``, signed with ``private_key``."""
    signature = {
        "keyid": fingerprint(private_key.public_key()),
        "sig": _b64(private_key.sign(pae(payload_type, payload))),
    }
    return _envelope_bytes(payload, [signature], payload_type)


def unsigned_report(report: Mapping[str, Any]) -> bytes:
    """File bytes of an envelope with ``"signatures": []``: the file says it is unsigned. An
    unsigned payload is otherwise the same envelope as a signed one."""
    return _envelope_bytes(canonical_bytes(_require_object(report)), [])


def _require_object(report: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(report, Mapping):
        raise BadInputError(f"a report is a JSON object, not a {type(report).__name__}")
    return report


def _envelope_bytes(
    payload: bytes, signatures: list[dict[str, str]], payload_type: str = REPORT_MEDIA_TYPE
) -> bytes:
    data = canonical_bytes(
        {"payloadType": payload_type, "payload": _b64(payload), "signatures": signatures}
    )
    if len(data) > MAX_BYTES:  # never write a file that kit itself would refuse to read
        raise BadInputError(
            f"the report file would be {len(data)} bytes, over {MAX_BYTES}",
            hint="a smaller run (fewer runs, points or requests in bench:) fits kit's limit",
        )
    return data


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def open_envelope(
    data: bytes,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    payload_type: str = REPORT_MEDIA_TYPE,
) -> Envelope:
    """Check the size, depth and shape of an envelope in any JSON formatting; its payload stays
    unparsed. Signatures may omit ``keyid``; there may be up to :data:`MAX_SIGNATURES`. kit
    writes the envelope as canonical JSON; readers take it in any JSON formatting, as DSSE
    allows (docs/signing.md)."""
    raw = parse_json(
        data,
        "the report file",
        max_bytes,
        max_depth,
        max_containers=3 + MAX_SIGNATURES,  # one over: the count is then named
    )
    if not isinstance(raw, dict) or set(raw) != _ENVELOPE_KEYS:
        keys = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise BadInputError(
            f"the report file is not a kit report envelope (found {show(keys)})",
            hint="expected exactly the keys payloadType, payload and signatures",
        )
    found_type, signatures = raw["payloadType"], raw["signatures"]
    if found_type != payload_type:
        raise BadInputError(
            f"payloadType is {show(found_type)}, not {payload_type!r}",
            hint="this envelope does not hold a kit report"
            if payload_type == REPORT_MEDIA_TYPE
            else f"expected an envelope of {payload_type}",
        )
    payload = _b64decode(raw["payload"], "payload")
    if not isinstance(signatures, list) or len(signatures) > MAX_SIGNATURES:
        raise BadInputError(
            f"signatures must be a list of at most {MAX_SIGNATURES} signatures", hint=READ_HINT
        )
    return Envelope(
        payload_type=found_type,
        payload=payload,
        signatures=tuple(_signature(entry) for entry in signatures),
    )


def _signature(entry: Any) -> Signature:
    if not isinstance(entry, dict) or "sig" not in entry or not set(entry) <= _SIGNATURE_KEYS:
        raise BadInputError("a signature must have sig, and keyid or nothing else", hint=READ_HINT)
    keyid, sig = entry.get("keyid"), _b64decode(entry["sig"], "sig")
    if keyid == "":  # DSSE: an empty keyid is no keyid
        keyid = None
    if keyid is not None and (not isinstance(keyid, str) or not _KEYID.match(keyid)):
        raise BadInputError(
            f"keyid {show(keyid)} is not up to 256 printable ASCII characters", hint=READ_HINT
        )
    if not 0 < len(sig) <= _MAX_SIG_BYTES:
        raise BadInputError(f"sig is {len(sig)} bytes, not 1 to {_MAX_SIG_BYTES}", hint=READ_HINT)
    return Signature(keyid=keyid, sig=sig)


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
    """Check the signatures against one given key (None: no key, so untrusted); never parses
    the payload. Valid when that key verifies one of them."""
    given = (
        []
        if public_key is None
        else [Candidate(key=public_key, fingerprint=fingerprint(public_key))]
    )
    return check_signatures(env, given, given=public_key is not None)


def check_signatures(
    env: Envelope, candidates: Sequence[Candidate], threshold: int = 1, *, given: bool = False
) -> SignatureCheck:
    """DSSE verification: valid when signatures by at least ``threshold`` distinct keys of
    ``candidates`` verify over the PAE of the payload. A keyid is only a hint: a signature is
    tried with the candidate its keyid names, else (no keyid, or one naming none of them) with
    each candidate. ``given``: the candidates are keys the caller named (``--key``), not a
    store, so a signature none of them verifies fails instead of being untrusted."""
    if not env.signatures:
        return SignatureCheck(
            signed=False, keyid=None, key_matches=None, valid=False, reason="the report is unsigned"
        )
    message = pae(env.payload_type, env.payload)
    accepted: dict[str, Candidate] = {}
    for signature in env.signatures:
        named = [c for c in candidates if c.fingerprint == signature.keyid]
        for candidate in named or candidates:
            if candidate.fingerprint not in accepted and _holds(
                candidate.key, signature.sig, message
            ):
                accepted[candidate.fingerprint] = candidate
                break
    claimed = [s.keyid for s in env.signatures if s.keyid is not None]
    if accepted:
        return _accepted(list(accepted.values()), threshold, given=given)
    first = claimed[0] if claimed else None
    known = {c.fingerprint for c in candidates}
    if given:
        expected = candidates[0].fingerprint if candidates else "none"
        if claimed and not known.intersection(claimed):
            reason = f"signed by {', '.join(claimed)}, not by the given key {expected}"
            return SignatureCheck(
                signed=True, keyid=first, key_matches=False, valid=False, reason=reason
            )
        reason = "the signature does not match the payload: the report was altered"
        return SignatureCheck(
            signed=True, keyid=first, key_matches=True, valid=False, reason=reason
        )
    if known.intersection(claimed):
        return SignatureCheck(
            signed=True,
            keyid=next(k for k in claimed if k in known),
            key_matches=None,
            valid=False,
            reason="the signature does not match the payload: the report was altered",
        )
    who = ", ".join(claimed) if claimed else "an unnamed key (no keyid)"
    return SignatureCheck(
        signed=True,
        keyid=first,
        key_matches=None,
        valid=None,
        reason=f"signed by an untrusted key {who}; trust it with `kit keys trust`",
        untrusted=True,
    )


def _accepted(keys: list[Candidate], threshold: int, *, given: bool) -> SignatureCheck:
    names = tuple(c.name for c in keys if c.name is not None)
    by = ", ".join(
        f"{c.fingerprint} (trusted as {c.name!r})" if c.name else c.fingerprint for c in keys
    )
    valid = len(keys) >= threshold
    if valid:
        reason = f"valid signature by {by}" if len(keys) == 1 else f"valid signatures by {by}"
    else:
        reason = (
            f"{len(keys)} of the {threshold} signatures by distinct keys required verified "
            f"(by {by})"
        )
    return SignatureCheck(
        signed=True,
        keyid=keys[0].fingerprint,
        key_matches=True if given else None,
        valid=valid,
        reason=reason,
        signer=keys[0].name,
        keyids=tuple(c.fingerprint for c in keys),
        signers=names,
    )


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


def wrong_key_hint(check: SignatureCheck) -> str:
    """What to do when a given key did not verify a report: another signer's key (its keyid
    names the one to find, or --keys DIR finds it), or a report altered since it was signed."""
    if check.key_matches is False and check.keyid:
        return (
            f"its signature names another key ({check.keyid[:19]}...): pass that signer's "
            "public key, or --keys DIR to check each report against the key in DIR whose "
            "fingerprint its signature names"
        )
    return "the report was not signed by the holder of this key as it stands"


def read_payload(
    data: bytes,
    public_key: Ed25519PublicKey | None = None,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
) -> tuple[dict[str, Any], SignatureCheck]:
    """Open, verify, then parse a payload; with a key, an unsigned or badly signed report raises
    ``VerificationFailed`` before its payload is parsed.

    Opening trusts nothing, in this order: the size limit; a bracket-depth scan before any
    parsing; the envelope's keys; strict base64 (standard or URL-safe, as DSSE requires
    verifiers to accept; one encoding only); the signatures (at most :data:`MAX_SIGNATURES`,
    ``keyid`` optional) over the PAE of the decoded payload (:func:`check_signatures`); only
    then is the payload parsed (:func:`load_payload`, same limits) and required to be in
    canonical form, so an edit that still parses is caught even without a key. Every
    malformed input raises ``BadInputError``."""
    env = open_envelope(data, max_bytes=max_bytes, max_depth=max_depth)
    check = verify_envelope(env, public_key)
    if public_key is not None and not check.valid:
        raise VerificationFailed(check.reason, hint=wrong_key_hint(check))
    return load_payload(env, max_bytes=max_bytes, max_depth=max_depth), check
