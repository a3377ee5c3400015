"""One renderer for pydantic validation errors, for every file kit reads.

Each problem becomes one line, ``label: field.path: message``: union tags pydantic adds to a
location are dropped, an unknown key gets a "did you mean" drawn from the fields of the model
that holds it, and a missing field says so plainly.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

TAG_FIELDS = ("source", "method")  # the discriminators kit's unions use


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The model classes an annotation can hold (through unions, lists and Annotated)."""
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    for arg in getattr(annotation, "__args__", ()) or ():
        found.extend(models_in(arg))
    meta = getattr(annotation, "__metadata__", None)
    if meta is not None:
        found.extend(models_in(getattr(annotation, "__origin__", None)))
    return found


@functools.cache
def model_classes(root: type[BaseModel]) -> tuple[type[BaseModel], ...]:
    """Every model class reachable from ``root``, root first."""
    out: list[type[BaseModel]] = []
    stack: list[type[BaseModel]] = [root]
    while stack:
        cls = stack.pop()
        if cls in out:
            continue
        out.append(cls)
        for field in cls.model_fields.values():
            stack.extend(models_in(field.annotation))
    return tuple(out)


@functools.cache
def field_names(root: type[BaseModel]) -> frozenset[str]:
    """Every field name of every model reachable from ``root``."""
    return frozenset(name for cls in model_classes(root) for name in cls.model_fields)


def friendly_path(loc: tuple[Any, ...], data: Any, root: type[BaseModel]) -> str:
    """The dotted path of an error location in ``data``, union tags dropped."""
    parts: list[str] = []
    node = data
    for item in loc:
        if isinstance(node, dict) and isinstance(item, str) and item in node:
            node = node[item]
            parts.append(item)
        elif isinstance(node, list) and isinstance(item, int) and item < len(node):
            node = node[item]
            parts.append(str(item))
        elif isinstance(node, dict) and isinstance(item, str) and item not in node:
            # a missing field or an unknown-key location still names the field
            if item in field_names(root):
                parts.append(item)
                node = None
        # anything else is a union tag: skip
    return ".".join(parts) or "(top)"


def _pick_model(annotation: Any, node: Any) -> type[BaseModel] | None:
    """The model class an annotation means for this data (a union picks by its tag)."""
    options = models_in(annotation)
    if len(options) <= 1:
        return options[0] if options else None
    for cls in options:
        tag = next((t for t in TAG_FIELDS if t in cls.model_fields), None)
        allowed = getattr(cls.model_fields[tag].annotation, "__args__", ()) if tag else ()
        if tag and isinstance(node, dict) and node.get(tag) in allowed:
            return cls
    return None


def candidates_for(path: str, data: Any, root: type[BaseModel]) -> list[str]:
    """Field names of the model that holds the unknown key at ``path`` (dotted)."""
    cls: type[BaseModel] | None = root
    node = data
    for part in path.split(".")[:-1]:
        if cls is None:
            break
        if isinstance(node, list) and part.isdigit():
            node = node[int(part)] if int(part) < len(node) else None
            continue  # the list's element model was picked with the field
        field = cls.model_fields.get(part)
        if field is None:
            cls = None
            break
        node = node.get(part) if isinstance(node, dict) else None
        element = node[0] if isinstance(node, list) and node else node
        cls = _pick_model(field.annotation, element)
    return list(cls.model_fields) if cls is not None else sorted(field_names(root))


def _message(err: Any, path: str, data: Any, root: type[BaseModel]) -> tuple[str, str]:
    kind = err["type"]
    if kind == "extra_forbidden":
        key = path.rsplit(".", 1)[-1]
        guess = difflib.get_close_matches(key, candidates_for(path, data, root), n=1, cutoff=0.6)
        return path, "unknown key" + (f" (did you mean '{guess[0]}'?)" if guess else "")
    if kind == "missing":
        return path, "required field missing" + _near(path, data, root)
    if kind == "union_tag_invalid":
        ctx = err.get("ctx", {})
        tag = str(ctx.get("discriminator", "tag")).strip("'")
        path = f"{path}.{tag}" if path != "(top)" else tag
        return path, f"{tag} must be one of {ctx.get('expected_tags')}".replace("'", "")
    if kind == "union_tag_not_found":
        tag = str(err.get("ctx", {}).get("discriminator", "a tag")).replace("'", "")
        return path, f"needs {tag}" + _near(f"{path}.{tag}", data, root)
    return path, str(err["msg"]).removeprefix("Value error, ")


def _near(path: str, data: Any, root: type[BaseModel]) -> str:
    """For a required key missing at ``path`` (dotted): "; 'osurce' is not a key (did you mean
    'source'?)" when a key beside it that the model does not know is a near miss of its name,
    else ""."""
    *parents, name = path.split(".")
    node = data
    for part in parents if path.split(".")[0] != "(top)" else []:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return ""
    if not isinstance(node, dict):
        return ""
    known = set(candidates_for(path, data, root))
    unknown = [k for k in node if isinstance(k, str) and k not in known]
    guess = difflib.get_close_matches(name, unknown, n=1, cutoff=0.6)
    return f"; '{guess[0]}' is not a key (did you mean '{name}'?)" if guess else ""


def problems(
    exc: ValidationError,
    data: Any,
    label: str,
    root: type[BaseModel],
    *,
    split_top: bool = False,
    where: Callable[[str], str | None] | None = None,
) -> list[str]:
    """One ``label: path: message`` line per error. With ``split_top``, a model-level check
    that joined several problems with '; ' gives one line each, without a path. ``where``
    turns a field path into the place that holds it (``file:line:col``, or another label);
    a model-level message that starts with a field path is placed by that path."""

    def place(path: str) -> str:
        return (where(path) if where is not None else None) or label

    out: list[str] = []
    for err in exc.errors(include_url=False):
        path, msg = _message(err, friendly_path(tuple(err["loc"]), data, root), data, root)
        if split_top and err["type"] == "value_error" and path == "(top)":
            out.extend(f"{place(m.split(' ', 1)[0].rstrip(':'))}: {m}" for m in msg.split("; "))
            continue
        out.append(f"{place(path)}: {path}: {msg}")
    return out
