"""GPU preflight: enough cards, and enough memory on each, before any download.

The memory a GPU recipe needs on each card is estimated from the model's shape
(:mod:`kit.preflight.shape`) by :func:`estimate`, whose docstring holds the formula.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kit.preflight.shape import Shape
from kit.probe.nvml import start_nvml
from kit.recipe import AutoRoundQuantization, Recipe

log = logging.getLogger(__name__)

GIB = 1024**3
FIXED_GIB = 2.5
_KV_BYTES = {"auto": None, "bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class Card:
    """One visible GPU."""

    index: int
    name: str
    memory_gib: float


def visible_cards() -> tuple[list[Card], str | None]:
    """The GPUs NVML shows, and why none could be read (no driver, no bindings) if so."""
    nvml, why = start_nvml()
    if nvml is None:
        return [], why
    cards = []
    try:
        for i in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            name = nvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            total = nvml.nvmlDeviceGetMemoryInfo(handle).total
            cards.append(Card(index=i, name=name, memory_gib=total / GIB))
    except Exception as exc:  # a broken driver is an answer: no usable cards
        return cards, f"NVML failed: {type(exc).__name__}"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # nothing to do about a failed shutdown
            log.debug("nvmlShutdown failed", exc_info=True)
    return cards, None


def _kv_bytes(recipe: Recipe) -> int:
    dtype = recipe.server.kv_cache_dtype or "auto"
    if dtype in _KV_BYTES:
        return _KV_BYTES[dtype] or (4 if recipe.server.dtype == "float32" else 2)
    return 1  # fp8 and int8 variants


@dataclass(frozen=True)
class Estimate:
    """GiB per card, by part."""

    weights: float
    draft: float
    kv_cache: float
    fixed: float = FIXED_GIB

    @property
    def total(self) -> float:
        return self.weights + self.draft + self.kv_cache + self.fixed


def estimate(recipe: Recipe, shape: Shape, draft_params: int) -> Estimate:
    """The memory one card needs, for a target of ``shape`` and a draft of ``draft_params``,
    written down here so that it can be checked::

        body     = layers x (attention + MLP) parameters
        weights  = body x bits / 8 (+ one bf16 scale per group)  +  embeddings and lm_head in bf16
                   (AutoRound keeps both; one matrix when tied)                          / TP
        draft    = draft params x 2 (bf16)                                              / TP
        kv cache = 2 x attention layers x kv_heads x head_dim x kv bytes x max_model_len / TP
                   (a hybrid model's linear-attention layers keep a small fixed state instead)
        fixed    = 2.5 GiB  (CUDA context, CUDA graphs, activations of one prefill chunk)

        need per card = weights + draft + kv cache + fixed,  against
        gpu_memory_utilization x the card's memory (what vLLM allows itself).

    bits and group size are the recipe's AutoRound settings, or the ``quantization_config`` of a
    checkpoint served as published. One sequence at ``max_model_len`` is the least the engine
    accepts at boot; a load sweep needs more, and vLLM then says how many sequences fit. Where the
    shape is not known (a hub model, the hub not reachable), the check is not made and says why.
    """
    tp = recipe.server.tensor_parallel_size
    quant = recipe.quantization
    bits, group = (
        (quant.bits, quant.group_size)
        if isinstance(quant, AutoRoundQuantization)
        else (
            shape.bits,
            shape.group_size,
        )
    )
    body = shape.body_params()
    if bits is not None and bits < 16:
        per_group = group if group and group > 0 else shape.hidden
        weight_bytes = body * bits / 8 + body / per_group * 2
    else:
        weight_bytes = body * 2
    weight_bytes += shape.embedding_params() * 2
    kv = 2 * shape.kv_layers * shape.kv_heads * shape.head_dim * _kv_bytes(recipe)
    kv *= recipe.server.max_model_len
    return Estimate(
        weights=weight_bytes / tp / GIB, draft=draft_params * 2 / tp / GIB, kv_cache=kv / tp / GIB
    )
