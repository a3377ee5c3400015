"""Resource limits before work: regular files only, sizes and shapes checked before parsing."""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit import paths, signing
from kit.errors import BadInputError, VerificationFailed
from kit.signing import canonical

FIXTURES = Path(__file__).parents[2] / "fixtures" / "reports"
EXAMPLES = Path(__file__).parents[2] / "fixtures" / "examples" / "reports"
SIGNED = (FIXTURES / "cpu-tiny-a.signed.json").read_bytes()
KEY = signing.load_public_key(FIXTURES / "signer.pub")
HANG_GUARD_S = 30  # not a speed assertion: a regression that blocks fails instead of hanging


def outcome_within_guard(call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` in a thread; the exception it raised (None if it returned)."""
    result: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as e:  # handed back to the test
            result.append(e)
        else:
            result.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert result, f"the call blocked for {HANG_GUARD_S} s"
    return result[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.json"
    os.mkfifo(path, 0o600)
    return path


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (signing.open_envelope_file, "report file"),
        (signing.load_public_key, "public key"),
        (signing.load_private_key, "private key"),
    ],
)
def test_a_fifo_is_refused_at_once(fifo: Path, call: Callable[[Path], Any], what: str) -> None:
    error = outcome_within_guard(lambda: call(fifo))
    assert isinstance(error, BadInputError)
    assert error.message.startswith(f"{fifo}: cannot read the {what}: not a regular file")


def test_a_fifo_report_names_its_kind(fifo: Path) -> None:
    error = outcome_within_guard(lambda: signing.open_envelope_file(fifo))
    assert isinstance(error, BadInputError)
    assert error.message == f"{fifo}: cannot read the report file: not a regular file (a FIFO)"


def test_a_directory_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(BadInputError) as info:
        signing.open_envelope_file(tmp_path)
    assert info.value.message == (
        f"{tmp_path}: cannot read the report file: not a regular file (a directory)"
    )


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(FIXTURES / "cpu-tiny-a.signed.json")
    assert canonical.read_limited(link, signing.MAX_BYTES, "report file") == SIGNED


def test_size_is_checked_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 100)

    def no_read(fd: int, n: int) -> bytes:
        raise AssertionError("read before the size check")

    monkeypatch.setattr(paths.os, "read", no_read)  # the one reader: kit.paths.read_regular
    with pytest.raises(BadInputError, match=r"big\.json: the report file is over the 99-byte"):
        canonical.read_limited(big, 99, "report file")


@pytest.fixture
def no_json_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("json.loads was called")

    monkeypatch.setattr(canonical.json, "loads", refuse)


@pytest.mark.usefixtures("no_json_loads")
def test_a_32_mb_list_of_objects_is_refused_before_parsing() -> None:
    data = b"[" + b"{}," * ((signing.MAX_BYTES - 3) // 3) + b"{}]"
    assert signing.MAX_BYTES - 3 < len(data) <= signing.MAX_BYTES
    with pytest.raises(BadInputError) as info:
        signing.open_envelope(data)
    assert info.value.message == (
        "the report file has up to 11184811 values and keys, over the limit of 600001"
    )


@pytest.mark.usefixtures("no_json_loads")
def test_millions_of_short_notes_are_refused_before_parsing() -> None:
    payload = b'{"notes":[' + b'"ab",' * 3_000_000 + b'"ab"]}'
    with pytest.raises(BadInputError, match=r"the report payload has up to 3000003 values and"):
        canonical.parse_json(payload, "the report payload", signing.MAX_BYTES, 64)


@pytest.mark.usefixtures("no_json_loads")
def test_a_shape_over_four_times_its_bytes_is_refused_before_parsing() -> None:
    # 200 k empty objects in 1.2 MB: within every count, but about 13 MB to parse (11 times)
    payload = b'{"notes":[' + b'{"a":{}},' * 150_000 + b"{}]}"
    with pytest.raises(BadInputError) as info:
        canonical.parse_json(payload, "the report payload", signing.MAX_BYTES, 64)
    assert info.value.message.startswith("the report payload would take about ")
    assert "over the limit of 4 times its" in info.value.message


@pytest.mark.usefixtures("no_json_loads")
def test_values_in_all_are_counted_before_parsing() -> None:
    payload = b'{"notes":[' + b'"abcdefghijklmnop",' * 350_000 + b'"a"]}'
    with pytest.raises(BadInputError) as info:
        canonical.parse_json(payload, "the report payload", signing.MAX_BYTES, 64)
    assert info.value.message == (
        f"the report payload has about 350002 values, over the limit of {canonical.MAX_VALUES}"
    )


def test_container_count_is_a_parameter() -> None:
    assert canonical.parse_json(b"[{},[]]", "x", 100, 4, max_containers=3) == [{}, []]
    with pytest.raises(BadInputError) as info:
        canonical.parse_json(b"[{},[],{}]", "the report file", 100, 4, max_containers=3)
    assert info.value.message == "the report file has 4 arrays and objects, over the limit of 3"


def test_depth_is_still_reported_before_the_count() -> None:
    with pytest.raises(BadInputError, match="nested deeper than 4 levels"):
        canonical.parse_json(b"[" * 5 + b"]" * 5, "x", 100, 4, max_containers=3)


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.glob("*.json")) + sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name
)
def test_real_reports_are_within_every_limit(path: Path) -> None:
    env = signing.open_envelope_file(path)
    assert canonical.parse_json(path.read_bytes(), "f", signing.MAX_BYTES, 64, max_containers=8)
    # their shape is far from the limit: half of it still passes
    canonical.parse_json(env.payload, "p", signing.MAX_BYTES, 64, max_amplification=5)
    assert signing.load_payload(env)["kind"] == "kit.report"


PER_EXAMPLE = 5  # mutants per example: 6,000 here, 4,000 in report/test_count_limits.py


def mutations(data: bytes, seed: int, count: int = PER_EXAMPLE) -> list[bytes]:
    """``count`` mutants of ``data``: 1-4 random byte sets, inserts, deletes or a truncation."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        mutant = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(mutant) + 1)
            op = rng.choice(("set", "set", "insert", "delete", "cut"))
            if op == "insert":
                mutant.insert(at, rng.randrange(256))
            elif op == "cut":
                del mutant[at:]
            elif at < len(mutant):
                if op == "set":
                    mutant[at] = rng.randrange(256)
                else:
                    del mutant[at]
        out.append(bytes(mutant))
    return out


@settings(max_examples=1_200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**64 - 1))
def test_mutated_signed_reports_give_a_result_or_a_clean_error(seed: int) -> None:
    for data in mutations(SIGNED, seed):
        try:
            report, check = signing.read_payload(data, KEY)
        except (BadInputError, VerificationFailed):
            continue
        assert check.valid  # accepted only as signed: then it is the signed payload
        assert signing.canonical_bytes(report) == signing.open_envelope(SIGNED).payload


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-canonical.MAX_SAFE_INT, canonical.MAX_SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON, at=st.integers(min_value=0), byte=st.integers(0, 255), cut=st.booleans())
def test_the_streaming_canonical_check_agrees_with_canonical_bytes(
    value: Any, at: int, byte: int, cut: bool
) -> None:
    data = signing.canonical_bytes(value)
    assert canonical.is_canonical(value, data)
    at %= len(data)
    other = data[:at] if cut else data[:at] + bytes([byte]) + data[at + 1 :]
    # canonical JSON has one form per value: other bytes are not the form of this value
    assert canonical.is_canonical(value, other) is (other == data)
    assert canonical.is_canonical(value, data + b" ") is False


def test_a_re_serialised_envelope_holds_the_same_payload() -> None:
    # one character of the base64 written as a JSON escape far in: the same envelope once
    # parsed, so the same payload (its canonical form is checked on the payload itself)
    env = signing.unsigned_report({"notes": ["x" * (3 << 20)]})
    at = env.index(b"eHh4", 2 << 20)
    escaped = env[:at] + b"\\u0065" + env[at + 1 :]
    assert json.loads(escaped) == json.loads(env)
    assert signing.open_envelope(escaped) == signing.open_envelope(env)
