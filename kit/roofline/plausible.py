"""Is a published figure possible? The roofline bound on a published reference's rig, the
fraction of it each published decode figure implies, and the acceptance it would need. A model,
not a measurement: the bound of :mod:`kit.roofline.bound` on the reference's GPUs (their
datasheet bandwidth, :mod:`kit.roofline.gpus`), its model's bytes and its stated acceptance;
the formula and every term: docs/roofline.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from kit.base import KitModel
from kit.roofline.bound import BoundSetup, bound_at
from kit.roofline.gpus import find_gpu, known_names, rig_gpus

CAVEAT = (
    "a model, not a measurement: the memory-bandwidth bound on the reference's rig from its "
    "GPUs' datasheet bandwidth, its model's bytes and its stated acceptance; what a rig "
    "really reaches is below it (kernels, launch gaps, sampling, all-reduce, the draft's compute)"
)
FORMULA = (
    "T = (B_target + B_draft) per GPU / BW per GPU; bound = L / T with L = 1 + accepted/drafts; "
    "ceiling = (1 + k) / T (every draft token accepted); fraction = published / bound; "
    "needed L at efficiency e = published x T / e; e = sum(N_p) / (L x sum(N_p / (published_p "
    "x T_p))), the one efficiency at which the stated L, pooled over draft steps, gives every "
    "prompt's figure (N_p: tokens per request) (docs/roofline.md)"
)


class RigBandwidth(KitModel):
    """The reference's rig as the bound sees it."""

    rig: str = Field(description="The rig as published.")
    gpu: str = Field(description="The GPU of kit's table (kit.roofline.gpus) it names.")
    gpus: int | None = Field(description="GPUs the rig names (None: no count stated).")
    tensor_parallel_size: int = Field(description="GPUs the model is sharded over (the recipe).")
    bandwidth_gbps: float = Field(description="Datasheet memory bandwidth per GPU, GB/s.")
    source: str = Field(description="Where the bandwidth figure comes from.")


class PromptPlausibility(KitModel):
    """One published decode figure against the bound on the reference's rig."""

    prompt: str = Field(description="Prompt name.")
    published_tps: float = Field(description="The reference's decode tok/s.")
    context_tokens: float = Field(description="Average context c (prompt + completion/2).")
    context_from: str = Field(description="Where c comes from (a run's records, max_tokens).")
    step_ms: float = Field(description="T: one target pass and its draft passes, ms.")
    bound_tps: float = Field(description="L / T at the stated acceptance (no draft: 1 / T).")
    fraction_pct: float = Field(description="published / bound, percent.")
    ceiling_tps: float = Field(description="(1 + k) / T: every draft token accepted.")
    needed_at_bound: float = Field(
        description="published x T: the tokens per step (1 + accepted/drafts) the figure needs "
        "at 100 % of the bound; below it at any lower efficiency is impossible."
    )
    needed_length: float | None = Field(
        description="published x T / e: tokens per step at the stated efficiency e (None: no e)."
    )
    above_bound: bool = Field(description="The published figure exceeds its bound.")
    above_ceiling: bool = Field(description="It exceeds the bound at every draft accepted.")


