"""The recipe-file schema editors use (schemas/recipe-file.schema.json): it accepts a partial
recipe with ``extends:`` and still refuses unknown keys in one (tests/repo: every shipped one)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from kit.recipe import recipe_file_json_schema, recipe_json_schema

VALIDATOR = jsonschema.Draft202012Validator(recipe_file_json_schema())


def _messages(data: Any) -> list[str]:
    return sorted(e.message for e in VALIDATOR.iter_errors(data))


def test_schema_is_valid() -> None:
    jsonschema.Draft202012Validator.check_schema(recipe_file_json_schema())


EXTENDS: dict[str, Any] = {
    "extends": "base.yaml",
    "name": "child",
    "server": {"tensor_parallel_size": 2},
    "model": {"shape": {"hidden_size": 256}},
    "speculative": {"draft": {"dflash2": {"weights": "token0"}}},
}


def test_partial_recipe_with_extends_validates() -> None:
    assert _messages(EXTENDS) == []


def test_typo_in_a_recipe_with_extends_is_refused() -> None:
    data = {**EXTENDS, "server": {"tensor_paralel_size": 2}}
    assert _messages(data) == [
        "Additional properties are not allowed ('tensor_paralel_size' was unexpected)"
    ]


@pytest.mark.parametrize("key", ["extendz", "benchh"])
def test_unknown_top_level_key_with_extends_is_refused(key: str) -> None:
    assert _messages({**EXTENDS, key: 1}) == [
        f"Additional properties are not allowed ('{key}' was unexpected)"
    ]


def test_typo_in_a_union_member_with_extends_is_refused() -> None:
    data = {**EXTENDS, "model": {"shape": {"hiden_size": 256}}}
    errors = list(VALIDATOR.iter_errors(data))
    assert len(errors) == 1
    reasons = [e.message for e in errors[0].context or []]
    assert "Additional properties are not allowed ('hiden_size' was unexpected)" in reasons


def test_without_extends_a_recipe_is_complete() -> None:
    assert _messages({"schema_version": 1, "name": "x"}) == [
        "'model' is a required property",
        "'quantization' is a required property",
        "'server' is a required property",
    ]


def test_resolved_recipe_schema_is_unchanged_by_it() -> None:
    """The report embeds the resolved recipe: its schema still refuses ``extends``."""
    errors = list(jsonschema.Draft202012Validator(recipe_json_schema()).iter_errors(EXTENDS))
    assert errors
