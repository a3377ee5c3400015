"""Caps on counts in a report payload, checked before the schema sees it."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit import signing
from kit.errors import BadInputError
from kit.report.limits import MAX_PROBLEMS, MAX_STRING, MAX_VALUES, count_problems

FIXTURES = Path(__file__).parents[2] / "fixtures" / "reports"
EXAMPLES = Path(__file__).parents[2] / "fixtures" / "examples" / "reports"
UNSIGNED = (FIXTURES / "cpu-tiny-a.json").read_bytes()


def payload(path: Path) -> dict[str, Any]:
    return signing.load_payload(signing.open_envelope_file(path))


BASE = payload(FIXTURES / "cpu-tiny-a.json")


@pytest.mark.parametrize(
    "path", sorted(FIXTURES.glob("*.json")) + sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name
)
def test_real_reports_are_within_the_caps(path: Path) -> None:
    assert count_problems(payload(path)) == []


def test_three_million_notes_are_refused_without_walking_them() -> None:
    data = copy.deepcopy(BASE)
    data["notes"] = ["n"] * 3_000_000
    assert count_problems(data) == ["notes: 3000000 items, over the limit of 1000"]


def test_each_named_cap_and_the_default() -> None:
    data = copy.deepcopy(BASE)
    data["bench"]["records"] = data["bench"]["records"] * 500  # 21,000
    data["bench"]["prompts"][0]["extra"] = list(range(10_001))
    data["gpu_sampling"] = {"samples": [0] * 100_001}
    data["server"]["argv"] = ["x" * (MAX_STRING + 1)]
    assert count_problems(data) == [
        "bench.prompts[0].extra: 10001 items, over the limit of 10000",
        "bench.records: 21000 items, over the limit of 10000",
        "gpu_sampling.samples: 100001 items, over the limit of 100000",
        f"server.argv[0]: {MAX_STRING + 1} characters, over the limit of {MAX_STRING}",
    ]


def test_record_text_has_its_own_cap() -> None:
    data = copy.deepcopy(BASE)
    data["bench"]["records"][3]["text"] = "t" * (MAX_STRING * 2)
    assert count_problems(data) == []
    data["bench"]["records"][3]["text"] = "t" * ((4 << 20) + 1)
    assert count_problems(data) == [
        f"bench.records[3].text: {(4 << 20) + 1} characters, over the limit of {4 << 20}"
    ]


def test_objects_and_keys_are_capped() -> None:
    data = copy.deepcopy(BASE)
    data["versions"] = {f"k{i}": "v" for i in range(10_001)}
    data["recipe"]["x" * (MAX_STRING + 1)] = 1
    assert count_problems(data) == [
        f"recipe: a key of {MAX_STRING + 1} characters, over the limit of {MAX_STRING}",
        "versions: 10001 keys, over the limit of 10000",
    ]


def test_values_in_all_are_capped() -> None:
    data = copy.deepcopy(BASE)
    data["bench"]["records"] = [{"text_chunk_times_s": [0.5] * 9_000} for _ in range(30)]
    assert count_problems(data) == [
        f"(top): more than {MAX_VALUES} values, over the limit of {MAX_VALUES}"
    ]


def test_problems_are_capped() -> None:
    data = copy.deepcopy(BASE)
    data["recipe"] = {f"k{i}": "x" * (MAX_STRING + 1) for i in range(50)}
    assert len(count_problems(data)) == MAX_PROBLEMS


def mutants(seed: int, count: int = 5) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        mutant = bytearray(UNSIGNED)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(mutant))
            if rng.random() < 0.8:
                mutant[at] = rng.randrange(256)
            else:
                del mutant[at : at + rng.randint(1, 64)]
        out.append(bytes(mutant))
    return out


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**64 - 1))
def test_mutated_unsigned_reports_are_parsed_and_counted_or_refused(seed: int) -> None:
    # 4,000 mutated files; with tests/unit/signing/test_limits.py, 10,000 in all
    for data in mutants(seed):
        try:
            parsed = signing.load_payload(signing.open_envelope(data))
        except BadInputError:
            continue
        assert isinstance(count_problems(parsed), list)
