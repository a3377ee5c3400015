"""Load patterns, datasets and SLOs: the parts of a recipe's ``bench`` that reproduce serving
numbers other than single-stream ones (``vllm bench serve``, guidellm and AIPerf tables). With
``bench.load`` the bench runs one measured point per level of the pattern
(:mod:`kit.recipe.patterns`) in place of the reference protocol, its requests drawn from
``bench.dataset`` (:data:`Dataset`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator

from kit.recipe.base import RecipeModel
from kit.recipe.patterns import AnyLoad, ConcurrencyLoad, Load, RateLoad, SweepLoad
from kit.recipe.slo import Slo

__all__ = [
    "AnyLoad",
    "ConcurrencyLoad",
    "Dataset",
    "FileDataset",
    "Load",
    "PromptsDataset",
    "RandomDataset",
    "RateLoad",
    "Slo",
    "SweepLoad",
    "point_label",
    "point_levels",
    "point_requests",
    "point_warmups",
]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


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


# bench.dataset: the recipe's prompts in turn (the default), random prompts of given token
# lengths, or a local JSONL or ShareGPT file pinned by its sha256
Dataset = Annotated[PromptsDataset | RandomDataset | FileDataset, Field(discriminator="kind")]


# for callers that take the pattern as an argument (kit.bench.runner, kit.measure): each one
# is the pattern's own method


def point_label(load: AnyLoad, level: float) -> str:
    """The name a point's records carry in place of a prompt name."""
    return load.label(level)


def point_levels(load: AnyLoad) -> list[float]:
    """Every level the pattern may run, in order (a sweep may stop before its last): one
    measured point each (the pattern is a class of :mod:`kit.recipe.patterns`), and the report
    carries one summary per point. Without ``bench.load`` the bench runs the reference
    protocol, sequentially, as before."""
    return load.planned_levels()


def point_warmups(load: AnyLoad, level: float) -> int:
    """Warm-up requests of the point at ``level`` (sent first, at its concurrency)."""
    return load.warmups_at(level)


def point_requests(load: AnyLoad, level: float) -> int:
    """Measured requests of the point at ``level``."""
    return load.requests_at(level)
