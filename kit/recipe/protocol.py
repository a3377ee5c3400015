"""The reference: the protocol a canonical run follows, and the figures it published.

The protocol is the bench's defaults (3 warm-ups + 5 runs per prompt, the reference prompts and
sampling). :func:`departures` names every way a bench leaves it; a run is canonical when there
are none. A recipe's ``reference`` section holds the published figures to compare with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from kit.recipe.base import RecipeModel
from kit.recipe.figures import THROUGHPUTS, Definition, PointFigure, ReferencePoint
from kit.recipe.quality import ReferenceQuality
from kit.recipe.serving import REFERENCE_PROMPTS, Bench, Sampling

# the reference protocol as a recipe: what `kit bench` measures without one
REFERENCE_PROTOCOL = Path(__file__).parents[1] / "data" / "reference-protocol.yaml"


def departures(bench: Bench) -> list[str]:
    """How a bench departs from the reference protocol (empty: canonical)."""
    out = []
    if bench.load is not None:
        shown = ", ".join(f"{v:g}" for v in bench.load.planned_levels())
        out.append(f"load pattern {bench.load.pattern} [{shown}] in place of the sequential runs")
    if bench.ignore_eos:
        out.append("ignore_eos: runs generate to max_tokens whatever the model says")
    if bench.warmups != 3 or bench.runs != 5:
        out.append(f"{bench.warmups} warm-ups + {bench.runs} runs (reference: 3 + 5)")
    ref = {p.name: p for p in REFERENCE_PROMPTS}
    for p in bench.prompts:
        r = ref.get(p.name)
        if r is None or r.text != p.text:
            out.append(f"prompt {p.name!r} differs from the reference prompts")
        elif r.max_tokens != p.max_tokens:
            out.append(f"prompt {p.name!r}: max_tokens {p.max_tokens} (reference {r.max_tokens})")
    if {p.name for p in bench.prompts} != set(ref):
        out.append("prompt set differs from the reference (narrative, code)")
    if bench.sampling != Sampling():
        out.append("sampling differs from the reference (0.6 / 0.95 / 20 / 0.0)")
    return out


class PromptFigures(RecipeModel):
    decode_tps: float | None = Field(None, description="Mean decode tokens/s.")
    decode_cv_pct: float | None = Field(None, description="Decode CV in percent.")
    wall_tps: float | None = Field(None, description="Mean wall tokens/s.")
    ttft_ms: float | None = Field(None, description="Mean TTFT in ms.")


class AcceptanceFigures(RecipeModel):
    accepted: int = Field(description="Accepted draft tokens.")
    drafted: int = Field(description="Draft tokens proposed.")
    drafts: int = Field(description="Draft steps.")


class Reference(RecipeModel):
    late_fields = frozenset({"tool", "points", "definitions", "reference_only", "quality"})
    source: str = Field(description="Where the figures were published.")
    date: str | None = Field(None, description="Publication date.")
    rig: str | None = Field(None, description="Hardware, as published.")
    engine: str | None = Field(None, description="Engine build, as published.")
    prompts: dict[str, PromptFigures] = Field(default_factory=dict, description="Per prompt.")
    prefill_tps: dict[int, float] = Field(default_factory=dict, description="Depth -> tok/s.")
    peak_vram_mib: float | None = Field(None, description="Peak VRAM per card.")
    acceptance: AcceptanceFigures | None = Field(None, description="Spec-decode counters.")
    notes: str | None = Field(None, description="Anything else worth knowing.")
    tool: str | None = Field(None, description="The tool that measured them, and its version.")
    points: dict[str, ReferencePoint] = Field(
        default_factory=dict, description="Per load point, by its label (kit import)."
    )
    definitions: dict[PointFigure, Definition] = Field(
        default_factory=dict,
        description="How the tool defines its points' figures where that is worth saying (kit "
        "import): the figure of kit's points each is compared with, or none (not comparable).",
    )
    reference_only: str | None = Field(
        None,
        description="Why kit cannot re-run the reference's traffic (kit import); its points are "
        "still compared where a run has one of the same label.",
    )
    quality: ReferenceQuality | None = Field(
        None,
        description="The unquantized model's scores of kit's evaluation text, computed "
        "elsewhere, for the quality probe (bench.quality) of a model kit cannot score here.",
    )

    @model_validator(mode="after")
    def _alike_kinds(self) -> Reference:
        for figure, d in self.definitions.items():
            if d.kit is not None and (figure in THROUGHPUTS) != (d.kit in THROUGHPUTS):
                kind = "a throughput" if figure in THROUGHPUTS else "a latency"
                raise ValueError(f"definitions.{figure}: {figure} is {kind}, {d.kit} is not")
        return self


def non_canonical_reasons(recipe: dict[str, Any]) -> list[str]:
    """:func:`departures` of a recipe given as JSON (a report's embedded recipe)."""
    return departures(Bench.model_validate(recipe.get("bench", {})))
