"""Attest a report: an in-toto Statement v1 whose subject is the report file's sha256, signed as
a DSSE envelope, so in-toto, cosign and Rekor tooling can carry it (docs/signing.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kit.report.files import ReadPolicy, read_report
from kit.signing import (
    MAX_BYTES,
    SignatureCheck,
    TrustStore,
    canonical_bytes,
    load_payload,
    open_envelope,
    sign_payload,
    verify_envelope,
)
from kit.signing.canonical import read_limited

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://kit.invalid/report/v1"
IN_TOTO_MEDIA_TYPE = "application/vnd.in-toto+json"


def statement(path: Path, trust: TrustStore | None, policy: ReadPolicy) -> dict[str, Any]:
    """The Statement for the report file at ``path``, read (and its signature checked) as by
    :func:`kit.report.files.read_report`: the file's name and sha256, and a short summary."""
    data = read_limited(path, MAX_BYTES, "report file")
    report, check = read_report(data, trust=trust, **policy)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": path.name, "digest": {"sha256": hashlib.sha256(data).hexdigest()}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "run_id": report.run_id,
            "created_at": report.created_at,
            "kit_version": report.kit_version,
            "recipe_name": report.recipe_name,
            "recipe_sha256": report.recipe_sha256,
            "status": report.status,
            "valid": report.validity.valid,
            "report_signers": list(check.keyids),
        },
    }


def attest(
    path: Path, private_key: Ed25519PrivateKey, trust: TrustStore | None, policy: ReadPolicy
) -> bytes:
    """File bytes of a DSSE envelope (``IN_TOTO_MEDIA_TYPE``) holding the report's Statement
    in canonical JSON, signed with ``private_key``."""
    return sign_payload(
        canonical_bytes(statement(path, trust, policy)), private_key, IN_TOTO_MEDIA_TYPE
    )


def read_attestation(
    data: bytes, public_key: Ed25519PublicKey
) -> tuple[dict[str, Any], SignatureCheck]:
    """An attestation's Statement and its signature check against ``public_key``."""
    env = open_envelope(data, payload_type=IN_TOTO_MEDIA_TYPE)
    return load_payload(env), verify_envelope(env, public_key)
