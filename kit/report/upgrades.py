"""The report's schema changes, oldest first: each turns a payload of one version into the next.

A step fills a field with the value that reads as the report always read; docs/reports.md
lists them. They run on the parsed payload after its signature is checked, never on the file.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kit.bench import RequestRecord, summarize_prefill
from kit.bench.summary import decode_headline
from kit.migrations import Upgrade


def rules_stated(data: dict[str, Any]) -> dict[str, Any]:
    """1 to 2: a validity without ``rules`` was judged by the first rules, so it says 1."""
    validity = data.get("validity")
    if isinstance(validity, dict) and "rules" not in validity:
        data["validity"] = {**validity, "rules": 1}
    return data


def headlines_stored(data: dict[str, Any]) -> dict[str, Any]:
    """2 to 3: a prompt's and a measured prefill depth's headline, where the report has none,
    computed from its records as every reader computed it in its place."""
    bench = data.get("bench")
    if not isinstance(bench, dict):
        return data
    prompts = [p for p in bench.get("prompts") or [] if isinstance(p, dict)]
    depths = [p for p in bench.get("prefill") or [] if isinstance(p, dict)]
    missing = [p for p in prompts if "headline" not in p]
    missing += [d for d in depths if d.get("status") == "measured" and "headline" not in d]
    if not missing:
        return data
    try:
        records = [RequestRecord.model_validate(r) for r in bench.get("records") or []]
    except ValidationError:
        return data  # the model names what is wrong with the records
    for p in prompts:
        if "headline" not in p and isinstance(p.get("prompt"), str):
            p["headline"] = decode_headline(p["prompt"], records).model_dump(mode="json")
    for d in depths:
        depth = d.get("depth")
        if d.get("status") == "measured" and "headline" not in d and isinstance(depth, int):
            made = summarize_prefill(depth, records).headline
            if made is not None:
                d["headline"] = made.model_dump(mode="json")
    return data


# upgrades[i] turns a version i + 1 report into a version i + 2 one (kit.migrations); append only
UPGRADES: list[Upgrade] = [rules_stated, headlines_stored]
