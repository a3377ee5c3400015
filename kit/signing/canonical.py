"""Canonical JSON (RFC 8785) out, and JSON in within limits.

Writing: :func:`canonical_bytes` gives the one byte form of a JSON value, so every byte of a
report file has one meaning. Reading: :func:`read_limited` opens regular files only and checks
the size before reading; :func:`parse_json` refuses input past its limits, with ``BadInputError``.
"""

from __future__ import annotations

import errno
import json
import math
import re
import stat
from collections.abc import Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

import rfc8785

from kit.errors import BadInputError
from kit.paths import FileTooLarge, NotRegularFile, read_regular

MAX_DEPTH = 64
MAX_SAFE_INT = 2**53 - 1  # larger integers are written as strings (JCS numbers are doubles)
READ_HINT = "ask the sender for the file exactly as kit wrote it"

# A JSON string, or an unterminated one up to the end: every '"' matches at once, so the scan
# stays linear on hostile input (an unterminated string makes the JSON invalid anyway).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NUMBER = re.compile(r"[-0-9][-+.0-9eE]*")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = [0] * 256
_BRACKET_STEP[ord("[")] = _BRACKET_STEP[ord("{")] = 1
_BRACKET_STEP[ord("]")] = _BRACKET_STEP[ord("}")] = -1
_DIGITS_MAX = 400  # longer integer literals are refused before int() sees them

# Memory of the parsed value, estimated from counts taken before parsing: CPython bytes per
# array, object, key, item, value string and number (measured on 3.11; see
# experiments/hostile-reports.py). Real reports estimate at 3-4.2 times their bytes (they take
# 2.9-3.4), so with the allowance no report of the size kit writes is refused; a shape of small
# values estimates far higher (`[{},{},...]` 21x, 3 M short notes 13x) and is refused before
# json.loads runs. Inputs under the allowance are never refused for their shape, so small files
# get the precise errors.
MAX_AMPLIFICATION = 4
# Values (array items and object members) in all: canonical_bytes, pydantic and jsonschema take
# time per value (the largest example report has 27 k). Counted as commas plus containers;
# kit.report.limits caps a report payload further.
MAX_VALUES = 300_000
AMPLIFICATION_ALLOWANCE = 8 << 20  # bytes
_COST = {"array": 64, "object": 64, "key": 40, "item": 8, "string": 56, "number": 24}


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


def parse_json(
    data: bytes,
    what: str,
    max_bytes: int,
    max_depth: int,
    *,
    max_containers: int | None = None,
    max_amplification: float = MAX_AMPLIFICATION,
) -> Any:
    """Parse JSON bytes within limits: size, memory estimate, values in all, depth, then
    ``max_containers`` (arrays and objects in all; None: no count limit), before
    ``json.loads`` sees them. Values in all: at most :data:`MAX_VALUES`.

    Refused, each with a ``BadInputError`` (nothing else escapes): oversize input, a shape that
    would take more memory than ``max_amplification`` (:data:`MAX_AMPLIFICATION`) times the
    input, more than :data:`MAX_VALUES` values (both counted before any parsing), nesting past
    ``max_depth``, more containers than ``max_containers``, duplicate keys, NaN and over-long
    integers.
    """
    max_values = MAX_VALUES
    if not isinstance(data, bytes):
        raise BadInputError(f"{what} must be bytes, not {type(data).__name__}")
    if len(data) > max_bytes:
        raise BadInputError(f"{what} is {len(data)} bytes, over the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInputError(f"{what} is not UTF-8 (byte {e.start})", hint=READ_HINT) from None
    # Every string and number is a value or a key, so each comes after a '[', ',' or ':', or is
    # the whole text: a bound taken with bytes.count, before the passes below, whose memory
    # grows with the tokens they remove (about 58 bytes each).
    tokens = sum(map(data.count, (b"[", b",", b":"))) + 1
    if tokens > 2 * max_values + 1:
        raise BadInputError(
            f"{what} has up to {tokens} values and keys, over the limit of {2 * max_values + 1}",
            hint=READ_HINT,
        )
    # One linear pass each, without recursion or a list per token: strings removed (counted),
    # then numbers; what is left is punctuation and literals, counted with str.count.
    rest, strings = _JSON_STRING.subn("", text)
    rest, numbers = _NUMBER.subn("", rest)
    keys, containers = rest.count(":"), rest.count("[") + rest.count("{")
    counts = {
        "array": rest.count("["),
        "object": rest.count("{"),
        "key": keys,
        "item": rest.count(","),
        "string": max(strings - keys, 0),
        "number": numbers,
    }
    # Depth without recursion: the running count of brackets (as many as values, at most).
    brackets = _NOT_BRACKET.sub("", rest).encode("ascii")
    depth = max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)
    del brackets
    if depth > max_depth:
        raise BadInputError(f"{what} is nested deeper than {max_depth} levels", hint=READ_HINT)
    estimate = sum(_COST[kind] * n for kind, n in counts.items())
    if estimate > max_amplification * len(data) + AMPLIFICATION_ALLOWANCE:
        raise BadInputError(
            f"{what} would take about {estimate >> 20} MiB to parse, over the limit of "
            f"{max_amplification:g} times its {len(data)} bytes ({containers} arrays and "
            f"objects, {strings} strings, {numbers} numbers)",
            hint=READ_HINT,
        )
    if (values := counts["item"] + containers) > max_values:
        raise BadInputError(
            f"{what} has about {values} values, over the limit of {max_values}", hint=READ_HINT
        )
    if max_containers is not None and containers > max_containers:
        raise BadInputError(
            f"{what} has {containers} arrays and objects, over the limit of {max_containers}",
            hint=READ_HINT,
        )
    del rest
    try:
        return json.loads(
            text, object_pairs_hook=_unique_keys, parse_int=_parse_int, parse_constant=_no_constant
        )
    except ValueError as e:  # JSONDecodeError, and the hooks below
        raise BadInputError(f"{what} is not valid JSON: {e}", hint=READ_HINT) from None


