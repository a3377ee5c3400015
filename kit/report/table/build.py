"""Reading the reports: each verified against the key in the key folder whose fingerprint its
signature names; the refused ones kept apart, each figure they claim led by why."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from kit.errors import BadInputError, VerificationFailed
from kit.report.files import read_report, validate_payload
from kit.report.limits import within_caps
from kit.report.show import UNSIGNED, UNTRUSTED, UNVERIFIED
from kit.report.table.cells import row
from kit.report.table.model import LABELLED, Refused, Row, Table
from kit.report.verify import verify_report
from kit.signing import (
    MAX_BYTES,
    Envelope,
    TrustStore,
    fingerprint,
    load_payload,
    load_public_key,
)
from kit.signing.canonical import read_limited
from kit.signing.envelope import open_envelope


def load_keys(directory: Path) -> dict[str, tuple[str, Ed25519PublicKey]]:
    """Every ``*.pub`` of ``directory`` by fingerprint, with its file stem."""
    if not directory.is_dir():
        raise BadInputError(
            f"{directory}: not a directory", hint="--keys DIR names a folder of *.pub files"
        )
    keys: dict[str, tuple[str, Ed25519PublicKey]] = {}
    for pub in sorted(directory.glob("*.pub")):
        key = load_public_key(pub)
        keys[fingerprint(key)] = (pub.stem, key)
    if not keys:
        raise BadInputError(
            f"{directory}: no public key (*.pub) in it",
            hint="put the signers' .pub files there (kit keys generate writes one)",
        )
    return keys


def keys_store(directory: Path) -> TrustStore:
    """A folder of signers' keys (every ``*.pub``, as :func:`load_keys` reads them) as the trust
    store a reader checks each report against, by the fingerprint its signature names: the
    ``--keys DIR`` of show, verify, compare and html."""
    load_keys(directory)
    return TrustStore(directory=directory)


def _unchecked(env: Envelope, source: str, key: str, label: str) -> Row | None:
    """The figures a refused file claims, each led by its label (UNTRUSTED 221.7 ...)."""
    try:
        data = within_caps(load_payload(env))
    except BadInputError:
        return None
    report, _ = validate_payload(env.payload, data, source)
    if report is None:
        return None
    unchecked = row(report, source, key)
    cells = {
        c: f"{label} {text}" if c in LABELLED and text != "-" else text
        for c, text in unchecked.cells.items()
    }
    return unchecked.model_copy(update={"cells": cells})


def build_table(paths: Sequence[Path], keys_dir: Path) -> Table:
    """Verify every report against the keys in ``keys_dir`` and build the table."""
    keys = load_keys(keys_dir)
    rows: list[Row] = []
    refused: list[Refused] = []
    for path in paths:
        data = read_limited(path, MAX_BYTES, "report file")
        try:
            env = open_envelope(data)
        except BadInputError as e:
            raise BadInputError(f"{path}: {e.message}", hint=e.hint) from None
        keyid = env.signatures[0].keyid if env.signatures else None
        entry = keys.get(keyid) if keyid else None
        if keyid is None:
            label = UNSIGNED
            reasons = ["unsigned: nothing shows who wrote it or that it is unaltered"]
        elif entry is None:
            label = UNTRUSTED
            reasons = [f"signed by key {keyid}, which is not among the keys in {keys_dir}"]
        else:
            label = UNVERIFIED
            checklist = verify_report(data, entry[1])
            # the failed items (those skipped after one add nothing), else any not checked
            failed = [i for i in checklist.items if i.ok is False]
            unchecked = [i for i in checklist.items if i.ok is None]
            reasons = [f"{i.name}: {i.detail}" for i in failed or unchecked]
        if reasons:
            tag = f"{short_key(keyid)} (not verified)" if keyid else "unsigned"
            claimed = _unchecked(env, str(path), tag, label)
            refused.append(Refused(source=str(path), label=label, reasons=reasons, row=claimed))
            continue
        if entry is None:  # unreachable: no reasons only after a full verify with its key
            continue
        report, _ = read_report(data, entry[1])
        rows.append(row(report, str(path), f"{entry[0]} ({short_key(keyid)})"))
    rows.sort(key=lambda r: (*r.group, r.cells["date"], r.source))
    return Table(keys_dir=str(keys_dir), keys=len(keys), rows=rows, refused=refused)


def require_verified(table: Table) -> None:
    """``VerificationFailed`` (exit 1) naming every refused file and why, if any."""
    if not table.refused:
        return
    lines = [f"{len(table.refused)} report(s) did not verify against the keys in {table.keys_dir}:"]
    for r in table.refused:
        lines += [f"{r.source}: {reason}" for reason in r.reasons]
    raise VerificationFailed(
        "\n".join(lines),
        hint="remove them, add their signer's .pub to --keys, or pass --include-unverified "
        "to list them in a separate Unverified section",
    )


def short_key(keyid: str | None) -> str:
    return "-" if keyid is None else keyid.removeprefix("sha256:")[:12]