class Plausibility(KitModel):
    """Whether a reference's published decode figures fit the roofline bound on its rig."""

    caveat: str = Field(description="That this is a model, not a measurement.")
    formula: str = Field(description="The formula, in one line (docs/roofline.md).")
    rig: RigBandwidth | None = Field(description="The rig and its bandwidth (None: unknown).")
    bytes_from: str | None = Field(description="Where the model's bytes come from.")
    spec_method: str = Field(description="Speculative decoding method ('none' without).")
    num_speculative_tokens: int = Field(description="k: draft tokens per step.")
    acceptance_length: float | None = Field(description="L = 1 + accepted/drafts used.")
    acceptance_from: str | None = Field(description="Where L comes from.")
    efficiency_pct: float | None = Field(description="The stated efficiency e, percent.")
    prompts: list[PromptPlausibility] = Field(description="Per published prompt.")
    flags: list[str] = Field(description="Published figures above their bound.")
    missing: list[str] = Field(description="Why there is no bound (unknown GPU, no bytes).")

    def lines(self) -> list[str]:
        """The check as text: caveat, rig, bytes, then one line per prompt and the flags."""
        out = ["roofline bound on the reference's rig (kit.roofline.plausible)", f"  {self.caveat}"]
        out += [f"  not computed: {why}" for why in self.missing]
        if self.missing:
            return out
        assert self.rig is not None
        r = self.rig
        out.append(
            f"  rig: {r.gpus or '?'}x {r.gpu}, TP={r.tensor_parallel_size}, "
            f"{r.bandwidth_gbps:,.0f} GB/s per GPU (datasheet: {r.source})"
        )
        out.append(f"  bytes: {self.bytes_from}")
        if self.acceptance_length is not None:
            out.append(
                f"  acceptance: L = {self.acceptance_length:.2f} tokens per step "
                f"({self.acceptance_from}); {self.spec_method}, k = {self.num_speculative_tokens}"
            )
        for p in self.prompts:
            out.append(_prompt_line(p, self))
        if self.efficiency_pct is not None:
            out.append(
                f"  at one efficiency for every prompt (e = {self.efficiency_pct:.1f} %, the one "
                "at which the stated L gives every published figure): "
                + "; ".join(
                    f"{p.prompt} needs L = {p.needed_length:.2f} ({p.needed_length - 1:.2f} "
                    f"accepted of {self.num_speculative_tokens} per step)"
                    for p in self.prompts
                    if p.needed_length is not None
                )
            )
        out += [f"  ABOVE ITS BOUND: {f}" for f in self.flags]
        out.append(f"  formula: {self.formula}")
        return out

    def notes(self) -> list[str]:
        """The check in a few lines, for a verdict's notes."""
        head = "roofline bound on the reference's rig (a model, not a measurement)"
        if self.missing:
            return [f"{head}: not computed: {'; '.join(self.missing)}"]
        assert self.rig is not None
        r = self.rig
        on = (
            f"{r.gpus or '?'}x {r.gpu} at {r.bandwidth_gbps:,.0f} GB/s datasheet, "
            f"TP={r.tensor_parallel_size}"
            + (f", L = {self.acceptance_length:.2f}" if self.acceptance_length else "")
        )
        figures = "; ".join(
            f"{p.prompt} {p.published_tps:,.2f} tok/s is {p.fraction_pct:.1f} % of "
            f"{p.bound_tps:,.1f}"
            for p in self.prompts
        )
        out = [f"{head}: {figures} ({on})"]
        if self.efficiency_pct is not None:
            out.append(
                f"at one efficiency for every prompt (e = {self.efficiency_pct:.1f} %) the "
                "published figures need L = "
                + ", ".join(f"{p.needed_length:.2f} ({p.prompt})" for p in self.prompts)
            )
        return out + [f"ABOVE ITS BOUND: {f}" for f in self.flags]


def _prompt_line(p: PromptPlausibility, c: Plausibility) -> str:
    text = (
        f"  {p.prompt}: published {p.published_tps:,.2f} tok/s; bound {p.bound_tps:,.1f} tok/s "
        f"(T = {p.step_ms:.2f} ms at c = {p.context_tokens:,.0f} tokens, {p.context_from}); "
        f"{p.fraction_pct:.1f} % of the bound"
    )
    if c.spec_method != "none":
        text += (
            f"; ceiling {p.ceiling_tps:,.1f} tok/s (all {c.num_speculative_tokens} accepted); "
            f"needs L >= {p.needed_at_bound:.2f} at 100 %"
        )
    return text


def rig_bandwidth(rig: str | None, tensor_parallel_size: int) -> RigBandwidth | str:
    """The published rig's GPUs and their datasheet bandwidth, or why there is none."""
    if not rig:
        return "the reference states no rig: no GPU to take a bandwidth from"
    count, words = rig_gpus(rig)
    gpu = find_gpu(rig)
    if gpu is None:
        return f"no bandwidth figure for GPU {words or rig} (kit's table: {known_names()})"
    return RigBandwidth(
        rig=rig,
        gpu=gpu.name,
        gpus=count,
        tensor_parallel_size=tensor_parallel_size,
        bandwidth_gbps=gpu.bandwidth_gbps,
        source=gpu.source,
    )


