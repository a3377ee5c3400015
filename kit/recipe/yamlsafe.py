"""Reading recipe YAML that cannot crash, hang or exhaust kit.

A file is read without blocking, within :data:`MAX_BYTES` (:func:`read_text`); its event stream
is checked before a node is composed, and the nodes become plain JSON data (:func:`load_yaml`).
Every problem is one ``file:line:col: message`` line in a :class:`~kit.errors.RecipeError`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from kit.errors import RecipeError
from kit.paths import FileTooLarge, NotRegularFile, read_regular

MAX_BYTES = 1 << 20  # a recipe is a page of YAML; 1 MiB is generous
MAX_DEPTH = 32
MAX_INT = 2**53  # what a JSON number holds exactly
_MAX_INT_TEXT = 24  # digits (and 0x, _, sign) worth parsing at all

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"
_ALLOWED_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null", "map", "seq")}

Marks = dict[str, str]  # dotted field path -> "file:line:col" of its key (or list item)


# what to do about a recipe file that cannot be read
MISSING_HINT = "check the path: kit's recipes are recipes/*.yaml (`kit recipe pick` names one)"
IRREGULAR_HINT = "name the recipe's .yaml file itself (not a folder, pipe or device)"
LARGE_HINT = "a recipe is a page of YAML: is this file a recipe?"
UNREADABLE_HINT = "check the path and the file's permissions"
UTF8_HINT = "save the recipe as UTF-8 text"


class YamlSyntaxError(RecipeError):
    """Text that is not YAML at all (as opposed to YAML that kit refuses)."""


def _at(label: str, mark: Any) -> str:
    return f"{label}:{mark.line + 1}:{mark.column + 1}" if mark is not None else label


def read_text(path: Path, label: str, limit: int = MAX_BYTES) -> str:
    """A regular file's text, at most ``limit`` bytes of strict UTF-8; never blocks: opened
    non-blocking and checked with fstat before any byte is read (a FIFO or a device is refused
    at once, a file over ``limit`` too)."""
    try:
        data, _ = read_regular(path, limit)
    except FileNotFoundError:
        raise RecipeError([f"{label}: file not found"], hint=MISSING_HINT) from None
    except NotRegularFile:
        raise RecipeError([f"{label}: not a regular file"], hint=IRREGULAR_HINT) from None
    except FileTooLarge as exc:
        size = f"{exc.size} bytes, over" if exc.size is not None else "over"
        raise RecipeError([f"{label}: {size} the {limit}-byte limit"], hint=LARGE_HINT) from None
    except OSError as exc:
        raise RecipeError([f"{label}: cannot read: {exc.strerror}"], hint=UNREADABLE_HINT) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError([f"{label}: not UTF-8 (byte {exc.start})"], hint=UTF8_HINT) from None


def _check_events(text: str, label: str) -> None:
    """Refuse, before anything is composed, anchors and aliases, tags beyond the JSON types and
    nesting deeper than :data:`MAX_DEPTH`."""
    depth = 0
    loader = _Loader(text)
    try:
        while loader.check_event():
            event = loader.get_event()
            where = _at(label, event.start_mark)
            if isinstance(event, yaml.AliasEvent):
                raise RecipeError([f"{where}: aliases (*{event.anchor}) are not allowed"])
            if getattr(event, "anchor", None) is not None:
                raise RecipeError([f"{where}: anchors (&{event.anchor}) are not allowed"])
            tag = getattr(event, "tag", None)
            if tag is not None and tag != "!" and tag not in _ALLOWED_TAGS:
                raise RecipeError([f"{where}: the tag {_short(tag)} is not allowed"])
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise RecipeError([f"{where}: nested deeper than {MAX_DEPTH} levels"])
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, label) from None
    finally:
        loader.dispose()


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


def _yaml_error(exc: yaml.YAMLError, label: str) -> YamlSyntaxError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return YamlSyntaxError([f"{_at(label, mark)}: not valid YAML: {problem}"])


def _scalar(node: yaml.ScalarNode, label: str, constructor: Any) -> Any:
    where = _at(label, node.start_mark)
    tag = node.tag
    if tag == _TAG + "int":
        if len(node.value) > _MAX_INT_TEXT:
            raise RecipeError([f"{where}: integer out of range (±2**53)"])
        value = constructor.construct_yaml_int(node)
        if abs(value) > MAX_INT:
            raise RecipeError([f"{where}: integer out of range (±2**53)"])
        return value
    if tag == _TAG + "float":
        value = constructor.construct_yaml_float(node)
        if not math.isfinite(value):
            raise RecipeError([f"{where}: {node.value} is not a finite number"])
        return value
    if tag == _TAG + "bool":
        return constructor.construct_yaml_bool(node)
    if tag == _TAG + "null":
        return None
    if tag in (_TAG + "str", _TAG + "timestamp"):  # an unquoted date stays the text written
        return str(node.value)
    raise RecipeError([f"{where}: {_short(tag)} values are not allowed"])


def _build(node: yaml.Node, label: str, path: str, marks: Marks, constructor: Any) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node, label, constructor)
    if isinstance(node, yaml.SequenceNode):
        out_list: list[Any] = []
        for i, item in enumerate(node.value):
            sub = f"{path}.{i}" if path else str(i)
            marks[sub] = _at(label, item.start_mark)
            out_list.append(_build(item, label, sub, marks, constructor))
        return out_list
    assert isinstance(node, yaml.MappingNode)
    out: dict[str, Any] = {}
    first: dict[str, Any] = {}
    for key_node, value_node in node.value:
        kwhere = _at(label, key_node.start_mark)
        if not isinstance(key_node, yaml.ScalarNode):
            raise RecipeError([f"{kwhere}: a key must be plain text"])
        if key_node.tag == _TAG + "merge":
            raise RecipeError([f"{kwhere}: merge keys (<<) are not allowed"])
        key = str(key_node.value)
        if key in first:
            line = first[key].line + 1
            raise RecipeError([f"{kwhere}: duplicate key {key!r} (first at line {line})"])
        first[key] = key_node.start_mark
        sub = f"{path}.{key}" if path else key
        marks[sub] = kwhere
        out[key] = _build(value_node, label, sub, marks, constructor)
    return out


def load_yaml(text: str, label: str) -> tuple[Any, Marks]:
    """Plain JSON data from YAML text (integers within ±2**53, finite floats, text keys, no
    duplicate keys) and where each field path sits in it: each value's place in the file, in a
    :data:`Marks` map from its dotted field path."""
    _check_events(text, label)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        marks: Marks = {}
        data = None if node is None else _build(node, label, "", marks, loader)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, label) from None
    finally:
        loader.dispose()
    return data, marks
