"""The model's shape, derived once per preflight run (:func:`model_shapes`) and handed to each
check that sizes something: a synthetic recipe's ``model.shape``, a local model's
``config.json``, else the hub model's (kit's hub cache, or the hub where it answers,
:mod:`kit.preflight.hub`). Where a shape is not known, it says why and what would make it known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kit.paths import display_path
from kit.preflight import hub
from kit.recipe import LoadedRecipe, SyntheticModel
from kit.recipe.sources import HubModel, LocalModel, SyntheticDraft


@dataclass(frozen=True)
class Shape:
    """What the estimates need of a decoder model."""

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


@dataclass(frozen=True)
class Unknown:
    """Why a size is not known, and what would make it known ('' where nothing kit can do)."""

    why: str
    hint: str = ""


@dataclass(frozen=True)
class ModelShapes:
    """What preflight sizes a run from: the target model's shape and the draft's parameters
    (0: no draft), each known or :class:`Unknown`."""

    target: Shape | Unknown
    draft_params: int | Unknown

    def unknown(self) -> list[Unknown]:
        """Why the target or the draft is not known (empty: both are)."""
        return [u for u in (self.target, self.draft_params) if isinstance(u, Unknown)]


def model_shapes(loaded: LoadedRecipe) -> ModelShapes:
    """The target's shape and the draft's parameters, where known without a download."""
    recipe = loaded.recipe
    target = _target_shape(loaded)
    draft = recipe.speculative.draft
    draft_params: int | Unknown
    if draft is None:
        draft_params = 0
    elif isinstance(draft, SyntheticDraft):
        if isinstance(target, Unknown):
            draft_params = target  # built to match the target (a synthetic one: always known)
        else:
            layer = Shape(
                target.hidden,
                target.intermediate,
                draft.num_hidden_layers,
                target.heads,
                target.kv_heads,
                target.head_dim,
                0,
            )
            draft_params = layer.params()
    else:
        shape = _config_shape(loaded, "draft", draft)
        draft_params = shape if isinstance(shape, Unknown) else shape.params()
    return ModelShapes(target, draft_params)


def _target_shape(loaded: LoadedRecipe) -> Shape | Unknown:
    model = loaded.recipe.model
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
    return _config_shape(loaded, "model", model)


def _config_shape(loaded: LoadedRecipe, role: str, spec: HubModel | LocalModel) -> Shape | Unknown:
    """The shape in the model's ``config.json``: the local directory's, or the hub's."""
    if isinstance(spec, LocalModel):
        path = loaded.resolve_path(spec.path) / "config.json"
        where = f"{role} {display_path(path.parent)}"
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return Unknown(f"{where}: its config.json does not read ({type(exc).__name__})")
    else:
        where = f"{role} {spec.repo_id}"
        found, why = hub.config(spec)
        if found is None:
            return Unknown(f"{where}: {why}", hub.fix(why, display_path(loaded.path)))
        config = found
    shape = Shape.from_config(config) if isinstance(config, dict) else None
    if shape is None:
        return Unknown(f"{where}: its config.json has no decoder shape kit reads")
    return shape
