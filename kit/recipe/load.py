"""Reading a recipe: YAML, ``extends:`` (a parent file whose values this one overrides),
``--set a.b=value`` overrides applied last, and validation through the same models
(:func:`load_recipe`).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from kit.base import FrozenModel
from kit.errors import RecipeError
from kit.migrations import Upgrade, upgrade
from kit.recipe.lock import is_lock_file, lock_path, read_lock, to_overrides
from kit.recipe.quality import harness_problems
from kit.recipe.runnable import series_problems
from kit.recipe.schema import Recipe
from kit.recipe.yamlsafe import MAX_BYTES, MAX_DEPTH, Marks, YamlSyntaxError, load_yaml, read_text
from kit.validation import TAG_FIELDS, problems

MAX_EXTENDS = 16  # files in one extends chain, the recipe included
EXTENDS_ANYWHERE = "KIT_RECIPE_EXTENDS_ANYWHERE"  # 1: extends may name any file, absolute too

# upgrades[i] turns a version i + 1 recipe into a version i + 2 one; append only. None yet:
# every field added since version 1 has a default (RecipeModel.late_fields keep the hash), so an
# old recipe is a current one; a field renamed, removed or given a new meaning is a step here
UPGRADES: list[Upgrade] = []


class LoadedRecipe(FrozenModel):
    """A validated recipe and where it came from."""

    recipe: Recipe
    path: Path
    chain: list[Path]  # this file first, then each file it extends
    overrides: list[str]
    lock_file: Path | None = None  # the lock applied (kit.recipe.lock), if any
    locked: list[str] = Field(default_factory=list)  # the fields it set
    resolved: bool = False  # locked in this same run (kit reproduce --resolve)

    def resolve_path(self, value: str) -> Path:
        """A path from the recipe: relative ones are relative to the recipe file."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.path.parent / p).resolve()


def _read_yaml(path: Path, label: str) -> tuple[dict[str, Any], Marks]:
    data, marks = load_yaml(read_text(path, label), label)
    if not isinstance(data, dict):
        raise RecipeError([f"{label}: a recipe is a mapping of sections"])
    return data, marks


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            # a different union member replaces the whole section rather than mixing keys
            tag = next((t for t in TAG_FIELDS if t in value and t in out[key]), None)
            if tag and value[tag] != out[key][tag]:
                out[key] = value
            else:
                out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _exists(data: Any, path: str) -> bool:
    node = data
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _resolve(path: Path, label: str) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):  # 3.11 raises RuntimeError on a symlink loop
        raise RecipeError([f"{label}: cannot resolve the path (a symlink loop?)"]) from None


