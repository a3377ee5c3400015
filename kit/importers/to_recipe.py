"""An imported result as a kit recipe: the base recipe's build and serving, the file's model,
load and dataset shape, its figures as ``reference.points``, and a comment block that lists
the open pins, every value carried or defaulted, and the warnings."""

from __future__ import annotations

import math
import os
import re
import statistics
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from kit.errors import BadInputError, RecipeError
from kit.importers.parse import shown_model
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint
from kit.recipe import Recipe, load_recipe, validate_data
from kit.recipe.figures import LatencyFigures, ReferencePoint
from kit.recipe.patterns import ForeignPoint, load_class

_TAGS = ("source", "method", "pattern", "kind")
# sections the import sets whole: a base holding its own would mix with them through extends
_OWN = (("reference",), ("bench", "load"), ("bench", "dataset"), ("bench", "slo"))


def recipe_name(file: str) -> str:
    """A recipe name from the file's name (``imported-`` and its stem, lower-case)."""
    stem = Path(file).name
    for suffix in (".jsonl", ".json", ".csv", ".txt"):
        stem = stem.removesuffix(suffix)
    slug = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-._")
    return f"imported-{slug}" if slug else "imported"


def _combine(points: Sequence[ImportedPoint]) -> ReferencePoint:
    """One point's figures over its runs: each figure the mean of the runs that have it (a
    count only when every run agrees)."""
    if len(points) == 1:
        return points[0].figures
    figs = [p.figures for p in points]
    out: dict[str, Any] = {"runs": len(figs)}
    for name, field in ReferencePoint.model_fields.items():
        if name == "runs":
            continue
        values = [getattr(f, name) for f in figs if getattr(f, name) is not None]
        if not values:
            continue
        if field.annotation == (int | None):
            if len(set(values)) == 1 and len(values) == len(figs):
                out[name] = values[0]
        elif isinstance(values[0], LatencyFigures):
            stat = {}
            for key in LatencyFigures.model_fields:
                vs = [getattr(v, key) for v in values if getattr(v, key) is not None]
                if vs:
                    stat[key] = statistics.fmean(vs)
            out[name] = LatencyFigures(**stat)
        else:
            out[name] = statistics.fmean(values)
    return ReferencePoint(**out)


def _grouped(points: Sequence[ImportedPoint]) -> dict[str, list[ImportedPoint]]:
    out: dict[str, list[ImportedPoint]] = {}
    for p in points:
        out.setdefault(p.label, []).append(p)
    return out


def _load(imp: Imported, carried: list[str]) -> dict[str, Any] | None:
    loaded = [p.load for p in imp.points if p.load is not None]
    if not loaded:
        return None
    by_pattern: dict[str, list[ImportedLoad]] = {}
    for one in loaded:
        by_pattern.setdefault(one.pattern, []).append(one)
    pattern, mine = max(by_pattern.items(), key=lambda kv: len(kv[1]))  # the most points
    if len(mine) < len(loaded):
        carried.append(f"bench.load: the {pattern} points only; the others stay reference figures")
    cls = load_class(pattern)
    assert cls is not None  # an imported point's pattern is one of kit's
    counted = {id(p.load): p.figures.requests or p.figures.completed for p in imp.points}
    points = [
        ForeignPoint(
            level=one.level,
            requests=one.requests or counted.get(id(one)),
            warmup_requests=one.warmup_requests,
            arrival=one.arrival,
            max_concurrency=one.max_concurrency,
        )
        for one in mine
    ]
    load = cls.from_foreign(points, carried)
    shown = ", ".join(f"{v:g}" for v in dict.fromkeys(p.level for p in points))
    carried.append(
        f"bench.load: {pattern} [{shown}], {load['requests']} requests a point"
        + (f" ({load['requests_per_stream']} per stream)" if "requests_per_stream" in load else "")
        + (f" ({mine[0].note})" if mine[0].note else "")
    )
    return load


