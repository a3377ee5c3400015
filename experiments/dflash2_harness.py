"""The harness of experiments/dflash2-cpu-check.py: results, loop references, and stand-ins.

The stand-ins replace the parts of vLLM that the DFlash2 files import, so that the patched files
of patches/vllm-0.26.0 (and, for comparison, vLLM 0.28.0's own DFlash2 files) load and run on a
CPU without vLLM: a `vllm` package of empty modules, the real Triton under `vllm.triton_utils`,
minimal DFlash base classes, a ReplicatedLinear, a vocab-sharded lm_head, and two fixes for
Triton's CPU interpreter. Nothing here is vLLM's code; the stand-ins only do what the files
under test call.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl
from torch import nn

STEPS, TOPK = 3, 5  # drafted positions per request, candidates per position
FAILED: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {name}{f'  ({detail})' if detail else ''}")
    if not ok:
        FAILED.append(name)


def same(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-5) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=tol, rtol=tol)


def ref_pairs(pred: Any, succ: Any, ids: Any, unary: Any, query: Any, anchors: Any) -> Any:
    """scores[b, s, p, c] = unary[b, s, c] + sum_r pred[prev_p, r] query[b, s, r] succ[c, r],
    prev_p the anchor at step 0, else candidate p of step s - 1; one entry at a time."""
    b, s, k = ids.shape
    out = torch.empty(b, s, k, k)
    for i in range(b):
        for j in range(s):
            for p in range(k):
                prev = anchors[i] if j == 0 else ids[i, j - 1, p]
                for c in range(k):
                    bilinear = (pred[prev] * query[i, j] * succ[ids[i, j, c]]).sum()
                    out[i, j, p, c] = unary[i, j, c] + bilinear
    return out


def ref_walk(scores: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The greedy walk: at each step the argmax of the row of the candidate picked before (row 0
    at step 0). Returns the tokens and the rows used."""
    tokens, rows = torch.empty(ids.shape[:2], dtype=torch.int64), torch.empty(ids.shape)
    for r in range(ids.shape[0]):
        prev = 0
        for s in range(ids.shape[1]):
            rows[r, s] = scores[r, s, prev]
            prev = int(torch.argmax(rows[r, s]))
            tokens[r, s] = ids[r, s, prev]
    return tokens, rows


PACKAGES = [
    "vllm",
    "vllm.compilation",
    "vllm.config",
    "vllm.model_executor",
    "vllm.model_executor.layers",
    "vllm.model_executor.layers.quantization",
    "vllm.model_executor.models",
    "vllm.utils",
    "vllm.v1",
    "vllm.v1.worker",
    "vllm.v1.worker.gpu",
    "vllm.v1.worker.gpu.sample",
    "vllm.v1.worker.gpu.spec_decode",
    "vllm.v1.worker.gpu.spec_decode.dflash",
    "vllm.v1.worker.gpu.spec_decode.dflash2",
]


def _module(name: str, **attrs: Any) -> ModuleType:
    mod = ModuleType(name)
    mod.__dict__.update(attrs)
    if name in PACKAGES:
        mod.__path__ = []  # a package with no files: nothing real is found under it
    return mod


