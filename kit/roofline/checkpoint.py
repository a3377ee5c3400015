"""What a checkpoint's tensors weigh, by what one decode step reads of them.

From config.json, its ``quantization_config`` and the safetensors headers: actual tensor
sizes, no weights read. The formula that uses these bytes is in :mod:`kit.roofline`.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from kit.base import KitModel
from kit.errors import BadInputError

TORCH_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float": 4, "half": 2}
QUANT_META = ("scales", "qzeros", "g_idx", "zeros", "scale")


class TensorInfo(KitModel):
    name: str
    dtype: str
    shape: list[int]
    nbytes: int


class ModelBytes(KitModel):
    """What one checkpoint's tensors weigh, by role in a decode step (from safetensors headers)."""

    role: Literal["target", "draft"] = Field(description="Target model or speculative draft.")
    files: int = Field(description="safetensors files read (headers only).")
    tensors: int = Field(description="Tensors found.")
    quantized_bytes: int = Field(description="Packed quantized weights (qweight), layer tensors.")
    quant_meta_bytes: int = Field(description="Scales, zero points, g_idx of quantized layers.")
    dense_layer_bytes: int = Field(description="Unquantized layer tensors (norms, biases, ...).")
    lm_head_bytes: int = Field(description="lm_head (0 when the draft shares the target's).")
    embedding_bytes: int = Field(description="The embedding table (not read whole per token).")
    embedding_row_bytes: int = Field(description="One embedding row: read per token processed.")
    other_bytes: int = Field(description="Everything else read per pass (final norm, fc, ...).")
    replicated_bytes: int = Field(
        description="Of the bytes read per pass, those every TP rank holds whole (1-D norms, "
        "a DFlash draft's fc)."
    )
    layers: int = Field(description="Decoder layers (num_hidden_layers).")
    kv_heads: int = Field(description="Key/value heads.")
    head_dim: int = Field(description="Per-head dimension.")
    kv_bytes_per_token: int = Field(
        description="2 x layers x kv_heads x head_dim x kv_bytes: KV read per context token "
        "(a hybrid model's attention layers only, not its linear-attention ones)."
    )
    quantization: dict[str, Any] | None = Field(
        None, description="bits, group_size, sym, packing: from quantization_config."
    )

    @property
    def per_pass_bytes(self) -> int:
        """Bytes read once per forward pass, context and embedding rows aside."""
        return (
            self.quantized_bytes
            + self.quant_meta_bytes
            + self.dense_layer_bytes
            + self.lm_head_bytes
            + self.other_bytes
        )

    def per_gpu_pass_bytes(self, tp: int) -> float:
        sharded = self.per_pass_bytes - self.replicated_bytes
        return sharded / tp + self.replicated_bytes


def read_safetensors_header(path: Path) -> list[TensorInfo]:
    """Tensor names, dtypes, shapes and sizes from a safetensors file's header alone."""
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise BadInputError(f"{path}: not a safetensors file (too short)")
        (length,) = struct.unpack("<Q", raw)
        if length > 100 << 20:
            raise BadInputError(f"{path}: safetensors header of {length} bytes is implausible")
        header = json.loads(f.read(length))
    out = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        out.append(
            TensorInfo(
                name=name, dtype=meta["dtype"], shape=list(meta["shape"]), nbytes=end - start
            )
        )
    return out


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def kv_layers(config: dict[str, Any]) -> int:
    """Layers that keep a KV cache: all of them, less a hybrid model's linear-attention ones
    (``layer_types``, else every ``full_attention_interval``-th layer attends)."""
    cfg = _text_config(config)
    layers = int(cfg.get("num_hidden_layers", 0))
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        return sum(1 for t in types if t != "linear_attention")
    interval = cfg.get("full_attention_interval")
    if isinstance(interval, int) and interval > 1:
        return layers // interval
    return layers


def kv_element_bytes(config: dict[str, Any], kv_cache_dtype: str = "auto") -> int:
    """Bytes per cached K or V element: the model dtype unless the server caches in fp8/int8."""
    if kv_cache_dtype.startswith(("fp8", "int8")):
        return 1
    cfg = _text_config(config)
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype") or "")
    return TORCH_DTYPE_BYTES.get(dtype.replace("torch.", ""), 2)


def model_bytes(
    model_dir: Path, role: Literal["target", "draft"] = "target", kv_cache_dtype: str = "auto"
) -> ModelBytes:
    """Classify every tensor of a checkpoint by what a decode step reads of it."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{model_dir}: cannot read config.json: {exc}") from None
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise BadInputError(f"{model_dir}: no *.safetensors files")
    tensors = [t for f in files for t in read_safetensors_header(f)]
    cfg = _text_config(config)
    q = dict(config.get("quantization_config") or {})
    quant = {
        k: q[k] for k in ("quant_method", "bits", "group_size", "sym", "packing_format") if k in q
    } or None
    sizes = dict.fromkeys(
        ("quantized", "meta", "dense", "lm_head", "embedding", "other", "replicated"), 0
    )
    embed_row = 0
    for t in tensors:
        name = t.name
        layer = ".layers." in f".{name}"
        if "lm_head" in name:
            sizes["lm_head"] += t.nbytes
        elif "embed_tokens" in name or name.endswith("wte.weight"):
            sizes["embedding"] += t.nbytes
            if len(t.shape) == 2 and t.shape[0]:
                embed_row += t.nbytes // t.shape[0]
            continue
        elif layer and name.endswith(".qweight"):
            sizes["quantized"] += t.nbytes
        elif layer and name.rsplit(".", 1)[-1] in QUANT_META:
            sizes["meta"] += t.nbytes
        elif layer:
            sizes["dense"] += t.nbytes
        else:
            sizes["other"] += t.nbytes
        if len(t.shape) <= 1 or (role == "draft" and name.split(".")[-2:-1] == ["fc"]):
            sizes["replicated"] += t.nbytes
    tied = bool(config.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False)))
    if sizes["lm_head"] == 0 and tied:
        sizes["lm_head"] = sizes["embedding"]
    layers = int(cfg.get("num_hidden_layers", 0))
    kv_heads = int(cfg.get("num_key_value_heads", cfg.get("num_attention_heads", 0)))
    head_dim = int(
        cfg.get("head_dim")
        or int(cfg.get("hidden_size", 0)) // max(int(cfg.get("num_attention_heads", 1)), 1)
    )
    return ModelBytes(
        role=role,
        files=len(files),
        tensors=len(tensors),
        quantized_bytes=sizes["quantized"],
        quant_meta_bytes=sizes["meta"],
        dense_layer_bytes=sizes["dense"],
        lm_head_bytes=sizes["lm_head"],
        embedding_bytes=sizes["embedding"],
        embedding_row_bytes=embed_row,
        other_bytes=sizes["other"],
        replicated_bytes=sizes["replicated"],
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        kv_bytes_per_token=2
        * kv_layers(config)
        * kv_heads
        * head_dim
        * kv_element_bytes(config, kv_cache_dtype),
        quantization=quant,
    )
