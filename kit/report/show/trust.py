"""Who a report's figures are from: the label every line of an untrusted or unsigned run carries
(:func:`trust_label`), the signer in words, and the two sides' labels of a comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