class _Differs(Exception):
    pass


class _Comparer:
    """A sink for ``rfc8785.dump`` that compares what is written with ``expected`` as it comes,
    so no second copy of the bytes (or of the value, as :func:`canonical_bytes` makes) exists."""

    def __init__(self, expected: bytes) -> None:
        self.expected = memoryview(expected)
        self.at = 0

    def write(self, chunk: bytes) -> int:
        end = self.at + len(chunk)
        if self.expected[self.at : end] != chunk:
            raise _Differs
        self.at = end
        return len(chunk)


def is_canonical(value: Any, data: bytes) -> bool:
    """Whether ``data`` is exactly the RFC 8785 form of ``value``, a value :func:`parse_json`
    gave (its integers are within +/-(2**53 - 1), its depth within the limit), without building
    that form: the bytes are compared as they are written, and the first difference stops it."""
    sink = _Comparer(data)
    try:
        rfc8785.dump(value, sink)
    except (_Differs, rfc8785.CanonicalizationError, UnicodeEncodeError):
        return False
    return sink.at == len(data)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key in an object")
    return out


def _parse_int(text: str) -> int | float:
    if len(text) > _DIGITS_MAX:
        raise ValueError(f"an integer with more than {_DIGITS_MAX} digits")
    value = int(text)
    if abs(value) <= MAX_SAFE_INT:
        return value
    try:
        return float(value)
    except OverflowError:  # json.loads lets only ValueError through as a decode error
        raise ValueError("an integer beyond the range of a double") from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def read_regular_file(path: Path, max_bytes: int, what: str) -> tuple[bytes, int]:
    """The bytes of a regular file of at most ``max_bytes`` (:func:`kit.paths.read_regular`: a
    FIFO cannot block it) and its permission bits; every refusal is a ``BadInputError`` naming
    the file, with a hint for the kind of file it is (``what``: "report file", "public key",
    "private key")."""
    try:
        data, info = read_regular(path, max_bytes)
    except NotRegularFile as e:
        hint = (
            f"name the {what} in that folder, not the folder"
            if e.kind == "a directory"
            else f"kit reads a {what} from a regular file only: save it to one, then name that"
        )
        raise BadInputError(
            f"{path}: cannot read the {what}: not a regular file ({e.kind})", hint=hint
        ) from None
    except FileTooLarge:
        raise BadInputError(
            f"{path}: the {what} is over the {max_bytes}-byte limit",
            hint=f"is this the {what} you meant? no {what} kit writes comes near that size",
        ) from None
    except OSError as e:
        hint = (
            _MISSING.get(what, "check the path")
            if e.errno == errno.ENOENT
            else "check the file's permissions (ls -l), or read it as its owner"
        )
        raise BadInputError(f"{path}: cannot read the {what}: {e.strerror}", hint=hint) from None
    return data, stat.S_IMODE(info.st_mode)


# the hint for a file that is not there, by what it should be
_MISSING = {
    "report file": "check the path: a run writes its report as report.json in its run folder "
    "(under reports/, or -o DIR)",
    "public key": "check the path: a signer's public key is a .pub file (`kit keys export` "
    "prints yours)",
    "private key": "check the path, or make a key pair with `kit keys generate`",
}


def read_limited(path: Path, max_bytes: int, what: str) -> bytes:
    """:func:`read_regular_file`, the bytes only."""
    return read_regular_file(path, max_bytes, what)[0]
