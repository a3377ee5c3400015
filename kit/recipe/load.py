"""Reading a recipe: YAML, ``extends:`` (a parent file whose values this one overrides),
``--set a.b=value`` overrides applied last, and validation through the same models.

Older ``schema_version`` layouts are brought to the current one through :data:`UPGRADES`
(see :mod:`kit.migrations`) before any override applies, since ``--set`` names fields of the
current layout.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from kit.base import FrozenModel
from kit.errors import RecipeError
from kit.migrations import Upgrade, upgrade
from kit.recipe.schema import Recipe
from kit.validation import TAG_FIELDS, problems

# upgrades[i] turns a version i + 1 recipe into a version i + 2 one; append only
UPGRADES: list[Upgrade] = []


class LoadedRecipe(FrozenModel):
    """A validated recipe and where it came from."""

    recipe: Recipe
    path: Path
    chain: list[Path]  # this file first, then each file it extends
    overrides: list[str]

    def resolve_path(self, value: str) -> Path:
        """A path from the recipe: relative ones are relative to the recipe file."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.path.parent / p).resolve()


def _read_yaml(path: Path, label: str) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RecipeError([f"{label}: file not found"]) from None
    except OSError as exc:
        raise RecipeError([f"{label}: cannot read: {exc.strerror}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RecipeError([f"{label}: not valid YAML{where}: {problem}"]) from None
    if not isinstance(data, dict):
        raise RecipeError([f"{label}: a recipe is a mapping of sections"])
    return data


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


def _resolve_extends(path: Path, seen: tuple[Path, ...]) -> tuple[dict[str, Any], list[Path]]:
    path = path.resolve()
    label = str(path.name if not seen else path)
    if path in seen:
        cycle = " -> ".join(p.name for p in (*seen, path))
        raise RecipeError([f"{seen[0]}: extends: cycle {cycle}"])
    data = _read_yaml(path, label if not seen else str(path))
    parent = data.pop("extends", None)
    if parent is None:
        return data, [path]
    if not isinstance(parent, str):
        raise RecipeError([f"{path}: extends: must be a file name"])
    parent_path = (path.parent / parent).resolve()
    if not parent_path.exists():
        raise RecipeError([f"{path}: extends: {parent}: file not found"])
    base, chain = _resolve_extends(parent_path, (*seen, path))
    return _merge(base, data), [path, *chain]


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (["a", "b"], parsed YAML scalar)."""
    if "=" not in item:
        raise RecipeError([f"--set {item}: expected a.b=value"])
    key, raw = item.split("=", 1)
    parts = key.strip().split(".")
    if not all(re.fullmatch(r"[A-Za-z0-9_]+", p) for p in parts):
        raise RecipeError([f"--set {item}: bad key {key!r}"])
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
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
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise RecipeError([f"--set {'.'.join(parts)}: cannot set inside a value"])


def validate_data(data: dict[str, Any], label: str) -> Recipe:
    """A recipe from its data (a file's, or a report's resolved copy), upgraded to the current
    layout first; each problem becomes one ``label: field.path: message`` line."""
    data = upgrade(data, UPGRADES)
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        raise RecipeError(problems(exc, data, label, Recipe, split_top=True)) from None


def load_recipe(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> LoadedRecipe:
    """Read a recipe file, follow ``extends``, apply ``--set`` overrides and validate."""
    p = Path(path)
    data, chain = _resolve_extends(p, ())
    data = upgrade(data, UPGRADES)
    for item in overrides:
        parts, value = parse_override(item)
        _apply_override(data, parts, value)
    recipe = validate_data(data, str(path))
    return LoadedRecipe(recipe=recipe, path=p.resolve(), chain=chain, overrides=list(overrides))
