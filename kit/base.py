"""The one base for kit's data models: unknown keys are errors everywhere."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class KitModel(BaseModel):
    """A model that forbids unknown keys (a typo is an error, never silently dropped)."""

    model_config = ConfigDict(extra="forbid")


class FrozenModel(KitModel):
    """A KitModel whose instances cannot change once built (recipes, checks, findings)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class StrictModel(FrozenModel):
    """A FrozenModel that converts nothing: bytes stay bytes, paths stay paths."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
