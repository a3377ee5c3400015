"""The bound: bytes per decode step over the bandwidth, and each prompt's efficiency against it.

The formula, with speculative decoding and tensor parallelism, is in :mod:`kit.roofline`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from kit.base import KitModel
from kit.bench import BenchResult
from kit.metrics import SpecDecode
from kit.roofline.bandwidth import Bandwidth
from kit.roofline.checkpoint import ModelBytes, model_bytes
from kit.roofline.model import Pass, StepModel, step_model

FORMULA = (
    "bytes per target pass B = layer tensors (packed int4 qweight + scales + qzeros + "
    "unquantized norms) + lm_head + other + one embedding row per token + KV cache "
    "(2 x layers x kv_heads x head_dim x kv_bytes x c, c = prompt + completion/2); draft pass "
    "= draft tensors + shared lm_head + draft KV; per GPU with TP = sharded/n + replicated; "
    "bound TPS = L x BW / (B_target + B_draft), L = 1 + accepted/drafts; plain bound = "
    "BW / B_target; efficiency = measured decode TPS / bound TPS"
)


class PromptRoofline(KitModel):
    prompt: str = Field(description="Prompt name.")
    context_tokens: float = Field(
        description="Average context over the request (prompt + completion/2), mean of runs."
    )
    target_pass_bytes_per_gpu: float = Field(description="B_target per GPU for that context.")
    draft_step_bytes_per_gpu: float = Field(description="B_draft per GPU (0 without a draft).")
    step_bound_ms: float = Field(description="(B_target + B_draft) per GPU / BW, ms.")
    acceptance_length: float | None = Field(
        description="Tokens per target pass, 1 + accepted/drafts (None: no spec decoding)."
    )
    bound_tps: float = Field(description="L / step bound: the memory-bandwidth bound, tok/s.")
    plain_bound_tps: float = Field(description="BW / B_target: the bound without a draft.")
    measured_decode_tps: float | None = Field(
        description="kit's headline decode TPS: the median of the runs the headline uses (the "
        "mean of every usable run in reports written before 2026-12-07)."
    )
    efficiency_pct: float | None = Field(description="measured / bound_tps, percent.")
    plain_efficiency_pct: float | None = Field(description="measured / plain_bound_tps, percent.")
    step_model: StepModel | None = Field(
        None,
        description="The measured step against the step model (kit.roofline.model): the "
        "per-layer time it implies, the plain step and the speed-up over no draft it predicts; "
        "None without a measured figure, and in reports written before 2026-12-07.",
    )


class Roofline(KitModel):
    """Decode efficiency against the memory-bandwidth bound (formula: kit/roofline.py)."""

    formula: str = Field(description="The formula, in one line.")
    tensor_parallel_size: int = Field(description="GPUs the model is sharded over.")
    spec_method: str = Field(description="Speculative decoding method ('none' without).")
    draft_passes_per_step: int = Field(description="Draft forward passes per step.")
    bandwidth: Bandwidth = Field(description="Bandwidth used, measured and datasheet figures.")
    target: ModelBytes = Field(description="The served (quantized) target's bytes.")
    draft: ModelBytes | None = Field(None, description="The draft's bytes.")
    prompts: list[PromptRoofline] = Field(description="Per prompt.")
    notes: list[str] = Field(default_factory=list, description="Caveats.")


def draft_passes(method: str, k: int) -> int:
    """Draft forward passes per step: DFlash drafts its block at once, others token by token."""
    if method in {"none", "ngram"}:
        return 0
    if method in {"dflash", "dflash2"}:
        return 1
    return k


def target_pass_bytes(target: ModelBytes, context: float, tokens: int, tp: int) -> float:
    """B_target per GPU: weights once, one embedding row per token, the context's KV cache."""
    return (
        target.per_gpu_pass_bytes(tp)
        + target.embedding_row_bytes * tokens / tp
        + target.kv_bytes_per_token * context / tp
    )


def draft_step_bytes(
    draft: ModelBytes | None, target: ModelBytes, passes: int, context: float, tp: int
) -> float:
    """B_draft per GPU: each pass reads the draft's tensors, the lm_head it shares when it has
    none of its own, and its KV cache."""
    if draft is None or passes == 0:
        return 0.0
    lm_head = 0 if draft.lm_head_bytes else target.lm_head_bytes
    per_pass = draft.per_gpu_pass_bytes(tp) + lm_head / tp + draft.kv_bytes_per_token * context / tp
    return passes * per_pass


@dataclass(frozen=True)
class BoundSetup:
    """What a prompt's bound is computed for: the ``target`` and ``draft`` checkpoints' bytes,
    ``passes`` draft passes per step verifying ``k`` tokens, tensor parallel ``tp``, at
    ``bandwidth_gbps`` per GPU."""

    target: ModelBytes
    draft: ModelBytes | None
    passes: int
    k: int
    tp: int
    bandwidth_gbps: float


