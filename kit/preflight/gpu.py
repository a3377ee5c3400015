"""GPU preflight: enough cards, and enough memory on each, before any download.

The memory a GPU recipe needs on each card is estimated from the model's shape (a synthetic
recipe's ``model.shape``, else the model's ``config.json``: from kit's hub cache, or fetched
where the hub is reachable, :mod:`kit.preflight.hub`) and written down here so that it can be
checked:

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
shape is not known (a hub model, the hub not reachable), the estimate is skipped and the check
says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kit.preflight import hub
from kit.probe.nvml import start_nvml
from kit.recipe import AutoRoundQuantization, Recipe, SyntheticModel
from kit.recipe.sources import HubModel, SyntheticDraft

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


@dataclass(frozen=True)
class Shape:
    """What the estimate needs of a decoder model."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    attention_layers: int | None = None  # full-attention layers of a hybrid model
    tied: bool = False
    bits: int | None = None  # a published checkpoint's quantization_config
    group_size: int | None = None

    def body_params(self) -> int:
        attn = self.hidden * self.head_dim * 2 * (self.heads + self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (attn + mlp)

    def embedding_params(self) -> int:
        return (1 if self.tied else 2) * self.vocab * self.hidden

    def params(self) -> int:
        return self.body_params() + self.embedding_params()

    @property
    def kv_layers(self) -> int:
        return self.layers if self.attention_layers is None else self.attention_layers

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Shape | None:
        """From a Hugging Face ``config.json`` (its ``text_config`` for multimodal models)."""
        quant = config.get("quantization_config") or {}
        text = config.get("text_config") or config
        try:
            heads = int(text["num_attention_heads"])
            hidden = int(text["hidden_size"])
            layers = int(text["num_hidden_layers"])
            return cls(
                hidden=hidden,
                intermediate=int(text["intermediate_size"]),
                layers=layers,
                heads=heads,
                kv_heads=int(text.get("num_key_value_heads") or heads),
                head_dim=int(text.get("head_dim") or hidden // heads),
                vocab=int(text["vocab_size"]),
                attention_layers=_attention_layers(text, layers),
                tied=bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings"))),
                bits=int(quant["bits"]) if quant.get("bits") else None,
                group_size=int(quant["group_size"]) if quant.get("group_size") else None,
            )
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return None


def _attention_layers(text: dict[str, Any], layers: int) -> int | None:
    """Full-attention layers of a hybrid model (``layer_types``, else
    ``full_attention_interval``); None when every layer attends."""
    types = text.get("layer_types")
    if isinstance(types, list) and types:
        return sum(1 for t in types if t == "full_attention")
    interval = text.get("full_attention_interval")
    if isinstance(interval, int) and interval > 1:
        return layers // interval
    return None


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


def model_shape(recipe: Recipe) -> Shape | None:
    """The target model's shape, where it is known without a download."""
    model = recipe.model
    if isinstance(model, SyntheticModel):
        s = model.shape
        return Shape(
            s.hidden_size,
            s.intermediate_size,
            s.num_hidden_layers,
            s.num_attention_heads,
            s.num_key_value_heads,
            s.head_dim,
            s.vocab_size,
        )
    if isinstance(model, HubModel):
        config = hub.config(model)
        return Shape.from_config(config) if config else None
    return None


def _draft_params(recipe: Recipe, target: Shape) -> int | None:
    draft = recipe.speculative.draft if recipe.speculative else None
    if draft is None:
        return 0
    if isinstance(draft, SyntheticDraft):
        layer = Shape(
            target.hidden,
            target.intermediate,
            draft.num_hidden_layers,
            target.heads,
            target.kv_heads,
            target.head_dim,
            0,
        )
        return layer.params()
    if isinstance(draft, HubModel):
        config = hub.config(draft)
        shape = Shape.from_config(config) if config else None
        return shape.params() if shape else None
    return None


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


def estimate(recipe: Recipe) -> Estimate | None:
    """The memory one card needs (the module's formula); None where the shape is unknown."""
    shape = model_shape(recipe)
    if shape is None:
        return None
    draft = _draft_params(recipe, shape)
    if draft is None:
        return None
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
        weights=weight_bytes / tp / GIB, draft=draft * 2 / tp / GIB, kv_cache=kv / tp / GIB
    )
