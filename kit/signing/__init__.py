"""Signing: canonical JSON, DSSE envelopes and Ed25519 keys (envelopes and keys, not reports).

A report file is one DSSE envelope of the report's RFC 8785 bytes (:mod:`kit.signing.envelope`);
reading a *report* (envelope, signature, payload, schema) is :mod:`kit.report.files`. The keys
trusted without ``--key`` are :mod:`kit.signing.trust`.
"""

from kit.signing.canonical import MAX_DEPTH, MAX_SAFE_INT, canonical_bytes, parse_json
from kit.signing.envelope import (
    MAX_BYTES,
    MAX_SIGNATURES,
    REPORT_MEDIA_TYPE,
    Candidate,
    Envelope,
    Signature,
    SignatureCheck,
    check_signatures,
    load_payload,
    open_envelope,
    open_envelope_file,
    pae,
    read_payload,
    sign_payload,
    sign_report,
    unsigned_report,
    verify_envelope,
    wrong_key_hint,
)
from kit.signing.keys import (
    KeyPair,
    PublicKeyFormat,
    fingerprint,
    generate_keypair,
    load_private_key,
    load_public_key,
    public_key_bytes,
    signing_key,
)
from kit.signing.trust import TrustedKey, TrustStore

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_SAFE_INT",
    "MAX_SIGNATURES",
    "REPORT_MEDIA_TYPE",
    "Candidate",
    "Envelope",
    "KeyPair",
    "PublicKeyFormat",
    "Signature",
    "SignatureCheck",
    "TrustStore",
    "TrustedKey",
    "canonical_bytes",
    "check_signatures",
    "fingerprint",
    "generate_keypair",
    "load_payload",
    "load_private_key",
    "load_public_key",
    "open_envelope",
    "open_envelope_file",
    "pae",
    "parse_json",
    "public_key_bytes",
    "read_payload",
    "sign_payload",
    "sign_report",
    "signing_key",
    "unsigned_report",
    "verify_envelope",
    "wrong_key_hint",
]
