"""examples/keys/MANIFEST.json names the key of every committed signed report (issue 34)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kit.report.files import check_signature, open_report
from kit.signing import fingerprint, load_public_key

TREES = ("examples", "experiments", "tests/fixtures")  # where reports are committed


@pytest.fixture(scope="module")
def manifest(repo_root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((repo_root / "examples/keys/MANIFEST.json").read_text())
    return data


def envelopes(root: Path) -> dict[str, bool]:
    """Every report envelope in TREES, by path from ``root``: whether it is signed."""
    found = {}
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.json")):
            data = path.read_bytes()
            if b'"payloadType"' in data:
                found[path.relative_to(root).as_posix()] = bool(open_report(data)[1].signatures)
    return found


def test_every_report_envelope_is_listed(repo_root: Path, manifest: dict[str, Any]) -> None:
    found = envelopes(repo_root)
    signed = {p for p, is_signed in found.items() if is_signed}
    assert sorted(signed - set(manifest["reports"])) == [], "signed reports with no key listed"
    assert sorted(set(manifest["reports"]) - signed) == [], "listed, not a signed report"
    assert sorted(manifest["unsigned"]) == sorted(p for p, s in found.items() if not s)


def test_every_key_file_is_listed(repo_root: Path, manifest: dict[str, Any]) -> None:
    keys = [*(repo_root / "examples/keys").glob("*.pub"), *(repo_root / TREES[2]).rglob("*.pub")]
    assert sorted(p.relative_to(repo_root).as_posix() for p in keys) == sorted(manifest["keys"])


def test_fingerprints(repo_root: Path, manifest: dict[str, Any]) -> None:
    for key, entry in manifest["keys"].items():
        actual = fingerprint(load_public_key(repo_root / key))
        assert entry["fingerprint"] == actual, f"{key}: its fingerprint is now {actual}"


def test_each_report_verifies_with_its_key(repo_root: Path, manifest: dict[str, Any]) -> None:
    failed = []
    for report, key in manifest["reports"].items():
        env = open_report(repo_root / report)[1]
        check = check_signature(env, load_public_key(repo_root / key))
        if not check.valid:
            failed.append(f"{report}: {check.reason}")
    assert failed == []


def test_each_key_verifies_a_report_or_says_why_not(manifest: dict[str, Any]) -> None:
    used = set(manifest["reports"].values())
    for key, entry in manifest["keys"].items():
        assert (key in used) != ("verifies_none" in entry), key
