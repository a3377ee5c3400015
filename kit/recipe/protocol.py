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
    """One prompt's published figures over its measured runs (the Club-3090 summary lines)."""

    late_fields = frozenset({"decode_std", "wall_std", "ttft_std", "runs"})
    decode_tps: float | None = Field(None, description="Mean decode tokens/s.")
    decode_cv_pct: float | None = Field(None, description="Decode CV in percent.")
    wall_tps: float | None = Field(None, description="Mean wall tokens/s.")
    ttft_ms: float | None = Field(None, description="Mean TTFT in ms.")
    decode_std: float | None = Field(
        None, ge=0, description="Sample standard deviation of the runs' decode tokens/s."
    )
    wall_std: float | None = Field(
        None, ge=0, description="Sample standard deviation of the runs' wall tokens/s."
    )
    ttft_std: float | None = Field(
        None, ge=0, description="Sample standard deviation of the runs' TTFT, in ms."
    )
    runs: int | None = Field(
        None,
        ge=1,
        description="Measured runs the means and deviations are over (None: not stated).",
    )


class AcceptanceFigures(RecipeModel):
    """Speculative-decoding counters: draft tokens accepted of those drafted, in draft steps."""

    late_fields = frozenset({"accepted_per_position"})
    accepted: int = Field(description="Accepted draft tokens.")
    drafted: int = Field(description="Draft tokens proposed.")
    drafts: int = Field(description="Draft steps.")
    accepted_per_position: list[int] | None = Field(
        None,
        description="Accepted draft tokens at each drafted position (the first, the second, "
        "...), summing to accepted; None where the source does not give them exactly.",
    )


class RigDetail(RecipeModel):
    """The published rig, part by part (kit import); a part left None is not stated: an open
    pin, never a value."""

    cards: int | None = Field(None, ge=1, description="GPUs the run used.")
    card: str | None = Field(None, description="The card's model, as published (RTX 3090).")
    memory_mib: int | None = Field(None, ge=1, description="Memory per card, in MiB.")
    power_cap_w: list[float] = Field(
        default_factory=list, description="Power cap of each card in W (one value: all cards)."
    )
    pcie: list[str] = Field(
        default_factory=list,
        description="Each card's PCIe link as published or sampled under load (gen4 x16, x8).",
    )
    interconnect: str | None = Field(
        None, description="Between the cards: no NVLink, NVLink, patched P2P (engaged), ..."
    )
    custom_all_reduce: bool | None = Field(
        None, description="Whether vLLM's custom all-reduce ran (None: not stated)."
    )


class Reference(RecipeModel):
    late_fields = frozenset(
        {
            "tool",
            "points",
            "definitions",
            "reference_only",
            "quality",
            "draft_memory_mib",
            "kv_cache_tokens",
            "max_context_tokens",
            "vram_growth_mib",
            "rig_detail",
            "open_pins",
        }
    )
    source: str = Field(description="Where the figures were published.")
    date: str | None = Field(None, description="Publication date.")
    rig: str | None = Field(None, description="Hardware, as published.")
    engine: str | None = Field(None, description="Engine build, as published.")
    prompts: dict[str, PromptFigures] = Field(default_factory=dict, description="Per prompt.")
    prefill_tps: dict[int, float] = Field(default_factory=dict, description="Depth -> tok/s.")
    peak_vram_mib: float | None = Field(None, description="Peak VRAM per card.")
    acceptance: AcceptanceFigures | None = Field(None, description="Spec-decode counters.")
    draft_memory_mib: float | None = Field(
        None, ge=0, description="Memory the draft model takes per card (weights), in MiB."
    )
    kv_cache_tokens: int | None = Field(
        None, ge=0, description="Tokens the engine's KV cache holds (its pool at boot)."
    )
    max_context_tokens: int | None = Field(
        None, ge=1, description="The context the server was run with (max_model_len), in tokens."
    )
    vram_growth_mib: float | None = Field(
        None,
        description="VRAM after the measured window minus before it (post - idle), in MiB; "
        "summed over the cards.",
    )
    rig_detail: RigDetail | None = Field(
        None, description="The rig part by part, where the source states it (kit import)."
    )
    open_pins: dict[str, str] = Field(
        default_factory=dict,
        description="Recipe fields this recipe holds a stand-in for, because the source does "
        "not state them (kit import): field -> what the source says. A comparison treats "
        "them as unknown, never as the source's values.",
    )
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
