"""Load patterns, datasets and SLOs: the parts of a recipe's ``bench`` that reproduce serving
numbers other than single-stream ones (``vllm bench serve``, guidellm and AIPerf tables).

Without ``bench.load`` the bench runs the reference protocol, sequentially, as before. With it,
the bench runs one measured point per level of the pattern, each with its own requests, warm-up
and cool-down, and the report carries one summary per point:

- ``concurrency``: that many streams in flight, a new request sent as soon as one ends;
- ``rate``: requests sent at that many per second, Poisson (exponential gaps, seeded) or
  evenly spaced, however many are in flight (capped by ``max_concurrency`` where set);
- ``sweep``: concurrency raised by a factor per point until the output throughput stops rising
  or the SLOs fail (the saturation point), or the highest concurrency is reached.

The requests come from ``bench.dataset``: the recipe's prompts in turn (the default), random
prompts of given token lengths, or a local JSONL or ShareGPT file pinned by its sha256.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from kit.recipe.base import RecipeModel

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class _Point(RecipeModel):
    late_fields = frozenset({"processes"})
    requests: int = Field(
        gt=0, description="Measured requests per point (see requests_per_stream)."
    )
    warmup_requests: int = Field(
        0, ge=0, description="Requests sent before each point's measured ones, then discarded."
    )
    cooldown_s: float = Field(
        0.0, ge=0, description="Idle seconds after each point, before the next one's warm-up."
    )
    processes: int = Field(
        1,
        ge=1,
        le=64,
        description="Client processes sending each point's requests (streams, or arrivals, "
        "dealt among them; a rate point's max_concurrency split evenly). One process takes in "
        "about 177k streamed tok/s a core (bench/load-client.py): raise it when a point's "
        "client CPU nears a core (the verdict's client-saturated).",
    )


def _one_warmup_rule(requests: int, per_stream: int | None) -> None:
    if per_stream is not None and requests:
        raise ValueError(
            "warmup_requests and warmup_per_stream both set: a point's warm-up is one or the other"
        )


class ConcurrencyLoad(_Point):
    """A fixed number of streams in flight."""

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
    late_fields = frozenset({"processes", "warmup_per_stream"})

    @model_validator(mode="after")
    def _one_warmup(self) -> ConcurrencyLoad:
        _one_warmup_rule(self.warmup_requests, self.warmup_per_stream)
        return self

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: list[int]) -> list[int]:
        if any(v < 1 for v in value):
            raise ValueError("each level is a number of streams, at least 1")
        if len(set(value)) != len(value):
            raise ValueError("lists a level twice")
        return value


class RateLoad(_Point):
    """Requests sent at a given rate, however many are in flight."""

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


class SweepLoad(_Point):
    """Concurrency raised step by step until the server saturates: the sweep stops after the
    first point whose output throughput rose less than ``min_gain_pct`` over the point
    before, or whose share of requests meeting ``bench.slo`` fell below ``slo_fraction``, or
    at ``max_concurrency``. The report says which, on the last point."""

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
    late_fields = frozenset({"processes", "warmup_per_stream"})

    @model_validator(mode="after")
    def _range(self) -> SweepLoad:
        _one_warmup_rule(self.warmup_requests, self.warmup_per_stream)
        if self.max_concurrency < self.start:
            raise ValueError(f"max_concurrency {self.max_concurrency} is below start {self.start}")
        return self


Load = Annotated[ConcurrencyLoad | RateLoad | SweepLoad, Field(discriminator="pattern")]
AnyLoad = ConcurrencyLoad | RateLoad | SweepLoad


class PromptsDataset(RecipeModel):
    """The recipe's ``bench.prompts``, in turn."""

    kind: Literal["prompts"] = Field(description="The recipe's prompts, each with its max_tokens.")


class RandomDataset(RecipeModel):
    """Prompts of random words sized in the served model's tokens (counted with the server's
    /tokenize), as ``vllm bench serve --dataset-name random`` sizes its prompts."""

    kind: Literal["random"] = Field(description="Random prompts of given token lengths.")
    input_tokens: int = Field(gt=0, description="Prompt tokens (mean).")
    output_tokens: int = Field(gt=0, description="Tokens generated per request (mean).")
    range_ratio: float = Field(
        0.0, ge=0, lt=1, description="Lengths uniform in [n(1-r), n(1+r)] (0: exactly n)."
    )
    seed: int = Field(0, description="Seed of the words and lengths.")
    ignore_eos: bool = Field(
        True, description="Generate exactly the drawn output length (as vllm bench serve does)."
    )


class FileDataset(RecipeModel):
    """A local file of prompts: JSONL (one ``{"prompt": ..., "max_tokens": ...}`` per line) or
    ShareGPT (a JSON list of ``{"conversations": [{"from": "human", "value": ...}, ...]}``)."""

    kind: Literal["file"] = Field(description="A local JSONL or ShareGPT file.")
    path: str = Field(description="The file, relative to the recipe's directory.")
    format: Literal["jsonl", "sharegpt"] = Field(description="Its format.")
    sha256: str = Field(description="Its sha256: a different file is refused.")
    max_tokens: int = Field(
        256, gt=0, description="max_tokens where a line gives none (ShareGPT: always)."
    )

    @field_validator("sha256")
    @classmethod
    def _sha(cls, value: str) -> str:
        if not _SHA256.match(value):
            raise ValueError("64 lower-case hex digits (sha256sum FILE)")
        return value


Dataset = Annotated[PromptsDataset | RandomDataset | FileDataset, Field(discriminator="kind")]


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


def point_label(load: AnyLoad, level: float) -> str:
    """The name a point's records carry in place of a prompt name."""
    if load.pattern == "rate":
        return f"rate-{level:g}"
    return f"concurrency-{int(level)}"


def point_levels(load: AnyLoad) -> list[float]:
    """Every level the pattern may run, in order (a sweep may stop before its last)."""
    if load.pattern == "concurrency":
        return [float(v) for v in load.levels]
    if load.pattern == "rate":
        return list(load.rates)
    out = [float(load.start)]
    while out[-1] < load.max_concurrency:
        step = max(int(out[-1] * load.factor), int(out[-1]) + 1)
        out.append(float(min(step, load.max_concurrency)))
    return out


def point_warmups(load: AnyLoad, level: float) -> int:
    """Warm-up requests of the point at ``level`` (sent first, at its concurrency)."""
    per_stream = getattr(load, "warmup_per_stream", None)
    return int(level) * per_stream if per_stream else load.warmup_requests


def point_requests(load: AnyLoad, level: float) -> int:
    """Measured requests of the point at ``level``."""
    per_stream = getattr(load, "requests_per_stream", None)
    return int(level) * per_stream if per_stream else load.requests