@dataclass(frozen=True)
class Published:
    """One published decode figure: the prompt ``name``, its ``decode_tps``, the average
    ``context`` of a request and where it comes from, and the ``tokens`` a request generates
    (weights the pooled acceptance)."""

    name: str
    decode_tps: float
    context: float
    context_from: str
    tokens: float


@dataclass(frozen=True)
class ReferenceModel:
    """What the bound on the reference's rig is computed from: the bytes and draft passes
    (``setup``, at the rig's bandwidth), where the bytes come from, the speculative method,
    and the stated acceptance length and its source (None: none stated)."""

    setup: BoundSetup
    rig: RigBandwidth
    bytes_from: str
    spec_method: str
    acceptance_length: float | None
    acceptance_from: str | None


def not_computed(why: list[str]) -> Plausibility:
    return Plausibility(
        caveat=CAVEAT,
        formula=FORMULA,
        rig=None,
        bytes_from=None,
        spec_method="none",
        num_speculative_tokens=0,
        acceptance_length=None,
        acceptance_from=None,
        efficiency_pct=None,
        prompts=[],
        flags=[],
        missing=why,
    )


def plausibility(model: ReferenceModel, published: list[Published]) -> Plausibility:
    """Each published decode figure against the bound on the reference's rig."""
    spec = model.spec_method != "none"
    k = model.setup.k if spec else 0
    length, source = model.acceptance_length, model.acceptance_from
    if spec and length is None:
        length, source = 1.0 + k, "none stated: every draft token accepted, the ceiling"
    rows = []
    for p in published:
        at = bound_at(p.name, p.context, p.decode_tps, length if spec else None, model.setup)
        step_s = at.step_bound_ms / 1000
        rows.append((p, at.bound_tps, step_s, (1 + k) / step_s))
    stated = spec and model.acceptance_length is not None
    e = _efficiency(model.acceptance_length or 1.0, rows) if stated else None
    prompts = [
        PromptPlausibility(
            prompt=p.name,
            published_tps=p.decode_tps,
            context_tokens=p.context,
            context_from=p.context_from,
            step_ms=step_s * 1000,
            bound_tps=bound,
            fraction_pct=p.decode_tps / bound * 100,
            ceiling_tps=ceiling,
            needed_at_bound=p.decode_tps * step_s,
            needed_length=p.decode_tps * step_s / e if e else None,
            above_bound=p.decode_tps > bound,
            above_ceiling=p.decode_tps > ceiling,
        )
        for p, bound, step_s, ceiling in rows
    ]
    return Plausibility(
        caveat=CAVEAT,
        formula=FORMULA,
        rig=model.rig,
        bytes_from=model.bytes_from,
        spec_method=model.spec_method,
        num_speculative_tokens=k,
        acceptance_length=length if spec else None,
        acceptance_from=source if spec else None,
        efficiency_pct=e * 100 if e is not None else None,
        prompts=prompts,
        flags=_flags(prompts, model.acceptance_length, e),
        missing=[],
    )


def _efficiency(length: float, rows: list[tuple[Published, float, float, float]]) -> float | None:
    """e = sum(N_p) / (L x sum(N_p / (published_p x T_p))): the one efficiency at which the
    stated acceptance, pooled over draft steps, gives every prompt's published figure."""
    tokens = sum(p.tokens for p, *_ in rows)
    steps = sum(p.tokens / (p.decode_tps * step_s) for p, _, step_s, _ in rows)
    return tokens / (length * steps) if steps else None


def _flags(prompts: list[PromptPlausibility], length: float | None, e: float | None) -> list[str]:
    out = []
    for p in prompts:
        if p.above_ceiling:
            out.append(
                f"{p.prompt}: {p.published_tps:,.2f} tok/s is above the bound at every draft token "
                f"accepted ({p.ceiling_tps:,.1f} tok/s): impossible on this rig by this model"
            )
        elif p.above_bound:
            at = f" at the stated L = {length:.2f}" if length is not None else ""
            out.append(
                f"{p.prompt}: {p.published_tps:,.2f} tok/s is above its bound{at} "
                f"({p.bound_tps:,.1f} tok/s, {p.fraction_pct:.0f} %)"
            )
    if e is not None and e > 1:
        out.append(
            f"the stated acceptance explains the published figures only at {e * 100:.0f} % of "
            "the bound: more than the rig can give"
        )
    return out
