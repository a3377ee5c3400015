"""Upgrades of ``schema_version``: an append-only list of functions per document kind.

``upgrades[i]`` turns a version ``i + 1`` document into a version ``i + 2`` one; a reader runs
every upgrade from the document's version up to the current one, so a new layout is one new
function at the end of the list and old files keep reading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


def current_version(upgrades: Sequence[Upgrade]) -> int:
    """The version a reader with these upgrades produces."""
    return len(upgrades) + 1


def newer_than_known(data: Any, upgrades: Sequence[Upgrade]) -> int | None:
    """The document's schema_version when it is an integer newer than these upgrades reach. A
    version newer than the list knows is refused: that file needs a newer kit."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool):
        if version > current_version(upgrades):
            return version
    return None


def upgrade(data: dict[str, Any], upgrades: Sequence[Upgrade]) -> dict[str, Any]:
    """``data`` brought to the current version, each step's result stamped with the version it
    reached. A version that is not a known integer is left as it is, for the model's own
    validation to name."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return data
    for step in upgrades[version - 1 :]:
        version += 1
        data = {**step(data), "schema_version": version}
    return data