class ReplicatedLinear(nn.Module):
    """y = x @ weight.T, weight [out, in]; what DFlash2 uses of vLLM's ReplicatedLinear."""

    def __init__(self, input_size: int, output_size: int, **kwargs: Any) -> None:
        super().__init__()
        dtype = kwargs.get("params_dtype") or torch.float32
        self.weight = nn.Parameter(torch.empty(output_size, input_size, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.T


class ShardedHead:
    """One tensor-parallel rank's slice of an lm_head: rows [start, start + len(weight)) of the
    vocabulary, the last `padding` of them padding (as VocabParallelEmbedding lays out)."""

    def __init__(self, weight: torch.Tensor, start: int, padding: int, tp_size: int) -> None:
        self.weight = weight
        self.tp_size = tp_size
        self.shard_indices = SimpleNamespace(
            org_vocab_start_index=start, num_org_vocab_padding=padding
        )
        self.quant_method = SimpleNamespace(apply=lambda layer, x, bias=None: x @ weight.T)


class DecoderLayerBase(nn.Module):
    """DFlash v1's layer as far as DFlash2 uses it: the four sublayers, as plain functions."""

    def __init__(self, vllm_config: Any, *, config: Any, layer_idx: int, **kwargs: Any) -> None:
        super().__init__()
        size = config.hidden_size
        self.attn_weight = nn.Parameter(torch.randn(size, size) / size**0.5)
        self.mlp_weight = nn.Parameter(torch.randn(size, size) / size**0.5)

    def input_layernorm(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> Any:
        return x * 0.5 if residual is None else (x * 0.5, x + residual)

    def post_attention_layernorm(self, x: torch.Tensor, residual: torch.Tensor) -> Any:
        return x * 0.25, x + residual

    def self_attn(self, *, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(hidden_states @ self.attn_weight)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x @ self.mlp_weight)


class ModelBase(nn.Module):
    """DFlash v1's inner model as far as DFlash2 uses it: the config, an embedding, and the
    layers built through the decoder_layer_cls hook (patch 0002)."""

    decoder_layer_cls: Any = DecoderLayerBase

    def __init__(self, *, vllm_config: Any, start_layer_id: int = 0, prefix: str = "") -> None:
        super().__init__()
        self.config = vllm_config.speculative_config.draft_model_config.hf_config
        self.embed_tokens = nn.Embedding(self.config.vocab_size, self.config.hidden_size)
        self.layers = nn.ModuleList(
            self.decoder_layer_cls(vllm_config, config=self.config, layer_idx=i, prefix="")
            for i in range(self.config.num_hidden_layers)
        )

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)


class CausalLMBase(nn.Module):
    """DFlash v1's wrapper as far as DFlash2 uses it: self.config, self.model built through the
    model_cls hook (patch 0002), and a one-shard lm_head."""

    model_cls: Any = ModelBase

    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        super().__init__()
        self.config = vllm_config.speculative_config.draft_model_config.hf_config
        self.model = self.model_cls(vllm_config=vllm_config, prefix="model")
        weight = torch.randn(self.config.vocab_size, self.config.hidden_size)
        self.lm_head = ShardedHead(weight, start=0, padding=0, tp_size=1)


class SpeculatorBase:
    """DFlashSpeculator's state as far as DFlash2Speculator reads it (0.26.0's layout)."""

    def __init__(self, vllm_config: Any, device: torch.device) -> None:
        spec = vllm_config.speculative_config
        self.draft_model_config = spec.draft_model_config
        self.max_num_reqs = vllm_config.max_num_reqs
        self.num_speculative_steps = spec.num_speculative_tokens
        self.num_query_per_req = 1 + self.num_speculative_steps
        rows = self.max_num_reqs * self.num_speculative_steps
        self.sample_indices = torch.zeros(rows, dtype=torch.int64)
        self.sample_pos = torch.zeros(rows, dtype=torch.int64)
        self.sample_idx_mapping = torch.full((rows,), -1, dtype=torch.int32)
        self.temperature = torch.zeros(self.max_num_reqs, dtype=torch.float32)
        self.seeds = torch.zeros(self.max_num_reqs, dtype=torch.int64)
        self.draft_tokens = torch.zeros(self.max_num_reqs, spec.num_speculative_tokens).long()
        self.use_fp64_gumbel = False
        self.draft_logits: torch.Tensor | None = None
        if spec.draft_sample_method == "probabilistic":
            vocab = self.draft_model_config.hf_config.vocab_size
            self.draft_logits = torch.zeros(self.max_num_reqs, self.num_speculative_steps, vocab)


class InterpreterLibdevice:
    """`tldevice` for the CPU interpreter, which has no libdevice (its log1p returns None): the
    one function the Gumbel code calls, computed by numpy."""

    @staticmethod
    def log1p(x: Any) -> Any:
        from triton.runtime.interpreter import TensorHandle

        return tl.tensor(TensorHandle(np.log1p(x.handle.data), x.handle.dtype), x.type)


def _stubs() -> dict[str, ModuleType]:
    mods = {name: _module(name) for name in PACKAGES}
    mods["vllm.triton_utils"] = _module(
        "vllm.triton_utils",
        HAS_TRITON=True,
        tl=tl,
        tldevice=InterpreterLibdevice,
        triton=triton,
    )
    mods["vllm.compilation.backends"] = _module(
        "vllm.compilation.backends", set_model_tag=lambda tag, **kw: contextlib.nullcontext()
    )
    mods["vllm.compilation.decorators"] = _module(
        "vllm.compilation.decorators", support_torch_compile=lambda cls: cls
    )
    mods["vllm.config"].__dict__.update(
        CacheConfig=object,
        VllmConfig=object,
        get_current_vllm_config=lambda: SimpleNamespace(model_config=None),
    )
    mods["vllm.config.compilation"] = _module(
        "vllm.config.compilation", CUDAGraphMode=SimpleNamespace(NONE=0)
    )
    mods["vllm.distributed"] = _module(
        "vllm.distributed",
        get_tensor_model_parallel_world_size=lambda: 1,
        tensor_model_parallel_all_gather=lambda x, dim=-1: x,
        tensor_model_parallel_gather=lambda x: x,
    )
    log = SimpleNamespace(info_once=lambda *a, **k: None, info=lambda *a, **k: None)
    mods["vllm.logger"] = _module("vllm.logger", init_logger=lambda name: log)
    mods["vllm.utils.flashinfer"] = _module("vllm.utils.flashinfer", has_flashinfer=lambda: False)
    layer = SimpleNamespace(register=lambda name: lambda cls: cls)
    mods["vllm.model_executor.custom_op"] = _module(
        "vllm.model_executor.custom_op",
        PluggableLayer=type("PluggableLayer", (nn.Module,), {"register": layer.register}),
    )
    mods["vllm.model_executor.layers.vocab_parallel_embedding"] = _module(
        "vllm.model_executor.layers.vocab_parallel_embedding",
        UnquantizedEmbeddingMethod=object,
        VocabParallelEmbedding=object,
    )
    mods["vllm.platforms"] = _module(
        "vllm.platforms",
        current_platform=SimpleNamespace(use_all_gather=lambda: True, is_cuda=lambda: False),
    )
    mods["vllm.model_executor.layers.linear"] = _module(
        "vllm.model_executor.layers.linear", ReplicatedLinear=ReplicatedLinear
    )
    mods["vllm.model_executor.layers.quantization.base_config"] = _module(
        "vllm.model_executor.layers.quantization.base_config", QuantizationConfig=object
    )
    mods["vllm.model_executor.models.utils"] = _module(
        "vllm.model_executor.models.utils",
        maybe_prefix=lambda prefix, name: f"{prefix}.{name}" if prefix else name,
    )
    mods["vllm.model_executor.models.qwen3_dflash"] = _module(
        "vllm.model_executor.models.qwen3_dflash",
        DFlashQwen3DecoderLayer=DecoderLayerBase,
        DFlashQwen3Model=ModelBase,
        DFlashQwen3ForCausalLM=CausalLMBase,
    )
    mods["vllm.v1.worker.gpu.spec_decode.dflash.speculator"] = _module(
        "vllm.v1.worker.gpu.spec_decode.dflash.speculator", DFlashSpeculator=SpeculatorBase
    )
    return mods


def interpreter_bool_masks() -> None:
    """Let Triton's CPU interpreter take a mask made by `bool_block & bool_scalar`.

    The interpreter of Triton 3.9.0 computes such a mask as int32 and then refuses it in
    tl.load/tl.store ("mask has unsupported dtype"); compiled Triton takes it. vLLM's
    kernels, 0.28.0's DFlash2 ones included, build masks that way."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store

    def as_bool(mask: Any) -> Any:
        return interpreter.TensorHandle(mask.data.astype(bool), mask.dtype)

    builder.create_masked_load = lambda self, ptrs, mask, *a: load(self, ptrs, as_bool(mask), *a)
    builder.create_masked_store = lambda self, ptrs, value, mask, *a: store(
        self, ptrs, value, as_bool(mask), *a
    )


@contextlib.contextmanager
def vllm_stubs() -> Iterator[None]:
    """sys.modules holds the stand-ins (and no real vllm) for the duration."""
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}
    for k in saved:
        del sys.modules[k]
    sys.modules.update(_stubs())
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def load(site: Path, relpath: str) -> ModuleType:
    """Execute site/relpath as its vllm module (inside vllm_stubs()). Its own vllm imports
    resolve to the stand-ins, or to the modules loaded before it (0.28.0's speculator takes the
    gumbel module loaded last)."""
    name = relpath.removesuffix(".py").replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, site / relpath)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
