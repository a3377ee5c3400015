"""A checkpoint's bytes estimated from its ``config.json`` shape and a quantization, where the
checkpoint is not at hand (a published reference's model): the same :class:`ModelBytes` that
:func:`kit.roofline.checkpoint.model_bytes` reads from safetensors headers. The terms are in
docs/roofline.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from kit.errors import BadInputError
from kit.roofline.checkpoint import ModelBytes, kv_element_bytes, kv_layers

DENSE_BYTES = 2  # bf16/fp16: the unquantized tensors (norms, embedding, lm_head, a bf16 draft)
SCALE_BYTES = 2  # one fp16 scale per group and output column


@dataclass(frozen=True)
class Quant:
    """Weight-only quantization of the linear layers: ``bits`` per weight, one fp16 scale and
    one packed ``bits``-wide zero point per ``group_size`` weights (AutoRound's and GPTQ's
    packing stores zero points even when symmetric); ``group_size`` -1: per output column."""

    bits: int
    group_size: int

    def bytes_per_weight(self, fan_in: int) -> float:
        group = fan_in if self.group_size <= 0 else self.group_size
        return self.bits / 8 + (SCALE_BYTES + self.bits / 8) / group


def quant_of(recipe: dict[str, Any], config: dict[str, Any]) -> Quant | None:
    """The recipe's quantization (kit quantizes), else the checkpoint's own
    ``quantization_config`` (a published quantized checkpoint); None: unquantized."""
    q = recipe.get("quantization") or {}
    if q.get("method") not in (None, "none"):
        return Quant(int(q.get("bits", 4)), int(q.get("group_size", 128)))
    qc = config.get("quantization_config") or {}
    if qc.get("bits"):
        return Quant(int(qc["bits"]), int(qc.get("group_size") or 128))
    return None


def _int(cfg: dict[str, Any], key: str, where: str) -> int:
    try:
        return int(cfg[key])
    except (KeyError, TypeError, ValueError):
        raise BadInputError(f"{where}: config.json has no {key}") from None


@dataclass(frozen=True)
class _Shape:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int

    @classmethod
    def of(cls, cfg: dict[str, Any], where: str) -> _Shape:
        hidden = _int(cfg, "hidden_size", where)
        heads = _int(cfg, "num_attention_heads", where)
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        return cls(hidden, heads, kv_heads, int(cfg.get("head_dim") or hidden // heads))


def _layer_weights(cfg: dict[str, Any], s: _Shape, where: str) -> tuple[int, int]:
    """Linear weights of one attention layer and of one linear-attention (Gated DeltaNet)
    layer (the same where the model has none)."""
    if cfg.get("num_experts") or cfg.get("num_local_experts"):
        raise BadInputError(f"{where}: a mixture of experts: kit's bound models dense layers only")
    mlp = 3 * s.hidden * _int(cfg, "intermediate_size", where)
    gate = 2 if cfg.get("attn_output_gate") else 1  # Qwen3-Next/3.5 gate the attention output
    attn = (
        s.hidden * s.head_dim * (s.heads * gate + 2 * s.kv_heads) + s.heads * s.head_dim * s.hidden
    )
    if "linear_num_value_heads" not in cfg:
        return attn + mlp, attn + mlp
    nk, nv = _int(cfg, "linear_num_key_heads", where), _int(cfg, "linear_num_value_heads", where)
    dk, dv = _int(cfg, "linear_key_head_dim", where), _int(cfg, "linear_value_head_dim", where)
    # in_proj_qkvz, in_proj_ba, out_proj
    linear = s.hidden * (2 * nk * dk + 2 * nv * dv) + s.hidden * 2 * nv + nv * dv * s.hidden
    return attn + mlp, linear + mlp


def config_bytes(
    config: dict[str, Any],
    role: Literal["target", "draft"],
    quant: Quant | None,
    kv_cache_dtype: str = "auto",
    where: str = "model",
) -> ModelBytes:
    """A checkpoint's bytes by role, estimated from its shape: the linear layers at ``quant``
    (bf16 without), norms, embedding and lm_head in bf16. A draft (DFlash, EAGLE) shares the
    target's embedding and lm_head: it has none of its own here."""
    inner = config.get("text_config")
    cfg: dict[str, Any] = inner if isinstance(inner, dict) else config
    s = _Shape.of(cfg, where)
    layers = _int(cfg, "num_hidden_layers", where)
    attending = kv_layers(config)
    full, linear = _layer_weights(cfg, s, where)
    weights = attending * full + (layers - attending) * linear
    packed = round(weights * quant.bits / 8) if quant is not None else 0
    meta = round(weights * quant.bytes_per_weight(s.hidden)) - packed if quant is not None else 0
    norms = layers * 2 * s.hidden * DENSE_BYTES
    vocab = 0 if role == "draft" else _int(cfg, "vocab_size", where)
    table = vocab * s.hidden * DENSE_BYTES
    return ModelBytes(
        role=role,
        files=0,
        tensors=0,
        quantized_bytes=packed,
        quant_meta_bytes=meta,
        dense_layer_bytes=norms + (0 if quant is not None else weights * DENSE_BYTES),
        lm_head_bytes=table,
        embedding_bytes=table,
        embedding_row_bytes=s.hidden * DENSE_BYTES if vocab else 0,
        other_bytes=s.hidden * DENSE_BYTES,
        replicated_bytes=norms + s.hidden * DENSE_BYTES,
        layers=layers,
        kv_heads=s.kv_heads,
        head_dim=s.head_dim,
        kv_bytes_per_token=2
        * attending
        * s.kv_heads
        * s.head_dim
        * kv_element_bytes(config, kv_cache_dtype),
        quantization={"bits": quant.bits, "group_size": quant.group_size} if quant else None,
    )
