"""The committed GPU example reports verify with the committed public key."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kit.errors import VerificationFailed
from kit.signing import load_public_key, read_payload


@pytest.fixture
def key(repo_root: Path) -> Path:
    """The public half of the key the examples are signed with."""
    return repo_root / "examples" / "keys" / "example.pub"


@pytest.fixture
def reports(repo_root: Path) -> list[Path]:
    """The example reports, in the order ``every_example_report`` takes them."""
    return sorted((repo_root / "examples" / "reports").glob("*.report.json"))


def test_examples_exist(reports: list[Path]) -> None:
    names = {p.name for p in reports}
    assert {"h200-tp1.report.json", "h200x2-tp2.report.json"} <= names


def test_example_report_verifies(every_example_report: Path, key: Path) -> None:
    report, check = read_payload(every_example_report.read_bytes(), load_public_key(key))
    assert check.valid
    assert report["kind"] == "kit.report"
    assert report["engine"]["name"] == "vllm"
    assert report["engine"]["kind"] == "external"
    gpus = report["host"]["gpus"]
    assert gpus and all("H200" in g["name"] for g in gpus)
    assert report["gpu_sampling"]["summaries"]
    assert report["bench"]["spec_decode"]["drafts"] > 0
    assert report["roofline"]["bandwidth"]["used_source"] == "measured"
    assert report["roofline"]["prompts"]
    assert report["vllm_bench"]["prompts"]


def test_tampered_example_fails(reports: list[Path], key: Path) -> None:
    """One changed figure in the payload and the signature no longer holds."""
    raw = reports[0].read_bytes()
    encoded = json.loads(raw)["payload"]
    payload = base64.b64decode(encoded)
    assert payload.count(b'"status":"complete"') == 1
    forged = base64.b64encode(payload.replace(b'"status":"complete"', b'"status":"completE"'))
    tampered = raw.replace(encoded.encode(), forged)
    with pytest.raises(VerificationFailed):
        read_payload(tampered, load_public_key(key))
