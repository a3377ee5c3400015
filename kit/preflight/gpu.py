"""GPU preflight: enough cards, and enough memory on each, before any download.

The memory a GPU recipe needs on each card is estimated from the model's shape (a synthetic
recipe's ``model.shape``, else the model's ``config.json`` where it is already on this machine)
and written down here so that it can be checked:

    weights  = params x bits / 8  (+ one bf16 scale per group when quantized)  / TP
    draft    = draft params x 2 (bf16)                                          / TP
    kv cache = 2 x layers x kv_heads x head_dim x kv bytes x max_model_len       / TP
    fixed    = 2.5 GiB  (CUDA context, CUDA graphs, activations of one prefill chunk)

    need per card = weights + draft + kv cache + fixed,  against
    gpu_memory_utilization x the card's memory (what vLLM allows itself).

One sequence at ``max_model_len`` is the least the engine accepts at boot; a load sweep needs
more, and vLLM then says how many sequences fit. Where the shape is not known yet (a hub model
not downloaded), the estimate is skipped and the check says so.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

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

    def params(self) -> int:
        attn = self.hidden * self.head_dim * 2 * (self.heads + self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (attn + mlp) + 2 * self.vocab * self.hidden

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Shape | None:
        """From a Hugging Face ``config.json`` (its ``text_config`` for multimodal models)."""
        config = config.get("text_config") or config
        try:
            heads = int(config["num_attention_heads"])
            hidden = int(config["hidden_size"])
            return cls(
                hidden=hidden,
                intermediate=int(config["intermediate_size"]),
                layers=int(config["num_hidden_layers"]),
                heads=heads,
                kv_heads=int(config.get("num_key_value_heads") or heads),
                head_dim=int(config.get("head_dim") or hidden // heads),
                vocab=int(config["vocab_size"]),
            )
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return None


def visible_cards() -> tuple[list[Card], str | None]:
    """The GPUs NVML shows, and why none could be read (no driver, no bindings) if so."""
    from kit.probe.nvml import start_nvml

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


def _cached_config(repo_id: str, revision: str | None) -> dict[str, Any] | None:
    """A hub model's config.json, where kit's huggingface_hub cache has it already (no
    download: a first run estimates once the model is there, or after ``kit build``)."""
    if revision is None:
        return None
    from kit.model.hub import hub_cache_dir

    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(
            repo_id, "config.json", revision=revision, cache_dir=str(hub_cache_dir())
        )
    except Exception:  # no huggingface_hub, a bad id: no estimate
        return None
    if not isinstance(path, str):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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
        config = _cached_config(model.repo_id, model.revision)
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
        config = _cached_config(draft.repo_id, draft.revision)
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
    params = shape.params()
    if isinstance(quant, AutoRoundQuantization):
        weight_bytes = params * quant.bits / 8 + params / quant.group_size * 2
    else:
        weight_bytes = params * 2
    kv = 2 * shape.layers * shape.kv_heads * shape.head_dim * _kv_bytes(recipe)
    kv *= recipe.server.max_model_len
    return Estimate(
        weights=weight_bytes / tp / GIB, draft=draft * 2 / tp / GIB, kv_cache=kv / tp / GIB
    )
