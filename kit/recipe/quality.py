"""The quality probe of a recipe (``bench.quality``) and reference scores it may carry
(``reference.quality``): kit.quality runs them, docs/quality.md says what they measure."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kit.recipe.base import RecipeModel

# vLLM's default --max-logprobs: the most log-probabilities a server gives per token unless
# started with more
MAX_TOP_K = 20


class Quality(RecipeModel):
    """Teacher-forced scores of a fixed text through the served engine, against the unquantized
    model's (docs/quality.md)."""

    max_tokens: int = Field(
        2048,
        ge=16,
        le=8192,
        description="Tokens of kit's evaluation text scored, at most (and at most "
        "server.max_model_len - 1: one request scores them all).",
    )
    top_k: int = Field(
        10,
        ge=1,
        le=MAX_TOP_K,
        description="Log-probabilities kept per token, the top k of each side: the KL estimate "
        "uses them (vLLM's prompt_logprobs; a server gives at most its --max-logprobs, 20 by "
        "default).",
    )
    reference: Literal["auto", "transformers", "none"] = Field(
        "auto",
        description="The unquantized model's scores: transformers (scored with transformers on "
        "the CPU in float32 by the build stage, cached by model identity), auto (the same when "
        "the model's weights take at most 8 GiB, else none), none (perplexity only). "
        "reference.quality, when the recipe has it, takes the place of either.",
    )
    max_perplexity_ratio: float = Field(
        1.5,
        gt=1,
        description="Validity warning when the served perplexity over the reference's is above.",
    )
    min_agreement: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Validity warning when the top-1 agreement with the reference is below.",
    )
    garbage_over_chance: float = Field(
        1.5,
        ge=1,
        description="Validity error (quality-garbage) when the agreement is at most this many "
        "times chance: the agreement of always answering the reference's most frequent top-1, "
        "at least 1 / vocabulary size.",
    )
    garbage_perplexity_ratio: float = Field(
        5.0,
        gt=1,
        description="Validity error (quality-garbage) when the perplexity ratio is above.",
    )
    band_perplexity_pct: float = Field(
        2.0,
        gt=0,
        description="Comparability: two runs whose served perplexities differ by more (percent "
        "of the original's) are not comparable.",
    )
    band_agreement_pp: float = Field(
        5.0,
        gt=0,
        description="Comparability: two runs whose agreements differ by more (percentage "
        "points) are not comparable.",
    )

    @model_validator(mode="after")
    def _garbage_beyond_warning(self) -> Quality:
        if self.garbage_perplexity_ratio <= self.max_perplexity_ratio:
            raise ValueError(
                f"garbage_perplexity_ratio {self.garbage_perplexity_ratio:g} must be above "
                f"max_perplexity_ratio {self.max_perplexity_ratio:g}"
            )
        return self


class ReferenceQuality(RecipeModel):
    """Reference scores computed elsewhere, for a model kit cannot score here: a file of
    kit.quality's ReferenceScores (what kit caches as
    ``$KIT_HOME/quality/<key>/reference.json``), pinned by its sha256."""

    path: str = Field(description="The JSON file, relative to the recipe.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the file's bytes.")
    source: str = Field(description="Who computed it, how and where.")
