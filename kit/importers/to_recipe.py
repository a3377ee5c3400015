"""An imported result as a kit recipe: the base recipe's build and serving, what the import
sets over it (:mod:`kit.importers.overlay`), and a comment block that lists the open pins,
every value carried or defaulted, and the warnings."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import Any

import yaml

from kit.errors import BadInputError, RecipeError
from kit.importers.overlay import overlay
from kit.importers.parse import shown_model
from kit.importers.schema import Imported
from kit.recipe import load_recipe, validate_data

_TAGS = ("source", "method", "pattern", "kind")
# sections the import sets whole: a base holding its own would mix with them through extends
_OWN = (("reference",), ("bench", "load"), ("bench", "dataset"), ("bench", "slo"))


def recipe_name(file: str, part: str | None = None) -> str:
    """A recipe name from the file's name (``imported-`` and its stem, lower-case), and the
    part read of it (a BENCHMARKS.md row's line)."""
    stem = Path(file).name
    for suffix in (".jsonl", ".json", ".csv", ".txt", ".md", ".log", ".yaml"):
        stem = stem.removesuffix(suffix)
    if part:
        stem = f"{stem}-{part}"
    slug = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-._")
    return f"imported-{slug}" if slug else "imported"


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``; a section whose tag differs (another union member) replaces."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            tag = next((t for t in _TAGS if t in value and t in old), None)
            out[key] = value if tag and value[tag] != old[tag] else _merge(old, value)
        else:
            out[key] = value
    return out


def _has(data: dict[str, Any], path: tuple[str, ...]) -> bool:
    node: Any = data
    for key in path:
        if not isinstance(node, dict) or node.get(key) is None:
            return False
        node = node[key]
    return True


def _comment(lines: list[str]) -> str:
    """Comment lines, each wrapped at 98 columns (a bullet's rest indented under its text)."""
    out = []
    for line in lines:
        if not line:
            out.append("#")
            continue
        indent = "    " if line.startswith("  - ") else ""
        out += textwrap.wrap(
            line,
            96,
            initial_indent="# ",
            subsequent_indent="# " + indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
    return "\n".join(out) + "\n"


def _header(imp: Imported, carried: list[str], extends: str | None) -> str:
    version = f" {imp.tool_version}" if imp.tool_version else " (version not stated)"
    first = f"# Imported by `kit import` from {imp.file}:\n"  # whole, however long
    lines = [f"{imp.tool}{version}, {imp.layout} (detected from its content)."]
    if imp.reference_only:
        lines.append(f"Reference-only: {imp.reference_only}.")
    lines += [
        "",
        "Open pins: what the file does not say. Fill them (kit lock, --set, --resolve) before",
        "a run of this recipe is comparable with the reference:",
    ]
    lines += [f"  - {pin.field}: {pin.reason}" for pin in imp.open_pins]
    lines += ["", "Carried from the file, or defaulted:"]
    base = f"extends {extends}" if extends else "complete (the base recipe's values written out)"
    lines += [f"  - {c}" for c in [base, *carried, *imp.notes]]
    if imp.warnings:
        lines += ["", "Warnings:"]
        lines += [f"  - {w}" for w in imp.warnings]
    return first + _comment(lines)


def _dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=96
    )


def _reachable(base: Path, out: Path) -> bool:
    """Whether ``extends`` from ``out`` may name ``base`` (kit.recipe.load's rule: the
    recipe's own directory, or the repository holding it)."""
    roots = [out.parent]
    for d in (out.parent, *out.parent.parents):
        if (d / "recipes").is_dir() and (d / "patches").is_dir():
            roots.append(d)
            break
    return any(base.is_relative_to(r) for r in roots)


def recipe_text(imp: Imported, base: Path, out: Path | None) -> str:
    """The recipe's YAML: extending ``base`` where a file at ``out`` may name it and the base
    sets no reference or load of its own, else complete; validated."""
    loaded = load_recipe(base)
    base_data = loaded.recipe.to_json_dict()
    over, carried = overlay(imp, loaded.recipe)
    head = {"schema_version": 1, "name": recipe_name(imp.file, imp.part)}
    labels = [p.label for p in imp.points] or list(imp.prompts)
    what = ", ".join(labels[:6]) + (" ..." if len(labels) > 6 else "")
    head["description"] = f"{imp.tool} result {imp.file}: {shown_model(imp.model)}; {what}."
    base_path = loaded.path
    own = [".".join(p) for p in _OWN if _has(base_data, p)]
    extends = None
    if out is not None and not own and _reachable(base_path, out.resolve()):
        extends = os.path.relpath(base_path, out.resolve().parent)
    if extends is not None:
        data = {**head, "extends": extends, **over}
    else:
        for path in _OWN:  # the file's, or none: never the base's mixed with the file's
            section = base_data if len(path) == 1 else base_data.get(path[0], {})
            section.pop(path[-1], None)
        data = _merge(base_data, {**head, **over})
        if own:
            carried.insert(0, f"the base sets {', '.join(own)} of its own: written complete")
    text = _header(imp, carried, extends) + _dump(data)
    if extends is None:
        validate_data(yaml.safe_load(text), imp.file)
    return text


def write_recipe(imp: Imported, base: Path, out: Path) -> str:
    """Write the recipe at ``out`` once it validates there (nothing is written otherwise)."""
    text = recipe_text(imp, base, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp.yaml")
    try:
        tmp.write_text(text)
        load_recipe(tmp)
        os.replace(tmp, out)
    except RecipeError as exc:  # a recipe kit wrote and cannot read back: say where
        raise RecipeError([p.replace(str(tmp), str(out)) for p in exc.problems]) from None
    except OSError as exc:
        raise BadInputError(f"{out}: cannot write it ({exc.strerror or exc})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return text
