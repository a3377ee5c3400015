"""The base of every recipe model: a FrozenModel that also refuses NaN and infinities."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from kit.base import FrozenModel


class RecipeModel(FrozenModel):
    """Unknown keys are errors, instances cannot change, and no float is NaN or infinite.

    ``late_fields`` names fields added after recipes were first hashed: while such a field is
    at its default, the recipe's JSON (so its sha256) leaves it out, and a recipe that does
    not use it hashes as it did before the field existed (:func:`drop_late_defaults`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    late_fields: ClassVar[frozenset[str]] = frozenset()


def drop_late_defaults(model: BaseModel, data: Any) -> None:
    """Remove, in ``data`` (``model``'s JSON dump), every late field at its default, at every
    depth."""
    if not isinstance(data, dict):
        return
    late: frozenset[str] = getattr(type(model), "late_fields", frozenset())
    for name, field in type(model).model_fields.items():
        if name not in data:
            continue
        value = getattr(model, name)
        if name in late and value == field.get_default(call_default_factory=True):
            del data[name]
        elif isinstance(value, BaseModel):
            drop_late_defaults(value, data[name])
        elif isinstance(value, (list, tuple)) and isinstance(data[name], list):
            for item, dumped in zip(value, data[name], strict=False):
                if isinstance(item, BaseModel):
                    drop_late_defaults(item, dumped)
        elif isinstance(value, dict) and isinstance(data[name], dict):
            for key, item in value.items():
                if isinstance(item, BaseModel) and str(key) in data[name]:
                    drop_late_defaults(item, data[name][str(key)])
