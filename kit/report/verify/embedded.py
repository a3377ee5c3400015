"""Verify items over what the report says was run: the embedded ``recipe`` (its hash, name and
protocol flags) and the ``patches`` manifest (well-formed, naming the recipe's series)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from kit.errors import RecipeError
from kit.recipe import recipe_sha256, validate_data
from kit.recipe.protocol import non_canonical_reasons
from kit.report.files import cut
from kit.report.verify.checklist import CheckItem, check_item
from kit.runtimes import named as named_runtime
from kit.signing import canonical_bytes

_SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z")
_PATCH_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.patch\Z")


def recipe_item(data: dict[str, Any]) -> CheckItem:
    recipe, stored = data.get("recipe"), data.get("recipe_sha256")
    if not isinstance(recipe, dict) or not isinstance(stored, str):
        return CheckItem(name="recipe", ok=False, detail="no embedded recipe or recipe_sha256")
    problems: list[str] = []
    # The hash was taken over the recipe as kit dumped it, but the JSON round trip turns a
    # float with an integral value (1.0) into an int (1). The recipe model turns it back; its
    # dump is cut to the keys the report carries, so a field a newer kit added (with its
    # default) does not change the hash, while a key removed from the report still does. A
    # hash over the RFC 8785 bytes, which the round trip leaves alone, is accepted too.
    candidates = [hashlib.sha256(canonical_bytes(recipe)).hexdigest(), recipe_sha256(recipe)]
    try:
        model = validate_data(recipe, "recipe")
    except RecipeError as e:
        problems += e.problems
    else:
        candidates.append(recipe_sha256(_restricted(model.to_json_dict(), recipe)))
        if data.get("recipe_name") != model.name:
            problems.append(
                f"recipe_name {cut(repr(data.get('recipe_name')))} is not the recipe's "
                f"name {model.name!r}"
            )
        reasons = non_canonical_reasons(recipe)
        if data.get("non_canonical") != reasons:
            problems.append("non_canonical does not list the recipe's departures from the protocol")
        if data.get("canonical") is not (not reasons):
            problems.append(
                f"canonical is {data.get('canonical')!r}, the recipe says {not reasons}"
            )
    if stored not in candidates:
        problems.insert(
            0,
            f"recipe_sha256 {cut(stored, 20)} does not match the embedded recipe "
            f"({candidates[-1]})",
        )
    return check_item(
        "recipe",
        problems,
        f"sha256 {stored[:16]}… matches the embedded recipe; protocol flags agree",
        "the embedded recipe does not match its hash or the report",
    )


def _restricted(normalized: Any, raw: Any) -> Any:
    """``normalized`` cut to the keys ``raw`` has, all the way down."""
    if isinstance(normalized, dict) and isinstance(raw, dict):
        return {k: _restricted(normalized[k], raw[k]) for k in raw if k in normalized}
    if isinstance(normalized, list) and isinstance(raw, list) and len(normalized) == len(raw):
        return [_restricted(n, r) for n, r in zip(normalized, raw, strict=True)]
    return normalized


# a table of checks on the embedded patches, run in order, each adding its problem
def patches_item(data: dict[str, Any]) -> CheckItem:  # noqa: C901, PLR0915
    manifest = data.get("patches")
    recipe = _obj(data.get("recipe"))
    named = _obj(recipe.get("server")).get("patches")
    if manifest is None:
        runtime = named_runtime(_obj(data.get("server")).get("runtime"))
        if named and runtime is not None and not runtime.knows_engine:
            return CheckItem(
                name="patches",
                ok=True,
                detail=f"not known: the server was not kit's (kit bench --target), so nothing "
                f"shows whether it carries the recipe's series {cut(repr(named))}",
            )
        if named:
            return CheckItem(
                name="patches",
                ok=False,
                detail=f"the recipe applies patch series {cut(repr(named))}, "
                "but the report has no patch manifest",
            )
        return CheckItem(name="patches", ok=True, detail="none applied (the recipe names none)")
    problems: list[str] = []
    if not isinstance(manifest, dict):
        return CheckItem(name="patches", ok=False, detail="the patch manifest is not an object")
    series = manifest.get("series")
    if not isinstance(series, str) or not series:
        problems.append("series: missing or not a name")
    elif named and series != named:
        problems.append(f"series {series!r} is not the recipe's {cut(repr(named))}")
    engine = _obj(data.get("engine"))
    claimed = engine.get("patch_series")
    if claimed and claimed != series:
        problems.append(f"the engine says it carries {cut(repr(claimed))}, not {series!r}")
    built_for = (manifest.get("engine"), manifest.get("version"))
    if engine and built_for != (engine.get("name"), engine.get("version")):
        problems.append(
            f"the manifest is for {cut(str(built_for[0]))} {cut(str(built_for[1]))}, the "
            f"engine that served is {cut(str(engine.get('name')))} "
            f"{cut(str(engine.get('version')))}"
        )
    patches, files = manifest.get("patches"), manifest.get("files")
    if not isinstance(patches, list) or not patches:
        problems.append("patches: not a non-empty list")
        patches = []
    if not isinstance(files, list):
        problems.append("files: not a list")
        files = []
    seen: set[str] = set()
    for i, p in enumerate(patches):
        if not isinstance(p, dict):
            problems.append(f"patches[{i}]: not an object")
            continue
        name = p.get("file")
        if not isinstance(name, str) or not _PATCH_FILE.match(name):
            problems.append(f"patches[{i}].file: {cut(repr(name))} is not a patch file name")
        elif name in seen:
            problems.append(f"patches[{i}].file: {name} listed twice")
        else:
            seen.add(name)
        if not _is_sha256(p.get("sha256")):
            problems.append(f"patches[{i}].sha256: {cut(repr(p.get('sha256')))} is not a sha256")
        if "state" in p and p["state"] != "applied":
            problems.append(f"patches[{i}]: state {cut(repr(p['state']))}, not applied")
    paths: set[str] = set()
    for i, f in enumerate(files):
        if not isinstance(f, dict):
            problems.append(f"files[{i}]: not an object")
            continue
        path = f.get("path")
        if not isinstance(path, str) or not _relative_path(path):
            problems.append(f"files[{i}].path: {cut(repr(path))} is not a relative path")
        elif path in paths:
            problems.append(f"files[{i}].path: {path} listed twice")
        else:
            paths.add(path)
        if f.get("sha256") is None:
            problems.append(f"files[{i}]: {cut(repr(path))} is missing on the engine")
        elif not _is_sha256(f.get("sha256")):
            problems.append(f"files[{i}].sha256: {cut(repr(f.get('sha256')))} is not a sha256")
    return check_item(
        "patches",
        problems,
        f"series {series}: {len(patches)} patch(es) and {len(files)} file(s) with sha256",
        "the patch manifest is malformed",
    )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and bool(_SHA256_HEX.match(value))


def _relative_path(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and "\\" not in path and ".." not in parts
