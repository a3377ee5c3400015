"""Caps on counts in a report payload, checked on the parsed data before the schema.

pydantic and jsonschema take time in proportion to what they are given (27 s on a payload of
3 M short notes), so a stranger's payload is first walked once, cheaply: every list, object and
string is held to a cap, and a list or object over its cap is not descended into.
"""

from __future__ import annotations

from typing import Any

from kit.errors import BadInputError

# The caps are far above what a real run writes (measured on the fixtures and examples: 24
# records, 996 chunk times per record, 422 GPU samples, 48 argv strings, strings of at most 4,844
# characters, 27 k values in all). MAX_VALUES bounds the schema's work: jsonschema takes about
# 14 us a value.
MAX_ITEMS = 10_000  # any list or object not named below
MAX_STRING = 65_536  # characters, any string not named below
MAX_VALUES = 250_000  # list items and object values in all (the examples: 27 k)
MAX_PROBLEMS = 12  # the walk stops after this many

# Paths with ``[*]`` for any index, and their caps where they differ from the defaults.
ITEM_CAPS: dict[str, int] = {
    "bench.records": 10_000,
    "bench.records[*].text_chunk_times_s": 100_000,
    "gpu_sampling.samples": 100_000,
    "notes": 1_000,
    "non_canonical": 1_000,
}
STRING_CAPS: dict[str, int] = {
    "bench.records[*].text": 4 << 20,
    # a load record's chunk times packed: as many as text_chunk_times_s, ~4-8 characters each
    "bench.records[*].text_chunk_us": 1 << 20,
}


def count_problems(data: dict[str, Any]) -> list[str]:
    """Every list, object and string over its cap, each ``path: N items, over the limit of M``
    (or ``characters``); empty when the payload is within the caps. At most ``MAX_PROBLEMS``."""
    problems: list[str] = []
    # (value, pattern path with [*], path as shown)
    stack: list[tuple[Any, str, str]] = [(data, "", "")]
    values = 0
    while stack and len(problems) < MAX_PROBLEMS:
        value, pattern, shown = stack.pop()
        if isinstance(value, str):
            limit = STRING_CAPS.get(pattern, MAX_STRING)
            if len(value) > limit:
                problems.append(f"{shown}: {len(value)} characters, over the limit of {limit}")
            continue
        if not isinstance(value, (dict, list)):
            continue
        limit = ITEM_CAPS.get(pattern, MAX_ITEMS)
        if len(value) > limit:
            what = "keys" if isinstance(value, dict) else "items"
            problems.append(f"{shown or '(top)'}: {len(value)} {what}, over the limit of {limit}")
            continue
        values += len(value)
        if values > MAX_VALUES:
            problems.append(f"(top): more than {MAX_VALUES} values, over the limit of {MAX_VALUES}")
            break
        if isinstance(value, dict):
            for key, item in value.items():
                if len(key) > MAX_STRING:
                    problems.append(
                        f"{shown or '(top)'}: a key of {len(key)} characters, over "
                        f"the limit of {MAX_STRING}"
                    )
                    break
                stack.append((item, _join(pattern, key), _join(shown, key)))
        else:
            stack.extend((item, f"{pattern}[*]", f"{shown}[{i}]") for i, item in enumerate(value))
    return sorted(problems)


def within_caps(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` itself if it is within the caps, else ``BadInputError`` naming every problem."""
    problems = count_problems(data)
    if problems:
        raise BadInputError(
            "the report payload is over the count limits: " + "; ".join(problems),
            hint="kit writes far less than this; the file was not made by a kit run",
        )
    return data


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
