"""The quality probe of a recipe (``bench.quality``), the task harness it may run
(``bench.quality.harness``) and reference scores it may carry (``reference.quality``):
kit.quality runs them, docs/quality.md says what they measure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from kit.recipe.base import RecipeModel

# vLLM's default --max-logprobs: the most log-probabilities a server gives per token unless
# started with more
MAX_TOP_K = 20


# a task name lm-eval's --tasks takes as one name (it splits the list on commas and spaces)
TASK_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"


class Harness(RecipeModel):
    """lm-evaluation-harness against the served endpoint after the bench, its scores in the
    report's ``harness`` (kit.quality.harness, docs/quality.md)."""

    name: Literal["lm-eval"] = Field(
        description="The harness: lm-eval (EleutherAI's lm-evaluation-harness, the version "
        "kit pins, in its own venv)."
    )
    tasks: list[Annotated[str, Field(pattern=TASK_NAME)]] = Field(
        min_length=1,
        description="lm-eval task or group names, run in one lm-eval process. Without a "
        "tokenizer only generate_until tasks can run (docs/quality.md).",
    )
    limit: int | None = Field(
        None, ge=1, description="Documents per task, at most (None: every document)."
    )
    include_path: str | None = Field(
        None,
        description="A folder of custom task YAML files, relative to the recipe; lm-eval runs "
        "in it, so a task's relative data_files name files there. Checked when the recipe "
        "loads.",
    )
    model: Literal["local-completions", "local-chat-completions"] = Field(
        "local-completions",
        description="lm-eval's model type: local-completions (/v1/completions, the prompt as "
        "text) or local-chat-completions (/v1/chat/completions with lm-eval's "
        "--apply_chat_template; the server's chat template applies).",
    )
    num_fewshot: int | None = Field(
        None, ge=0, description="Few-shot examples per prompt (None: each task's own)."
    )
    gen_kwargs: dict[str, Any] | None = Field(
        None,
        description="Generation arguments over the tasks' own, as lm-eval's --gen_kwargs (for "
        "example max_gen_toks, temperature).",
    )
    offline: bool = Field(
        True,
        description="Run lm-eval with HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1: task data "
        "from local files or the local Hugging Face cache only. False lets it download a "
        "task's dataset from the hub.",
    )
    timeout_s: float = Field(
        3600,
        gt=0,
        description="Wall-time limit of the lm-eval process (then it is killed and the "
        "report records the failure).",
    )


def harness_problems(harness: Harness | None, recipe_dir: Path, label: str) -> list[str]:
    """Recipe problems with the harness that need the file system: an include_path (relative
    to ``recipe_dir``) that is not a folder; ``label`` names its place."""
    if harness is None or harness.include_path is None:
        return []
    folder = recipe_dir / Path(harness.include_path).expanduser()
    if folder.is_dir():
        return []
    what = "not a folder" if folder.exists() else "no such folder"
    return [
        f"{label}: bench.quality.harness.include_path: {harness.include_path}: {what} "
        "(relative to the recipe)"
    ]


class Quality(RecipeModel):
    """Teacher-forced scores of a fixed text through the served engine, against the unquantized
    model's (docs/quality.md)."""

    late_fields = frozenset({"harness"})

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
    harness: Harness | None = Field(
        None,
        description="A task harness run against the served endpoint after the probe, its "
        "scores in the report's harness section (None: not run).",
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
