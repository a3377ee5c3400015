"""What the quality probe records (:class:`QualityProbe`, a report's ``quality``): the tokens
scored, each side's per-token scores, the reference's provenance, and the summary that
``kit report verify`` recomputes from them (kit.quality.measures; docs/quality.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.base import FrozenModel
from kit.recipe.quality import Quality

# changes when a field is renamed or removed, or changes meaning; a field added with a default
# does not change it
VERSION = 1


class TokenScores(FrozenModel):
    """One side's teacher-forced scores: for each scored position (every token of the window
    but the first), the log-probability of the text's next token and the top k."""

    logprobs: list[float] = Field(
        description="Per position, the natural log-probability of the text's next token "
        "(rounded to 4 decimals)."
    )
    top: list[str] = Field(
        description="Per position, the top k tokens best first, packed as 'id:logprob id:logprob "
        "...' (logprobs rounded to 4 decimals)."
    )


class ReferenceProvenance(FrozenModel):
    """How the reference scores were made."""

    method: Literal["transformers", "file"] = Field(
        description="transformers: scored by kit on this machine (kit.quality.scorer); file: "
        "given by the recipe (reference.quality)."
    )
    model_identity: str | None = Field(
        description="The unquantized model's content digest (kit.model; None: not said)."
    )
    dtype: str | None = Field(description="The dtype it was scored in (None: not said).")
    device: str | None = Field(description="Where it was scored (None: not said).")
    versions: dict[str, str] = Field(
        default_factory=dict, description="torch, transformers, kit versions that scored it."
    )
    key: str | None = Field(None, description="kit's cache key for it (method transformers).")
    source: str | None = Field(
        None, description="The recipe's word on who computed it (method file)."
    )
    file_sha256: str | None = Field(None, description="sha256 of the file (method file).")


class ReferenceScores(FrozenModel):
    """The unquantized model's scores of the evaluation text: what kit caches per model
    identity (``$KIT_HOME/quality/<key>/reference.json``) and what a recipe's
    ``reference.quality`` file holds."""

    version: int = Field(VERSION, description="Format version (kit.quality.schema.VERSION).")
    text_sha256: str = Field(description="sha256 of the evaluation text's UTF-8 bytes.")
    token_ids: list[int] = Field(description="The window scored: the text's first tokens.")
    vocab_size: int = Field(gt=0, description="Size of the model's output distribution.")
    top_k: int = Field(gt=0, description="Entries of each position's top list.")
    scores: TokenScores = Field(description="Per-token scores.")
    provenance: ReferenceProvenance = Field(description="How they were made.")


class QualitySummary(FrozenModel):
    """The probe's figures, recomputed by ``kit report verify`` from the per-token scores."""

    positions: int = Field(description="Positions scored (tokens of the window but the first).")
    perplexity: float = Field(description="The served model's: exp(-mean log-probability).")
    reference_perplexity: float | None = Field(description="The reference's (None: no reference).")
    perplexity_ratio: float | None = Field(description="Served over reference perplexity.")
    agreement: float | None = Field(
        description="Share of positions where the served top-1 token is the reference's."
    )
    chance: float | None = Field(
        description="The agreement of always answering the reference's most frequent top-1 "
        "token, and at least 1 / vocab_size."
    )
    kl: float | None = Field(
        description="Mean estimate of KL(reference || served) in nats, over the reference's "
        "top k and one bin for the rest (docs/quality.md)."
    )


class QualityProbe(FrozenModel):
    """The quality probe of a run (``bench.quality``): kit's evaluation text scored through
    the served engine, teacher-forced, against the unquantized model's scores."""

    settings: Quality = Field(description="The recipe's bench.quality it ran and was judged by.")
    text_sha256: str = Field(description="sha256 of the evaluation text's UTF-8 bytes.")
    token_ids: list[int] = Field(description="The window scored, as sent to the server.")
    served: TokenScores = Field(description="The served engine's scores (top k: settings).")
    reference: ReferenceScores | None = Field(description="The reference's (None: no reference).")
    no_reference: str | None = Field(description="Why there is no reference (None: there is).")
    summary: QualitySummary = Field(description="The figures.")
    duration_s: float = Field(description="Wall time of the request to the server.")
