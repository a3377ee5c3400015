"""Canonical JSON (RFC 8785) out, and JSON in within limits.

Writing: :func:`canonical_bytes` gives the one byte form of a JSON value, so every byte of a
report file has one meaning. Reading: :func:`parse_json` refuses oversize input, nesting past
the depth limit (scanned before any parsing), duplicate keys, NaN and over-long integers, with
``BadInputError`` for each; nothing else escapes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

import rfc8785

from kit.errors import BadInputError

MAX_DEPTH = 64
MAX_SAFE_INT = 2**53 - 1  # larger integers are written as strings (JCS numbers are doubles)
READ_HINT = "ask the sender for the file exactly as kit wrote it"

# A JSON string, or an unterminated one up to the end: every '"' matches at once, so the scan
# stays linear on hostile input (an unterminated string makes the JSON invalid anyway).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = [0] * 256
_BRACKET_STEP[ord("[")] = _BRACKET_STEP[ord("{")] = 1
_BRACKET_STEP[ord("]")] = _BRACKET_STEP[ord("}")] = -1
_DIGITS_MAX = 400  # longer integer literals are refused before int() sees them


def canonical_bytes(obj: Any, *, max_depth: int = MAX_DEPTH) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value.

    JCS numbers are IEEE doubles, so integers beyond +/-(2**53 - 1) are written as decimal
    strings; NaN and infinities, non-string keys, lone surrogates, non-JSON types and nesting
    deeper than ``max_depth`` raise ``BadInputError`` naming the JSON path.
    """
    data: bytes = rfc8785.dumps(_jcs_value(obj, "$", 0, max_depth))
    return data


def _jcs_value(value: Any, path: str, depth: int, max_depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        _check_text(value, path)
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > MAX_SAFE_INT else value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadInputError(f"{path}: {value} is not a JSON number", hint="use null")
        return value
    if not isinstance(value, (Mapping, list, tuple)):
        raise BadInputError(f"{path}: a {type(value).__name__} is not a JSON value")
    if depth >= max_depth:
        raise BadInputError(f"{path}: nested deeper than {max_depth} levels")
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise BadInputError(f"{path}: key {show(key)} is not a string")
            child = f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)[:80]}]"
            _check_text(key, child)
            out[key] = _jcs_value(item, child, depth + 1, max_depth)
        return out
    return [_jcs_value(item, f"{path}[{i}]", depth + 1, max_depth) for i, item in enumerate(value)]


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInputError(f"{path}: text with a lone surrogate is not valid Unicode") from None


def show(value: object, limit: int = 80) -> str:
    # Strangers' text goes into messages escaped and cut short.
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...'"


def parse_json(data: bytes, what: str, max_bytes: int, max_depth: int) -> Any:
    if not isinstance(data, bytes):
        raise BadInputError(f"{what} must be bytes, not {type(data).__name__}")
    if len(data) > max_bytes:
        raise BadInputError(f"{what} is {len(data)} bytes, over the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInputError(f"{what} is not UTF-8 (byte {e.start})", hint=READ_HINT) from None
    # Depth first, without recursion: strings removed, then the running count of brackets.
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii")
    depth = max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)
    if depth > max_depth:
        raise BadInputError(f"{what} is nested deeper than {max_depth} levels", hint=READ_HINT)
    try:
        return json.loads(
            text, object_pairs_hook=_unique_keys, parse_int=_parse_int, parse_constant=_no_constant
        )
    except ValueError as e:  # JSONDecodeError, and the hooks below
        raise BadInputError(f"{what} is not valid JSON: {e}", hint=READ_HINT) from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key in an object")
    return out


def _parse_int(text: str) -> int | float:
    if len(text) > _DIGITS_MAX:
        raise ValueError(f"an integer with more than {_DIGITS_MAX} digits")
    value = int(text)
    return float(value) if abs(value) > MAX_SAFE_INT else value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def read_limited(path: Path, max_bytes: int, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise BadInputError(f"{path}: cannot read the {what}: {e.strerror}") from None
    if len(data) > max_bytes:
        raise BadInputError(f"{path}: the {what} is over the {max_bytes}-byte limit")
    return data
