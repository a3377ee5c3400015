"""The committed GPU example reports verify with the committed public key."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kit.errors import VerificationFailed
from kit.signing import load_public_key, read_payload

ROOT = Path(__file__).resolve().parents[3]
REPORTS = sorted((ROOT / "examples" / "reports").glob("*.report.json"))
KEY = ROOT / "examples" / "keys" / "example.pub"


def test_examples_exist() -> None:
    names = {p.name for p in REPORTS}
    assert {"h200-tp1.report.json", "h200x2-tp2.report.json"} <= names


@pytest.mark.parametrize("path", REPORTS, ids=[p.name for p in REPORTS])
def test_example_report_verifies(path: Path) -> None:
    report, check = read_payload(path.read_bytes(), load_public_key(KEY))
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


def test_tampered_example_fails() -> None:
    """One changed figure in the payload and the signature no longer holds."""
    raw = REPORTS[0].read_bytes()
    encoded = json.loads(raw)["payload"]
    payload = base64.b64decode(encoded)
    assert payload.count(b'"status":"complete"') == 1
    forged = base64.b64encode(payload.replace(b'"status":"complete"', b'"status":"completE"'))
    tampered = raw.replace(encoded.encode(), forged)
    with pytest.raises(VerificationFailed):
        read_payload(tampered, load_public_key(KEY))
