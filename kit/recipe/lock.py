"""Lock files: what a recipe leaves open, resolved once and kept beside it.

A recipe may leave a hub revision unpinned (``revision: null``, or a tag) and name a GPU base
image by tag (:func:`open_fields`). ``kit lock RECIPE`` resolves each to the exact bits
(:mod:`kit.lock`) and writes ``<recipe>.lock.yaml`` beside it, as uv.lock or poetry.lock do.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from kit.base import StrictModel
from kit.errors import RecipeError
from kit.recipe.schema import Recipe
from kit.recipe.serving import base_image_for
from kit.recipe.sources import HubModel
from kit.recipe.yamlsafe import load_yaml, read_text

LOCK_SUFFIX = ".lock.yaml"
LOCK_VERSION = 1
COMMIT_SHA = re.compile(r"[0-9a-f]{40}\Z")  # a hub commit
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}\Z")

PinSource = Literal["recipe", "lock", "resolve", "set", "unpinned"]


class LockedPin(StrictModel):
    """One resolved value."""

    field: str = Field(description="Recipe field, e.g. model.revision.")
    value: str = Field(description="The exact value: a commit sha, or NAME:TAG@sha256:...")
    resolved_from: str = Field(description="What was resolved, e.g. Qwen/Qwen3-8B@main.")


class Lock(StrictModel):
    """A recipe's lock file."""

    schema_version: int = Field(LOCK_VERSION, description="Lock file layout version.")
    kind: Literal["kit.lock"] = Field("kit.lock", description="Always kit.lock.")
    recipe: str = Field(description="The recipe file this locks (its name).")
    recipe_sha256: str = Field(description="sha256 of the recipe without the lock and --set.")
    resolved_at: str = Field(description="UTC time of the resolution.")
    pins: list[LockedPin] = Field(description="Each resolved field.")


class PinRecord(StrictModel):
    """A pin as a report records it."""

    field: str = Field(description="Recipe field.")
    value: str | None = Field(description="The value the run used (None: left unpinned).")
    source: PinSource = Field(description="Where the value came from.")


def lock_path(recipe_path: Path) -> Path:
    """``recipes/x.yaml`` -> ``recipes/x.lock.yaml``."""
    return recipe_path.with_name(recipe_path.stem + LOCK_SUFFIX)


def is_lock_file(path: Path) -> bool:
    return path.name.endswith(LOCK_SUFFIX)


def read_lock(path: Path, recipe: str = "RECIPE") -> Lock | None:
    """The lock at ``path``, None when there is none; a malformed one is a RecipeError naming
    the file (read through the same hostile-safe loader as recipes), whose hint locks
    ``recipe`` (as given) again."""
    if not path.exists():
        return None
    data, _ = load_yaml(read_text(path, str(path)), str(path))
    try:
        return Lock.model_validate(data, strict=True)
    except ValidationError as exc:
        lines = [
            f"{path}: {'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        ]
        raise RecipeError(
            lines, hint=f"run `kit lock {shlex.quote(recipe)}` again to rewrite it"
        ) from None


def write_lock(path: Path, lock: Lock) -> Path:
    """Write the lock as YAML (JSON is YAML), with a header saying what it is."""
    body = json.dumps(lock.model_dump(mode="json"), indent=2)
    header = (
        f"# kit lock for {lock.recipe}: the values the recipe leaves open, resolved.\n"
        "# Written by `kit lock`; applied while the recipe's sha256 is recipe_sha256.\n"
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(header + body + "\n")
    tmp.replace(path)
    return path


def open_fields(recipe: Recipe) -> dict[str, str | None]:
    """Every pinnable field and its value: hub revisions, and a GPU recipe's base image."""
    fields: dict[str, str | None] = {}
    if isinstance(recipe.model, HubModel):
        fields["model.revision"] = recipe.model.revision
    if isinstance(recipe.speculative.draft, HubModel):
        fields["speculative.draft.revision"] = recipe.speculative.draft.revision
    if recipe.server.engine.device == "cuda":
        fields["server.engine.image"] = base_image_for(recipe.server.engine)
    return fields


def is_exact(field: str, value: str | None) -> bool:
    """Whether a pin names exact bits: a 40-hex commit, or an image by digest."""
    if value is None:
        return False
    if field == "server.engine.image":
        return bool(_DIGEST.search(value))
    return bool(COMMIT_SHA.match(value))


def pin_sources(
    recipe: Recipe, locked: list[str], overrides: list[str], resolved: bool = False
) -> list[PinRecord]:
    """Each pinnable field of the run's recipe, its value and where it came from: the recipe,
    the lock, ``--resolve`` (locked in the same run) or ``--set``. Reports record every pin
    so."""
    out: list[PinRecord] = []
    set_fields = [o.split("=", 1)[0].strip() for o in overrides if "=" in o]
    for field, value in open_fields(recipe).items():
        source: PinSource
        if any(field == s or field.startswith(s + ".") for s in set_fields):
            source = "set"
        elif field in locked:
            source = "resolve" if resolved else "lock"
        elif value is None:
            source = "unpinned"
        else:
            source = "recipe"
        out.append(PinRecord(field=field, value=value, source=source))
    return out


def to_overrides(lock: Lock) -> list[tuple[list[str], Any]]:
    """The lock's values as (field path, value) pairs, applied like ``--set``.

    Loading the recipe applies the lock before any ``--set`` (which still wins), while the
    lock's ``recipe_sha256`` is the sha256 of the recipe as its files say, without the lock and
    without ``--set``; a recipe edited since is refused until locked again."""
    return [(pin.field.split("."), pin.value) for pin in lock.pins]
