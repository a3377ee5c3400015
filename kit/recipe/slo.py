"""Service-level objectives (a recipe's ``bench.slo``): what goodput and a sweep's stop rule
count a request good by."""

from __future__ import annotations

from pydantic import Field, model_validator

from kit.recipe.base import RecipeModel


class Slo(RecipeModel):
    """Service-level objectives: a request is good when it meets every one set (goodput)."""

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token at most.")
    tpot_ms: float | None = Field(None, gt=0, description="Time per output token at most.")
    e2e_ms: float | None = Field(None, gt=0, description="End-to-end latency at most.")

    @model_validator(mode="after")
    def _one(self) -> Slo:
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("set at least one of ttft_ms, tpot_ms, e2e_ms")
        return self
