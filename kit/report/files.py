"""Report files: the only writer (:func:`write_report`) and the only reader (:func:`read_report`).

A report file is one DSSE envelope (:mod:`kit.signing.envelope`) holding the report's RFC 8785
bytes, signed when a key is given.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import os
from pathlib import Path
from typing import Any, TypedDict

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import ValidationError

from kit.errors import BadInputError, VerificationFailed
from kit.migrations import upgrade
from kit.report.limits import within_caps
from kit.report.schema import SCHEMA_VERSION, Report, report_json_schema
from kit.report.upgrades import UPGRADES
from kit.signing import (
    Envelope,
    SignatureCheck,
    TrustStore,
    canonical_bytes,
    load_payload,
    open_envelope,
    open_envelope_file,
    sign_report,
    unsigned_report,
    verify_envelope,
    wrong_key_hint,
)

REPORT_FILE = "report.json"
MAX_PROBLEMS = 12  # per item; the count of the rest is given
READ_HINT = "ask the sender for the report file exactly as kit wrote it"


def report_bytes(report: Report) -> bytes:
    """The report's canonical bytes (RFC 8785): what the envelope carries and signs."""
    return canonical_bytes(report.model_dump(mode="json"))


def encode_report(report: Report, private_key: Ed25519PrivateKey | None = None) -> bytes:
    """The report file: a DSSE envelope, signed when a key is given, else marked unsigned.
    The bytes are produced once, here, and those exact bytes are written and signed; readers
    never re-serialise before checking."""
    data = report.model_dump(mode="json")
    return sign_report(data, private_key) if private_key is not None else unsigned_report(data)


def write_report(
    report: Report, out_dir: Path, private_key: Ed25519PrivateKey | None = None
) -> Path:
    """Write the report envelope (signed when a key is given) as ``out_dir/report.json``,
    atomically: a reader sees the old file or the new one, never half of one."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / REPORT_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(encode_report(report, private_key))
    os.replace(tmp, path)
    return path


def open_report(source: Path | str | bytes) -> tuple[str, Envelope]:
    """A report file's label (its path, or ``<bytes>``) and its envelope, opened within the
    limits; its payload is not yet parsed or trusted. The first step of every reader."""
    if isinstance(source, bytes):
        return "<bytes>", open_envelope(source)
    return str(source), open_envelope_file(Path(source))


def check_signature(
    env: Envelope, public_key: Ed25519PublicKey | None = None, trust: TrustStore | None = None
) -> SignatureCheck:
    """The envelope's signature checked against ``public_key``, else the trusted key it names
    (``trust``); without either, a signature is untrusted. Never accepts on the keyid alone."""
    if public_key is None and trust is not None:
        return trust.verify(env)
    return verify_envelope(env, public_key)


class ReadPolicy(TypedDict):
    """What a reader lets through (:func:`read_report`'s keywords of the same names)."""

    allow_unsigned: bool
    allow_untrusted: bool


def read_report(
    source: Path | str | bytes,
    public_key: Ed25519PublicKey | None = None,
    *,
    trust: TrustStore | None = None,
    allow_unsigned: bool = False,
    allow_untrusted: bool = False,
    key_option: str = "--key",
) -> tuple[Report, SignatureCheck]:
    """Read a report file (a path, or its bytes): how everything else reads one (show, compare,
    the compose runtime, tests). The size and depth limits, the envelope, the signature, the
    canonical payload, an older version upgraded (:mod:`kit.report.upgrades`, on the parsed
    payload: the signature covers the bytes as written) and the strict schema, with errors
    that name the file. The signature is checked against ``public_key``, else ``trust``
    (:func:`check_signature`). An invalid signature (altered, forged, another key than the
    given one) raises ``VerificationFailed``; so does an unsigned report when a key is given or
    ``allow_unsigned`` is false, and an untrusted one when ``allow_untrusted`` is false: both are
    false by default, so a caller that reads a stranger's report without a key or a trust store
    gets an error, never an unchecked report. The returned check says which it was
    (``check.untrusted``). Everything malformed raises
    ``BadInputError`` naming the file. ``key_option`` is the caller's option for the public
    key, named in the hint for an untrusted signer."""
    label, env = open_report(source)
    prefix = "" if isinstance(source, bytes) else f"{label}: "
    check = check_signature(env, public_key, trust)
    refused: tuple[str, str] | None = None
    if check.valid is False and (check.signed or public_key is not None):
        refused = (check.reason, wrong_key_hint(check))
    elif not check.signed and not allow_unsigned:
        refused = (
            "the report is unsigned: nothing shows who wrote it or that it is unaltered",
            "pass --allow-unsigned to read it anyway",
        )
    elif check.untrusted and not allow_untrusted:
        refused = (
            check.reason,
            f"or pass {key_option} PUB (its signer's public key), or --allow-untrusted to read "
            "it anyway",
        )
    if refused is not None:
        raise VerificationFailed(prefix + refused[0], hint=refused[1])
    try:
        data = within_caps(load_payload(env))
    except BadInputError as e:
        raise BadInputError(prefix + e.message, hint=e.hint) from None
    report, problems = validate_payload(env.payload, data, label)
    if report is None:
        raise BadInputError("\n".join(problems), hint=READ_HINT)
    return report, check


def validate_payload(
    payload: bytes, data: dict[str, Any], label: str
) -> tuple[Report | None, list[str]]:
    """The report (strict model, then the JSON Schema on the parsed payload) and every schema
    problem, each ``label: path: message``. ``data`` is within the count caps already
    (:func:`kit.report.limits.within_caps`, applied as the payload is loaded). An older
    ``schema_version`` is read upgraded (:func:`upgraded`); ``data`` is left as is."""
    newer = upgraded(data)
    if newer is not data:
        data, payload = newer, json.dumps(newer).encode()
    try:
        report = Report.model_validate_json(payload, strict=True)
    except ValidationError as exc:
        return None, _pydantic_problems(exc, label)
    problems = [f"{label}: {p}" for p in _json_schema_problems(data)]
    return (None if problems else report), problems


def upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """A report payload of an older ``schema_version`` brought to the current one, in a copy
    (:mod:`kit.report.upgrades`); any other payload as it is."""
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version < SCHEMA_VERSION:
        return upgrade(copy.deepcopy(data), UPGRADES)
    return data


def _pydantic_problems(exc: ValidationError, label: str) -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(top)"
        if loc == "schema_version" and isinstance(err.get("input"), int):
            if err["input"] > SCHEMA_VERSION:
                out.append(
                    f"{label}: schema_version {err['input']} is newer than this kit reads "
                    f"({SCHEMA_VERSION}): upgrade kit"
                )
                continue
        out.append(f"{label}: {loc}: {err['msg']}")
    return capped(out)


@functools.lru_cache(maxsize=1)
def schema_validator() -> Any:
    try:  # a dev dependency: verify still runs on a machine without it
        jsonschema = importlib.import_module("jsonschema")
    except ImportError:
        return None
    schema = report_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _json_schema_problems(data: dict[str, Any]) -> list[str]:
    validator = schema_validator()
    if validator is None:
        return []
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    return capped(
        [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {cut(e.message, 160)}" for e in errors]
    )


def capped(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return [*problems[:MAX_PROBLEMS], f"... and {len(problems) - MAX_PROBLEMS} more"]


def cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