def _dataset(imp: Imported, carried: list[str]) -> dict[str, Any] | None:
    w = imp.workload
    if not (w.input_tokens and w.output_tokens):
        carried.append("bench.dataset: not set, the file states no lengths (the prompts are sent)")
        return None
    data: dict[str, Any] = {
        "kind": "random",
        "input_tokens": w.input_tokens,
        "output_tokens": w.output_tokens,
    }
    if w.range_ratio:
        data["range_ratio"] = w.range_ratio
    if w.ignore_eos is not None:
        data["ignore_eos"] = w.ignore_eos
    how = f" ({w.lengths_from})" if w.lengths_from else ""
    eos = (
        f"ignore_eos {str(w.ignore_eos).lower()} as the file says"
        if w.ignore_eos is not None
        else "ignore_eos not stated (kit's default, true)"
    )
    carried.append(
        f"bench.dataset: random, {w.input_tokens} in / {w.output_tokens} out{how}; {eos}"
    )
    return data


def _context(data: dict[str, Any] | None) -> int:
    """The context a random dataset's longest request needs."""
    if data is None:
        return 0
    r = float(data.get("range_ratio", 0.0))
    return math.ceil((int(data["input_tokens"]) + int(data["output_tokens"])) * (1 + r))


def _reference(imp: Imported) -> dict[str, Any]:
    tool = imp.tool + (f" {imp.tool_version}" if imp.tool_version else "")
    notes = [f"Imported by kit import ({imp.layout})."]
    if imp.reference_only:
        notes.append(f"Reference-only: {imp.reference_only}.")
    for p in imp.points:
        for name, fig in p.other.items():
            shown = ", ".join(f"{k} {v:.4g}" for k, v in fig.model_dump().items() if v is not None)
            notes.append(f"{p.label}: {name}: {shown} ms.")
    points = {
        label: _combine(group).model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        for label, group in _grouped(imp.points).items()
    }
    ref: dict[str, Any] = {"source": imp.file}
    if imp.date:
        ref["date"] = imp.date
    if imp.hardware:
        ref["rig"] = imp.hardware
    if imp.engine:
        ref["engine"] = imp.engine
    ref["tool"] = tool
    ref["notes"] = " ".join(notes)
    ref["points"] = points
    if imp.definitions:
        ref["definitions"] = {k: d.model_dump(mode="json") for k, d in imp.definitions.items()}
    if imp.reference_only:
        ref["reference_only"] = imp.reference_only
    return ref


def overlay(imp: Imported, base: Recipe) -> tuple[dict[str, Any], list[str]]:
    """What the import sets over the base recipe, and a line per value carried or defaulted."""
    carried: list[str] = []
    data: dict[str, Any] = {}
    if imp.hub_repo:
        data["model"] = {"source": "hub", "repo_id": imp.hub_repo, "revision": None}
        data["quantization"] = {"method": "none"}
        data["speculative"] = {"method": "none"}
        carried.append(f"model: {imp.hub_repo} from the hub, revision open")
        carried.append("quantization, speculative: none (the file states neither)")
    else:
        carried.append("model: the base recipe's (the file names no hub repository)")
    bench: dict[str, Any] = {}
    load = _load(imp, carried)
    if load is not None:
        bench["load"] = load
        dataset = _dataset(imp, carried)
        if dataset is not None:
            bench["dataset"] = dataset
        need = _context(dataset)
        if need > base.server.max_model_len:
            length = 1024 * math.ceil(need / 1024)
            data.setdefault("server", {})["max_model_len"] = length
            carried.append(
                f"server.max_model_len: {length}, for the dataset's longest request ({need} tokens)"
            )
    else:
        carried.append("bench: the base recipe's (the file states no load)")
    if imp.server_args:
        extra = [*base.server.extra_args, *imp.server_args]
        data.setdefault("server", {})["extra_args"] = extra
        carried.append("server.extra_args: " + " ".join(imp.server_args))
    if bench:
        data["bench"] = bench
    data["reference"] = _reference(imp)
    carried.append(f"reference: {len(data['reference']['points'])} point(s) of the file's figures")
    return data, carried


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
    head = {"schema_version": 1, "name": recipe_name(imp.file)}
    what = ", ".join(p.label for p in imp.points[:6]) + (" ..." if len(imp.points) > 6 else "")
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
