"""The ``concurrency`` pattern: a fixed number of streams in flight per point."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from kit.recipe.patterns.base import ForeignPoint, StreamsLoad


class ConcurrencyLoad(StreamsLoad):
    """A fixed number of streams in flight."""

    axis_label: ClassVar[str] = "concurrency (requests in flight)"
    axis_short: ClassVar[str] = "concurrency"
    log_base: ClassVar[int | None] = 2

    pattern: Literal["concurrency"] = Field(description="Fixed concurrency per point.")
    levels: list[int] = Field(min_length=1, description="Streams in flight, one point each.")
    requests_per_stream: int | None = Field(
        None,
        gt=0,
        description="Measured requests per point = level x this, in place of `requests` (as "
        "`vllm bench serve --num-prompts $((C*k))` sweeps are run).",
    )
    warmup_per_stream: int | None = Field(
        None,
        gt=0,
        description="Warm-up requests per point = level x this, in place of "
        "`warmup_requests`: each point's warm-up then reaches its batch size (vLLM compiles "
        "some kernels the first time a batch reaches a size, stalling whatever is in flight).",
    )

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: list[int]) -> list[int]:
        if any(v < 1 for v in value):
            raise ValueError("each level is a number of streams, at least 1")
        if len(set(value)) != len(value):
            raise ValueError("lists a level twice")
        return value

    def planned_levels(self) -> list[float]:
        return [float(v) for v in self.levels]

    @classmethod
    def levels_entry(cls, levels: Sequence[float]) -> dict[str, Any]:
        return {"levels": sorted(int(v) for v in levels)}

    @classmethod
    def foreign_requests(cls, points: Sequence[ForeignPoint]) -> dict[str, Any] | None:
        # `vllm bench serve --num-prompts $((C*k))` sweeps: the same k requests per stream
        per_level = {p.level: p.requests for p in points if p.requests}
        per_stream = {n // int(level) for level, n in per_level.items()}
        if len(per_stream) != 1 or any(n % int(level) for level, n in per_level.items()):
            return None
        return {"requests": next(iter(per_level.values())), "requests_per_stream": per_stream.pop()}
