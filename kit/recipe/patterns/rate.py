"""The ``rate`` pattern: requests sent at a given rate per point, Poisson or evenly spaced."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from kit.recipe.patterns.base import ForeignPoint, LoadPattern, Pacing, SendPlan


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
    def levels_entry(cls, levels: Sequence[float]) -> dict[str, Any]:
        return {"rates": sorted(levels)}

    @classmethod
    def foreign_extras(cls, points: Sequence[ForeignPoint]) -> dict[str, Any]:
        arrivals = {p.arrival for p in points} - {None}
        out: dict[str, Any] = {"arrival": arrivals.pop() if len(arrivals) == 1 else "poisson"}
        caps = {p.max_concurrency for p in points}
        if len(caps) == 1 and points[0].max_concurrency:
            out["max_concurrency"] = points[0].max_concurrency
        return out

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

    def pacing(self, level: float) -> Pacing:
        return Pacing(concurrency=self.max_concurrency, rate=level, arrival=self.arrival)

    def vllm_note(self) -> str | None:
        if self.arrival == "constant":  # no exact vLLM equivalent
            return "kit sent constant arrivals, vLLM Poisson ones (burstiness 1)"
        return None
