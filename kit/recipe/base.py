"""The base of every recipe model: a FrozenModel that also refuses NaN and infinities."""

from __future__ import annotations

from pydantic import ConfigDict

from kit.base import FrozenModel


class RecipeModel(FrozenModel):
    """Unknown keys are errors, instances cannot change, and no float is NaN or infinite."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
