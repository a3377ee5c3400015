"""Verify stage: check a report file from a stranger, offline, item by item.

:func:`verify_report` runs every item and returns a :class:`Checklist`. Reading a report for show
or compare is :func:`kit.report.files.read_report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from kit.errors import BadInputError
from kit.report.files import check_signature, open_report, schema_validator, validate_payload
from kit.report.limits import within_caps
from kit.report.schema import Report
from kit.report.validity import verdict
from kit.report.verify.checklist import CheckItem, Checklist, check_item, differences, dump
from kit.report.verify.embedded import patches_item, recipe_item
from kit.report.verify.recompute import records_item, summaries_item
from kit.signing import (
    MAX_BYTES,
    MAX_DEPTH,
    Envelope,
    TrustStore,
    load_payload,
)

__all__ = ["CheckItem", "Checklist", "verify_report"]

_PAYLOAD_ITEMS = ("payload", "schema", "recipe", "summaries", "records", "patches", "validity")


def verify_report(
    source: Path | str | bytes,
    public_key: Ed25519PublicKey | None = None,
    *,
    allow_unsigned: bool = False,
    allow_untrusted: bool = False,
    trust: TrustStore | None = None,
) -> Checklist:
    """Check a report file (a path, or its bytes) and return the checklist of every item.

    Without ``public_key`` the signature is checked against ``trust`` (``None``: no key is
    trusted; the CLI passes ``TrustStore.default()``). An item that cannot run because an
    earlier one made it impossible (an unreadable payload, a payload that fails the schema) says
    so and counts as not checked. Items:

    - ``envelope``: size and depth limits, the DSSE envelope's exact shape (``kit.signing``);
    - ``signature``: by the given key or a trusted one (:func:`_signature_item` says when it
      passes). After a failed signature every later item is not checked ("skipped: the
      signature failed"): nothing of an unauthenticated payload is reported as checked;
    - ``payload``: the payload parses within the limits and is in canonical form;
    - ``schema``: the ``Report`` model (strict) and the JSON Schema generated from it;
    - ``recipe``: the embedded recipe validates, its sha256 matches, and so do the protocol
      flags;
    - ``summaries``: per-prompt and prefill statistics, spec-decode figures, GPU sampling
      summaries, energy per token and the quality probe's figures, recomputed from the raw
      records (the probe's: its per-token scores) with kit's own functions;
    - ``records``: each request's numbers within their physical ranges (a record outside is no
      measurement, and every summary leaves it out: :mod:`kit.bench.plausible`), its internal
      consistency (rates, TTFT within wall, usable flag, chunk times, token counts), start
      times in order, counts per prompt, run status, request template;
    - ``patches``: the patch manifest is well-formed and names the recipe's series;
    - ``validity``: the verdict recomputed from the report and its host evidence.

    Any failed item makes the checklist fail (``kit report verify`` exits 1). Raises
    ``BadInputError`` (exit 2) only when the file cannot be opened as a kit report envelope at
    all (unreadable, over the size or depth limit, not JSON, not an envelope): there is nothing
    to check.
    """
    label, env = open_report(source)
    items = [
        CheckItem(
            name="envelope",
            ok=True,
            detail=f"DSSE envelope of {env.payload_type}, payload {len(env.payload):,} bytes "
            f"(limits {MAX_BYTES:,} bytes, {MAX_DEPTH} levels)",
        ),
        _signature_item(env, public_key, trust, allow_unsigned, allow_untrusted),
    ]
    if items[-1].ok is False:
        skipped = "skipped: the signature failed"
        items += [CheckItem(name=n, ok=None, detail=skipped) for n in _PAYLOAD_ITEMS]
        return Checklist(source=label, items=items)
    data: dict[str, Any] | None = None
    try:
        data = within_caps(load_payload(env))
        items.append(CheckItem(name="payload", ok=True, detail="a JSON object in canonical form"))
    except BadInputError as e:
        items.append(CheckItem(name="payload", ok=False, detail=e.message))
    if data is None:
        skipped = "skipped: the payload is unreadable"
        names = ("schema", "recipe", "summaries", "records", "patches", "validity")
        items += [CheckItem(name=n, ok=None, detail=skipped) for n in names]
        return Checklist(source=label, items=items)

    report, problems = validate_payload(env.payload, data, "payload")
    if report is not None:
        how = "the JSON Schema" if schema_validator() else "no JSON Schema (jsonschema missing)"
        items.append(CheckItem(name="schema", ok=True, detail=f"Report model (strict) and {how}"))
    else:
        items.append(
            CheckItem(
                name="schema",
                ok=False,
                detail="the payload does not match the report schema",
                problems=[p.removeprefix("payload: ") for p in problems],
            )
        )
    items.append(recipe_item(data))
    if report is None:
        skipped = "skipped: the payload does not match the schema"
        items += [CheckItem(name=n, ok=None, detail=skipped) for n in ("summaries", "records")]
    else:
        items += [summaries_item(report), records_item(report)]
    items.append(patches_item(data))
    if report is None:
        items.append(
            CheckItem(
                name="validity", ok=None, detail="skipped: the payload does not match the schema"
            )
        )
    else:
        items.append(_validity_item(report))
    return Checklist(source=label, items=items)


def _signature_item(
    env: Envelope,
    public_key: Ed25519PublicKey | None,
    trust: TrustStore | None,
    allow_unsigned: bool,
    allow_untrusted: bool,
) -> CheckItem:
    """The ``signature`` item: checked against the given public key, else against the trusted
    key of the trust store whose fingerprint is the keyid (:mod:`kit.signing.trust`), and
    accepted only when that key verifies it. A signature by a key neither given nor trusted
    fails ("signed by an untrusted key ...") unless ``allow_untrusted`` (then it is not checked
    and labelled UNTRUSTED); an unsigned report fails unless ``allow_unsigned`` and no key is
    given. An invalid signature always fails."""
    check = check_signature(env, public_key, trust)
    if check.valid:
        return CheckItem(name="signature", ok=True, detail=check.reason)
    if not check.signed:
        if public_key is None and allow_unsigned:
            return CheckItem(
                name="signature",
                ok=None,
                detail="unsigned (allowed): nothing shows who wrote the report or that it is "
                "unaltered",
            )
        why = "" if public_key is None else "; a key was given, so a signature is required"
        return CheckItem(
            name="signature",
            ok=False,
            detail="unsigned: nothing shows who wrote the report or that it is unaltered" + why,
        )
    if check.untrusted and allow_untrusted:
        return CheckItem(
            name="signature",
            ok=None,
            detail=f"UNTRUSTED: signed by {check.keyid}, a key neither given nor trusted; not "
            "checked (allowed): nothing shows who wrote the report or that it is unaltered",
        )
    return CheckItem(name="signature", ok=False, detail=check.reason)


def _validity_item(report: Report) -> CheckItem:
    fresh = verdict(report, report.host, report.gpu_sampling, rules=report.validity.rules)
    problems = differences(dump(report.validity), dump(fresh), "validity")
    errors = [f.code for f in fresh.reasons if f.severity == "error"]
    warnings = [f.code for f in fresh.reasons if f.severity == "warning"]
    said = "valid" if fresh.valid else f"INVALID ({', '.join(errors)})"
    if warnings:
        said += f", warnings: {', '.join(warnings)}"
    return check_item(
        "validity",
        problems,
        f"the stored verdict is the recomputed one: {said}",
        "the stored verdict is not the one recomputed from the report",
    )