@dataclass(frozen=True)
class Deployment:
    """What the roofline of a run reads from its recipe and build: the served checkpoint
    (``target_dir``) and the draft's (``draft_dir``), the speculative method and its tokens,
    tensor parallel size and KV cache dtype."""

    target_dir: Path
    draft_dir: Path | None
    spec_method: str
    num_speculative_tokens: int
    tensor_parallel_size: int
    kv_cache_dtype: str


def prompt_bound(
    name: str,
    context: float,
    measured_tps: float | None,
    spec: SpecDecode | None,
    setup: BoundSetup,
) -> PromptRoofline:
    """A prompt's bound at the acceptance its counters measured (none: no draft)."""
    length = spec.acceptance_length if spec is not None else None
    return bound_at(name, context, measured_tps, length, setup)


def bound_at(
    name: str,
    context: float,
    measured_tps: float | None,
    length: float | None,
    setup: BoundSetup,
) -> PromptRoofline:
    """A prompt's bound at acceptance length ``length`` (1 + accepted/drafts; None: no draft)
    and average context ``context``; ``measured_tps`` against it."""
    target, draft, passes, k, tp = setup.target, setup.draft, setup.passes, setup.k, setup.tp
    bw = setup.bandwidth_gbps * 1e9
    verify_tokens = 1 + (k if length is not None else 0)
    b_target = target_pass_bytes(target, context, verify_tokens, tp)
    b_draft = draft_step_bytes(draft, target, passes, context, tp) if length is not None else 0.0
    step_s = (b_target + b_draft) / bw
    bound = (length or 1.0) / step_s
    b_plain = target_pass_bytes(target, context, 1, tp)
    plain = bw / b_plain
    model = None
    if measured_tps:
        draft_layers = draft.layers * passes if draft is not None and length is not None else 0
        spec = Pass(target.layers + draft_layers, b_target + b_draft)
        step_ms = (length or 1.0) / measured_tps * 1000
        model = step_model(
            step_ms, length, spec, Pass(target.layers, b_plain), draft_layers, setup.bandwidth_gbps
        )
    return PromptRoofline(
        prompt=name,
        context_tokens=context,
        target_pass_bytes_per_gpu=b_target,
        draft_step_bytes_per_gpu=b_draft,
        step_bound_ms=step_s * 1000,
        acceptance_length=length,
        bound_tps=bound,
        plain_bound_tps=plain,
        measured_decode_tps=measured_tps,
        efficiency_pct=measured_tps / bound * 100 if measured_tps else None,
        plain_efficiency_pct=measured_tps / plain * 100 if measured_tps else None,
        step_model=model,
    )


def mean_context(result: BenchResult, prompt: str) -> float | None:
    """Average context over the usable measured runs: prompt_tokens + completion_tokens / 2."""
    ctx = [
        (r.prompt_tokens or 0) + (r.completion_tokens or 0) / 2
        for r in result.records
        if r.prompt == prompt and r.phase == "measured" and r.usable
    ]
    return sum(ctx) / len(ctx) if ctx else None


def roofline(result: BenchResult, deployment: Deployment, bandwidth: Bandwidth) -> Roofline:
    """The bound and the efficiency of each prompt of a bench result."""
    d = deployment
    target_dir, draft_dir, kv_cache_dtype = d.target_dir, d.draft_dir, d.kv_cache_dtype
    spec_method, num_speculative_tokens = d.spec_method, d.num_speculative_tokens
    tensor_parallel_size = d.tensor_parallel_size
    target = model_bytes(target_dir, "target", kv_cache_dtype)
    draft = model_bytes(draft_dir, "draft", kv_cache_dtype) if draft_dir is not None else None
    passes = draft_passes(spec_method, num_speculative_tokens)
    setup = BoundSetup(
        target=target,
        draft=draft,
        passes=passes,
        k=num_speculative_tokens,
        tp=tensor_parallel_size,
        bandwidth_gbps=bandwidth.used_gbps,
    )
    prompts = []
    for p in result.prompts:
        context = mean_context(result, p.prompt)
        if context is None:
            continue
        prompts.append(
            prompt_bound(
                p.prompt,
                context,
                p.headline.value,
                p.spec_decode,
                setup,
            )
        )
    notes = [
        "the bound counts device-memory bytes only: kernel launch gaps, sampling, scheduling, "
        "all-reduce and the draft's compute are what separates a measurement from it",
    ]
    if tensor_parallel_size > 1:
        notes.append(
            f"TP={tensor_parallel_size}: per-GPU bytes are the sharded tensors / "
            f"{tensor_parallel_size} plus the replicated ones; each GPU reads its share at the "
            "per-GPU bandwidth at the same time"
        )
    if draft is not None and passes:
        notes.append(
            f"speculative ({spec_method}): a step is one target pass verifying "
            f"1 + {num_speculative_tokens} tokens plus {passes} draft pass(es); the bound is per "
            "target pass times the acceptance length (1 + accepted/drafts)"
        )
    return Roofline(
        formula=FORMULA,
        tensor_parallel_size=tensor_parallel_size,
        spec_method=spec_method,
        draft_passes_per_step=passes,
        bandwidth=bandwidth,
        target=target,
        draft=draft,
        prompts=prompts,
        notes=notes,
    )