def _is_dir(path: Path) -> bool:
    """``Path.is_dir``, False where the path cannot be looked at (no permission to traverse a
    directory above it, as in a container that is not the checkout's owner)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _roots(top: Path) -> list[Path]:
    """Where ``extends`` may reach: the recipe's own directory and the repository holding it
    (the nearest directory above with both recipes/ and patches/)."""
    roots = [top.parent]
    for d in (top.parent, *top.parent.parents):
        if _is_dir(d / "recipes") and _is_dir(d / "patches"):
            roots.append(d)
            break
    return roots


class _Chain(FrozenModel):
    roots: list[Path]
    anywhere: bool


def _parent_path(path: Path, parent: Any, where: str, chain: _Chain) -> Path:
    if not isinstance(parent, str) or not parent or "\0" in parent:
        raise RecipeError([f"{where}: extends: must be a file name"])
    if Path(parent).is_absolute() and not chain.anywhere:
        raise RecipeError(
            [f"{where}: extends: {parent}: an absolute path (give one relative to the recipe)"],
            hint=f"{EXTENDS_ANYWHERE}=1 allows extends to reach any file",
        )
    parent_path = _resolve(path.parent / parent, f"{where}: extends: {parent}")
    if not chain.anywhere and not any(parent_path.is_relative_to(r) for r in chain.roots):
        raise RecipeError(
            [f"{where}: extends: {parent}: outside the recipe's directory and the repository"],
            hint=f"{EXTENDS_ANYWHERE}=1 allows extends to reach any file",
        )
    try:
        found = parent_path.exists()
    except OSError:  # reading it says why it cannot be
        found = True
    if not found:
        raise RecipeError([f"{where}: extends: {parent}: file not found"])
    return parent_path


def _resolve_extends(
    path: Path, label: str, seen: tuple[Path, ...], chain: _Chain
) -> tuple[dict[str, Any], Marks, list[Path]]:
    data, marks = _read_yaml(path, label)
    parent = data.pop("extends", None)
    where = marks.pop("extends", label)
    if parent is None:
        return data, marks, [path]
    parent_path = _parent_path(path, parent, where, chain)
    if parent_path in (*seen, path):
        cycle = " -> ".join(p.name for p in (*seen, path, parent_path))
        raise RecipeError([f"{where}: extends: cycle {cycle}"])
    if len(seen) + 2 > MAX_EXTENDS:
        raise RecipeError([f"{where}: extends: a chain of more than {MAX_EXTENDS} files"])
    base, base_marks, files = _resolve_extends(parent_path, str(parent_path), (*seen, path), chain)
    merged = _merge(base, data)
    places = {p: m for p, m in base_marks.items() if _exists(merged, p)}
    places.update(marks)
    return merged, places, [path, *files]


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (["a", "b"], parsed YAML value; text when it is not YAML)."""
    if "=" not in item:
        raise RecipeError([f"--set {item}: expected a.b=value"])
    key, raw = item.split("=", 1)
    parts = key.strip().split(".")
    if not all(re.fullmatch(r"[A-Za-z0-9_]+", p) for p in parts):
        raise RecipeError([f"--set {item}: bad key {key!r}"])
    if len(parts) > MAX_DEPTH:
        raise RecipeError([f"--set {item}: a key nested deeper than {MAX_DEPTH} levels"])
    if len(raw.encode()) > MAX_BYTES:
        raise RecipeError([f"--set {item[:40]}...: over the {MAX_BYTES}-byte limit"])
    label = f"--set {item}"
    try:
        value = load_yaml(raw, label)[0] if raw != "" else ""
    except YamlSyntaxError:
        value = raw
    except RecipeError as exc:  # the override names the place; a line and column add nothing
        at = re.compile(re.escape(label) + r":\d+:\d+: ")
        raise RecipeError([at.sub(f"{label}: ", p, count=1) for p in exc.problems]) from None
    return parts, value


def _apply_override(data: dict[str, Any], parts: list[str], value: Any) -> None:
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            continue
        if not isinstance(node, dict):
            raise RecipeError([f"--set {'.'.join(parts)}: {'.'.join(parts[: i + 1])} is a value"])
        node = node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    elif isinstance(node, dict) and last in TAG_FIELDS and value == "none" != node.get(last):
        # speculative.method=none, quantization.method=none: nothing of the section's settings
        # applies any more, so the section is replaced (later --set keys still apply)
        node.clear()
        node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise RecipeError([f"--set {'.'.join(parts)}: cannot set inside a value"])


class _Where:
    """A field path's place: the file, line and column holding it, or the ``--set`` that set it."""

    def __init__(self, marks: Marks) -> None:
        self.marks = dict(marks)
        self.overrides: list[tuple[str, str]] = []

    def set_by(self, dotted: str, label: str) -> None:
        self.marks = {
            p: m for p, m in self.marks.items() if p != dotted and not p.startswith(dotted + ".")
        }
        self.overrides.append((dotted, label))

    def __call__(self, path: str) -> str | None:
        for dotted, label in reversed(self.overrides):
            if path == dotted or path.startswith(dotted + "."):
                return label
        if path in self.marks:
            return self.marks[path]
        for dotted, label in reversed(self.overrides):  # a key no file has: a --set made it
            if dotted.startswith(path + "."):
                return label
        return None


