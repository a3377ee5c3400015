"""The checklist ``kit report verify`` fills, and the comparison of stored with recomputed
figures that several of its items use."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from kit.base import FrozenModel
from kit.report.files import capped, cut

REL_TOL = 1e-9  # stored and recomputed figures agree to this relative tolerance

ABS_TOL = 1e-12


class CheckItem(FrozenModel):
    """One item of a checklist."""

    name: str = Field(description="envelope, signature, payload, schema, recipe, ...")
    ok: bool | None = Field(description="True: passed. False: failed. None: not checked.")
    detail: str = Field(description="One line: what was checked, or why it failed or was not.")
    problems: list[str] = Field(default_factory=list, description="Each problem found.")


class Checklist(FrozenModel):
    """Every item ``verify_report`` ran on one report file."""

    source: str = Field(description="The file checked ('<bytes>' for bytes in memory).")
    items: list[CheckItem] = Field(description="The items, in the order they ran.")

    @property
    def ok(self) -> bool:
        """No item failed (items not checked do not fail a checklist)."""
        return not any(item.ok is False for item in self.items)

    @property
    def failed(self) -> list[str]:
        return [item.name for item in self.items if item.ok is False]

    def item(self, name: str) -> CheckItem:
        for entry in self.items:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def render(self) -> str:
        """The checklist as text: ``[ok]``, ``[FAIL]`` or ``[--]`` (not checked) per item."""
        width = max(len(item.name) for item in self.items)
        lines = [f"kit report verify: {self.source}"]
        for item in self.items:
            mark = {True: "[ok]  ", False: "[FAIL]", None: "[--]  "}[item.ok]
            lines.append(f"  {mark} {item.name:<{width}}  {item.detail}")
            lines += [f"  {'':<6} {'':<{width}}  - {p}" for p in item.problems]
        counts = {v: sum(1 for i in self.items if i.ok is v) for v in (True, False, None)}
        if self.ok:
            lines.append(f"passed: {counts[True]} ok, {counts[None]} not checked")
        else:
            failed = ", ".join(self.failed)
            lines.append(f"FAILED: {counts[False]} of {len(self.items)} items ({failed})")
        return "\n".join(lines)


def check_item(name: str, problems: list[str], ok_detail: str, fail_detail: str) -> CheckItem:
    if not problems:
        return CheckItem(name=name, ok=True, detail=ok_detail)
    return CheckItem(name=name, ok=False, detail=fail_detail, problems=capped(problems))


def dump(model: BaseModel | None) -> Any:
    return None if model is None else model.model_dump(mode="json")


def differences(stored: Any, fresh: Any, path: str) -> list[str]:
    """Every place two JSON values differ; numbers within ``REL_TOL`` agree."""
    out: list[str] = []
    _walk(stored, fresh, path, out)
    return out


def _walk(stored: Any, fresh: Any, path: str, out: list[str]) -> None:
    if isinstance(stored, dict) and isinstance(fresh, dict):
        for key in dict.fromkeys([*stored, *fresh]):
            if key not in stored or key not in fresh:
                out.append(f"{path}.{key}: {'recomputed' if key in fresh else 'stored'} only")
            else:
                _walk(stored[key], fresh[key], f"{path}.{key}", out)
    elif isinstance(stored, list) and isinstance(fresh, list) and len(stored) == len(fresh):
        for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
            _walk(a, b, f"{path}[{i}]", out)
    elif _number(stored) and _number(fresh):
        if not math.isclose(stored, fresh, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            out.append(f"{path}: stored {stored!r}, recomputed {fresh!r}")
    elif stored != fresh or type(stored) is not type(fresh):
        out.append(f"{path}: stored {cut(repr(stored))}, recomputed {cut(repr(fresh))}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
