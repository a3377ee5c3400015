"""The ``rate`` pattern: requests sent at a given rate per point, Poisson or evenly spaced."""

from __future__ import annotations

import random
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from kit.recipe.patterns.base import LoadPattern, SendPlan


class RateLoad(LoadPattern):
    """Requests sent at a given rate, however many are in flight."""

    axis_label: ClassVar[str] = "request rate (requests/s)"
    axis_short: ClassVar[str] = "request rate (requests/s)"

    pattern: Literal["rate"] = Field(description="Fixed request rate per point.")
    rates: list[float] = Field(min_length=1, description="Requests per second, one point each.")
    arrival: Literal["poisson", "constant"] = Field(
        "poisson", description="Exponential gaps (seeded) or even spacing."
    )
    seed: int = Field(0, description="Seed of the Poisson arrivals.")
    max_concurrency: int | None = Field(
        None, gt=0, description="Streams in flight at most (None: unbounded)."
    )

    @field_validator("rates")
    @classmethod
    def _rates(cls, value: list[float]) -> list[float]:
        if any(v <= 0 for v in value):
            raise ValueError("each rate is in requests per second, above 0")
        if len(set(value)) != len(value):
            raise ValueError("lists a rate twice")
        return value

    def planned_levels(self) -> list[float]:
        return list(self.rates)

    @classmethod
    def label(cls, level: float) -> str:
        return f"rate-{level:g}"

    @classmethod
    def short_label(cls, level: float) -> str:
        return f"rate {level:g}"

    def arrival_gaps(self, rate: float, count: int) -> list[float]:
        """Seconds between consecutive sends at ``rate`` (the first send at 0)."""
        if self.arrival == "constant":
            return [0.0] + [1.0 / rate] * (count - 1)
        rng = random.Random(self.seed)
        return [0.0] + [rng.expovariate(rate) for _ in range(count - 1)]

    def send_plan(self, level: float, count: int) -> SendPlan:
        return SendPlan(streams=self.max_concurrency or count, gaps=self.arrival_gaps(level, count))

    def vllm_args(self, level: float) -> list[str]:
        argv = ["--request-rate", f"{level:g}", "--burstiness", "1"]
        if self.max_concurrency:
            argv += ["--max-concurrency", str(self.max_concurrency)]
        return argv

    def vllm_note(self) -> str | None:
        if self.arrival == "constant":  # no exact vLLM equivalent
            return "kit sent constant arrivals, vLLM Poisson ones (burstiness 1)"
        return None
