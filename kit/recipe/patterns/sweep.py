"""The ``sweep`` pattern: concurrency raised per point until the server saturates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from kit.recipe.patterns.base import PointFigures, StreamsLoad
from kit.recipe.slo import Slo


class SweepLoad(StreamsLoad):
    """Concurrency raised step by step until the server saturates: the sweep stops after the
    first point whose output throughput rose less than ``min_gain_pct`` over the point
    before, or whose share of requests meeting ``bench.slo`` fell below ``slo_fraction``, or
    at ``max_concurrency``. The report says which, on the last point."""

    # as its points have been drawn (their pattern named, on a linear axis)
    axis_label: ClassVar[str] = "sweep"
    axis_short: ClassVar[str] = "sweep"

    pattern: Literal["sweep"] = Field(description="Concurrency raised until saturation.")
    start: int = Field(1, ge=1, description="The first concurrency.")
    factor: float = Field(2.0, gt=1, description="Each next concurrency: the last times this.")
    max_concurrency: int = Field(ge=1, description="The highest concurrency tried.")
    min_gain_pct: float = Field(
        5.0, ge=0, description="Saturated once output tok/s rises less than this over the last."
    )
    slo_fraction: float = Field(
        0.9, gt=0, le=1, description="With bench.slo: stop once fewer requests meet it."
    )
    requests_per_stream: int | None = Field(
        None,
        gt=0,
        description="Measured requests per point = level x this, in place of `requests`.",
    )
    warmup_per_stream: int | None = Field(
        None,
        gt=0,
        description="Warm-up requests per point = level x this, in place of "
        "`warmup_requests` (see the concurrency pattern's).",
    )

    @model_validator(mode="after")
    def _range(self) -> SweepLoad:
        if self.max_concurrency < self.start:
            raise ValueError(f"max_concurrency {self.max_concurrency} is below start {self.start}")
        return self

    def planned_levels(self) -> list[float]:
        out = [float(self.start)]
        while out[-1] < self.max_concurrency:
            step = max(int(out[-1] * self.factor), int(out[-1]) + 1)
            out.append(float(min(step, self.max_concurrency)))
        return out

    def stop_reason(self, points: Sequence[PointFigures], slo: Slo | None) -> str | None:
        """The SLOs failed, the output throughput rose less than ``min_gain_pct`` over the
        point before (saturated), or the highest concurrency was reached; else None."""
        last = points[-1]
        if slo is not None and last.requests:
            share = (last.good or 0) / last.requests
            if share < self.slo_fraction:
                return (
                    f"SLOs failed: {share * 100:.0f} % of requests met bench.slo, below "
                    f"{self.slo_fraction * 100:.0f} %"
                )
        if len(points) > 1:
            before, now = points[-2].output_tps, last.output_tps
            if before and now is not None:
                gain = (now - before) / before * 100
                if gain < self.min_gain_pct:
                    return (
                        f"saturated: output tok/s rose {gain:+.1f} % over {points[-2].label}, "
                        f"less than {self.min_gain_pct:g} %"
                    )
        if last.level >= self.planned_levels()[-1]:
            return f"reached max_concurrency {self.max_concurrency}"
        return None
