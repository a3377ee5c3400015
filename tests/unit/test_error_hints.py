"""Every KitError has a hint: each class in kit carries a default one, true of every error of the
class, for a raise site that gives none; every raise site in kit gives a hint or raises a class
with its own; and the CLI prints it."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import kit
import kit.errors as errors
from kit.console import report_error
from kit.errors import KitError

KIT = Path(kit.__file__).resolve().parent


def sources() -> list[tuple[str, ast.Module]]:
    """Every module of kit, parsed: (dotted name, tree)."""
    out = []
    for path in sorted(KIT.rglob("*.py")):
        parts = path.relative_to(KIT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, ast.parse(path.read_text(), str(path))))
    return out


def error_classes() -> dict[str, type[KitError]]:
    """Every KitError subclass defined in kit, by name: kit.errors's, and any other module's
    (found by its class statement, then imported)."""
    found = {
        name: cls
        for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, KitError)
    }
    grew = True
    while grew:  # a subclass of a subclass, in any order
        grew = False
        for module, tree in sources():
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef) or node.name in found:
                    continue
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                if bases & found.keys():
                    found[node.name] = getattr(importlib.import_module(module), node.name)
                    grew = True
    return found


CLASSES = error_classes()


def test_the_walk_finds_the_classes_outside_kit_errors() -> None:
    assert {"YamlSyntaxError", "PlottingUnavailable"} <= CLASSES.keys()


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_class_has_a_default_hint(name: str) -> None:
    cls = CLASSES[name]
    assert isinstance(cls.default_hint, str) and cls.default_hint.strip()
    # the class's own, or one of kit.errors's classes below KitError: never only the base's
    owner = next(c for c in cls.__mro__ if "default_hint" in vars(c))
    assert owner is not KitError or cls is KitError, f"{name} has only KitError's hint"


def _hint_given(call: ast.Call, cls: type[KitError]) -> bool:
    """Whether the call passes a hint: by keyword, or in the position its __init__ takes it."""
    if any(k.arg == "hint" or k.arg is None for k in call.keywords):
        return True
    params = list(inspect.signature(cls.__init__).parameters)[1:]  # without self
    if "hint" not in params:
        return True  # the class makes its own (InternalError, BadURLError's default)
    return len(call.args) > params.index("hint")


def test_every_raise_site_gives_a_hint_or_raises_a_class_with_its_own() -> None:
    """A site without a hint falls back on its class's default_hint, which must be more than
    the base's "KIT_DEBUG=1 ..." (so `raise KitError("...")` alone is refused)."""
    bare: list[str] = []
    for module, tree in sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            cls = CLASSES.get(name or "")
            if cls is None or _hint_given(node, cls):
                continue
            if cls.default_hint == KitError.default_hint:
                bare.append(f"{module}:{node.lineno} {name}")
    assert bare == []


def _one_of(cls: type[KitError]) -> KitError:
    """An error of the class, built with its simplest arguments and no hint."""
    if issubclass(cls, errors.InternalError):
        return cls(ValueError("x"))  # type: ignore[call-arg]
    if issubclass(cls, errors.RecipeError):
        return cls(["r.yaml: x: bad"])  # type: ignore[arg-type]
    if issubclass(cls, errors.BadURLError):
        return cls("x", "no scheme")  # type: ignore[call-arg]
    if issubclass(cls, errors.ServerAnswerError):
        return cls("http://127.0.0.1:8000/v1/models", 500)  # type: ignore[call-arg]
    return cls("something went wrong")


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_cli_prints_a_hint_for_every_class(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KIT_DEBUG", raising=False)
    err = _one_of(CLASSES[name])
    assert err.hint
    code = report_error(err)
    lines = capsys.readouterr().err.splitlines()
    assert code == err.exit_code
    assert lines[-len(err.hint.splitlines()) :] == [f"hint: {h}" for h in err.hint.splitlines()]
