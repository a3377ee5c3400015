"""Who a report's figures are from: the label every line of an untrusted or unsigned run carries
(:func:`trust_label`), the signer in words, the two sides' labels of a comparison, and a side's
trust for a script (:class:`SideTrust`, in `kit report compare --json`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from kit.base import StrictModel
from kit.signing import SignatureCheck

UNTRUSTED = "UNTRUSTED"
UNSIGNED = "UNSIGNED"
UNVERIFIED = "UNVERIFIED"


def trust_label(check: SignatureCheck | None) -> str | None:
    """The label every figure of a run carries: UNSIGNED, UNTRUSTED (signed by a key neither
    given nor trusted, so not checked), UNVERIFIED (any other signature that is not valid);
    None for a valid signature, or a report not read through a check (``None``)."""
    if check is None or check.valid:
        return None
    if not check.signed:
        return UNSIGNED
    return UNTRUSTED if check.untrusted else UNVERIFIED


def signer_text(check: SignatureCheck | None) -> str:
    if check is None:
        return "not checked"
    if not check.signed:
        return "UNSIGNED: nothing shows who wrote it or that it is unaltered"
    if check.valid:
        return f"{check.keyid} (signature verified)"
    if check.untrusted:
        return f"{UNTRUSTED}: {check.reason}"
    if check.valid is None:
        return f"{check.keyid} (claimed; not checked without --key)"
    return f"INVALID: {check.reason}"


def side_labels(checks: Sequence[SignatureCheck | None]) -> dict[str, str]:
    """Sides A and B's trust labels (:func:`trust_label`), given their checks in that order
    (None: a published reference, or not read through a check); those without one left out."""
    out = {}
    for side, check in zip(("A", "B"), checks, strict=True):
        label = trust_label(check)
        if label is not None:
            out[side] = label
    return out


def sides_label(labels: Mapping[str, str]) -> str:
    """The sides' labels as one tag, "UNTRUSTED (A+B)" or "UNTRUSTED (A), UNSIGNED (B)"; ""
    when neither side has one."""
    by_label: dict[str, list[str]] = {}
    for side in ("A", "B"):
        if side in labels:
            by_label.setdefault(labels[side], []).append(side)
    return ", ".join(f"{label} ({'+'.join(sides)})" for label, sides in by_label.items())


TrustState = Literal["verified", "untrusted", "unsigned", "invalid", "not checked"]


class SideTrust(StrictModel):
    """One report's signature and trust, as a script reads it beside a verdict."""

    state: TrustState = Field(
        description="verified: signed by a given or trusted key, signature checked; untrusted: "
        "signed by a key neither given nor trusted, not checked; unsigned; invalid; not checked."
    )
    trusted: bool = Field(description="The signature verified against a given or trusted key.")
    signature_ok: bool | None = Field(
        description="True: the signature verified; False: none, or it failed; None: not checked."
    )
    keyid: str | None = Field(
        description="Fingerprint of the key that verified it, else the one its signature names."
    )
    signer: str | None = Field(description="The trusted key's name, where it has one.")
    allowed_by: Literal["--allow-untrusted", "--allow-unsigned"] | None = Field(
        description="The option that let an unverified report be read."
    )
    label: str | None = Field(description="UNTRUSTED, UNSIGNED or UNVERIFIED: on every figure.")


def side_trust(check: SignatureCheck) -> SideTrust:
    """A report's :class:`SideTrust` from its signature check (:func:`kit.report.files.read_report`
    lets an untrusted or unsigned one through only when allowed, so those were allowed)."""
    state: TrustState
    allowed: Literal["--allow-untrusted", "--allow-unsigned"] | None = None
    if check.valid:
        state = "verified"
    elif not check.signed:
        state, allowed = "unsigned", "--allow-unsigned"
    elif check.untrusted:
        state, allowed = "untrusted", "--allow-untrusted"
    else:
        state = "not checked" if check.valid is None else "invalid"
    return SideTrust(
        state=state,
        trusted=bool(check.valid),
        signature_ok=check.valid if check.signed else False,
        keyid=check.keyid,
        signer=check.signer,
        allowed_by=allowed,
        label=trust_label(check),
    )
