"""Older reports are upgraded once, as they are read (kit.report.upgrades): each step, and one
committed report of each layout kit has written, read, verified and upgraded."""

from __future__ import annotations

import base64
import copy
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from factories import build_report

from kit.bench import summarize_prefill
from kit.bench.summary import decode_headline
from kit.migrations import current_version, upgrade
from kit.report import SCHEMA_VERSION, Report
from kit.report.files import encode_report, read_report, upgraded
from kit.report.upgrades import UPGRADES, headlines_stored, rules_stated
from kit.report.verify import verify_report
from kit.signing import fingerprint, load_public_key, open_envelope

FIXTURES = Path(__file__).parents[2] / "fixtures"
KEYS = sorted((FIXTURES / "examples" / "keys").glob("*.pub"))
# one committed report of each layout (all say schema_version 1: kit did not count its changes)
LAYOUTS = {
    # 2026-11-29 to 12-03: no verdict rules, no headlines; the sequential protocol and prefill
    "before-headlines": FIXTURES / "examples" / "reports" / "h200-tp1.report.json",
    # the same, with a re-run's verdict (no figure keys or statuses)
    "before-headlines-rerun": FIXTURES / "examples" / "reports" / "h200-tp1-rerun.report.json",
    # the same, under a load pattern: load points, no prompt summaries
    "before-headlines-load": FIXTURES
    / "results"
    / "h200-llama8b-bf16-sweep-2026-12-03"
    / "report.json",
    # from 2026-12-04: rules 3 and headlines stored, engine choices with JIT events
    "headlines": FIXTURES / "results" / "h100-acceptance-sweep-2026-12-07" / "seed" / "report.json",
}


def signer(path: Path) -> Ed25519PublicKey:
    keyid = open_envelope(path.read_bytes()).signatures[0].keyid
    [key] = [k for k in map(load_public_key, KEYS) if fingerprint(k) == keyid]
    return key


def payload(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
    return data


def test_the_upgrades_reach_the_version_the_model_reads() -> None:
    assert current_version(UPGRADES) == SCHEMA_VERSION
    assert typing.get_args(Report.model_fields["schema_version"].annotation) == (SCHEMA_VERSION,)


def test_each_step_stamps_the_version_it_reaches() -> None:
    data = {"schema_version": 1, "validity": {"valid": True, "reasons": []}}
    assert upgrade(copy.deepcopy(data), UPGRADES[:1])["schema_version"] == 2
    assert upgrade(data, UPGRADES)["schema_version"] == SCHEMA_VERSION
    newer = {"schema_version": SCHEMA_VERSION + 1}
    assert upgrade(newer, UPGRADES) == newer  # refused by the model, with its hint


def test_rules_stated_says_the_first_rules_where_none_are_named() -> None:
    old = {"validity": {"valid": False, "reasons": []}}
    assert rules_stated(copy.deepcopy(old))["validity"] == {
        "valid": False,
        "reasons": [],
        "rules": 1,
    }
    judged = {"validity": {"valid": True, "reasons": [], "rules": 3}}
    assert rules_stated(copy.deepcopy(judged)) == judged


def test_headlines_stored_are_the_ones_readers_computed() -> None:
    data = payload(LAYOUTS["before-headlines"])
    bench = data["bench"]
    assert not any("headline" in p for p in bench["prompts"] + bench["prefill"])
    out = headlines_stored(rules_stated(copy.deepcopy(data)))
    report = Report.model_validate_json(json.dumps({**out, "schema_version": SCHEMA_VERSION}))
    assert report.bench is not None
    for p in report.bench.prompts:
        assert p.headline == decode_headline(p.prompt, report.bench.records)
    for pf in report.bench.prefill:
        assert pf.headline == summarize_prefill(pf.depth, report.bench.records).headline
    # a report that has them keeps them; records the model refuses leave the payload as it is
    assert headlines_stored(copy.deepcopy(out)) == out
    bad = copy.deepcopy(data)
    bad["bench"]["records"][0]["index"] = "first"
    assert headlines_stored(copy.deepcopy(bad)) == bad


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_committed_report_of_each_layout_reads_verifies_and_upgrades(layout: str) -> None:
    path = LAYOUTS[layout]
    raw = path.read_bytes()
    stored = payload(path)
    assert stored["schema_version"] == 1
    checklist = verify_report(path, signer(path))
    assert checklist.ok and all(item.ok for item in checklist.items), checklist.failed
    report, check = read_report(path, signer(path))
    assert check.valid and path.read_bytes() == raw  # the signature covers the bytes as written
    assert report.schema_version == SCHEMA_VERSION
    # a report keeps the verdict it was signed with, under the rules it was judged by
    assert report.validity.rules == stored["validity"].get("rules", 1)
    assert report.validity.valid == stored["validity"]["valid"]
    assert report.bench is not None
    assert all(p.headline.value is not None for p in report.bench.prompts)
    assert all(pf.headline is not None for pf in report.bench.prefill if pf.status == "measured")
    assert upgraded(stored) is not stored and payload(path) == stored  # upgraded in a copy


def test_the_last_layout_of_version_1_reads_as_the_current_one(fixtures_dir: Path) -> None:
    """A report as kit wrote it just before the versions were counted: everything stored."""
    report = build_report(fixtures_dir)
    data = json.loads(encode_report(report))
    current = json.loads(base64.b64decode(data["payload"]))
    assert upgraded(current) is current  # the current version: no upgrade, no copy
    first = {**current, "schema_version": 1}
    assert upgraded(first) == current