def validate_data(
    data: dict[str, Any], label: str, where: Callable[[str], str | None] | None = None
) -> Recipe:
    """A recipe from its data (a file's, or a report's resolved copy), upgraded to the current
    layout first; each problem becomes one ``label: field.path: message`` line, where
    ``where`` (a field path's ``file:line:col``) names no better place."""
    data = upgrade(data, UPGRADES)
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        lines = problems(exc, data, label, Recipe, split_top=True, where=where)
        raise RecipeError(lines) from None


def load_recipe(
    path: str | Path, overrides: list[str] | tuple[str, ...] = (), *, use_lock: bool = True
) -> LoadedRecipe:
    """Read a recipe file, follow ``extends``, apply its lock file where there is one
    (:mod:`kit.recipe.lock`), then the ``--set`` overrides, and validate: the models, then
    what running it needs of this checkout (:mod:`kit.recipe.runnable`).

    Older ``schema_version`` layouts are brought to the current one through :data:`UPGRADES`
    (see :mod:`kit.migrations`) before any override applies, since ``--set`` names fields of
    the current layout.

    Files are read through :mod:`kit.recipe.yamlsafe` (size, type and YAML limits).
    ``extends`` is relative to the file that names it, reaches only the recipe's own directory
    and the repository holding it (unless ``KIT_RECIPE_EXTENDS_ANYWHERE=1``), and a chain holds
    at most :data:`MAX_EXTENDS` files. Each problem names its place: ``file:line:col`` of the
    value (in the file of the chain that holds it), or the ``--set`` that set it."""
    label = str(path)
    top = _resolve(Path(path), label)
    if is_lock_file(top):
        raise RecipeError(
            [f"{label}: a lock file, not a recipe"],
            hint=f"name the recipe it locks ({top.name.removesuffix('.lock.yaml')}.yaml)",
        )
    anywhere = os.environ.get(EXTENDS_ANYWHERE, "") not in ("", "0")
    chain = _Chain(roots=_roots(top), anywhere=anywhere)
    data, marks, files = _resolve_extends(top, label, (), chain)
    data = upgrade(data, UPGRADES)
    where = _Where(marks)
    lock_file = lock_path(top)
    lock = read_lock(lock_file, label) if use_lock else None
    if lock is not None:
        base = validate_data(copy.deepcopy(data), label, where).sha256()
        if lock.recipe_sha256 != base:
            raise RecipeError(
                [f"{lock_file}: recipe_sha256: the recipe changed since it was locked"],
                hint=f"run `kit lock {label}` again (or remove {lock_file.name})",
            )
        for parts, value in to_overrides(lock):
            _apply_override(data, parts, value)
            where.set_by(".".join(parts), f"{lock_file}: {'.'.join(parts)}")
    for item in overrides:
        parts, value = parse_override(item)
        _apply_override(data, parts, value)
        where.set_by(".".join(parts), f"--set {item}")
    recipe = validate_data(data, label, where)
    server = recipe.server
    found = series_problems(server.engine, server.patches, where("server.patches") or label)
    harness = recipe.bench.quality.harness if recipe.bench.quality else None
    include = "bench.quality.harness.include_path"
    found += harness_problems(harness, top.parent, where(include) or label)
    if found:
        raise RecipeError(found)
    return LoadedRecipe(
        recipe=recipe,
        path=top,
        chain=files,
        overrides=list(overrides),
        lock_file=lock_file if lock is not None else None,
        locked=[pin.field for pin in lock.pins] if lock is not None else [],
    )


def load_embedded(
    data: dict[str, Any], label: str, path: Path, overrides: list[str] | tuple[str, ...] = ()
) -> LoadedRecipe:
    """A recipe as a report embeds it (resolved: no ``extends``, its pins in place), with
    ``--set`` overrides applied; ``path`` names it (relative paths resolve beside it)."""
    data = upgrade(copy.deepcopy(data), UPGRADES)
    for item in overrides:
        parts, value = parse_override(item)
        _apply_override(data, parts, value)
    return LoadedRecipe(
        recipe=validate_data(data, label), path=path, chain=[], overrides=list(overrides)
    )
