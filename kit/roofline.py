"""Roofline: decode efficiency against the memory-bandwidth bound.

At batch size 1 a decoding step is bound by memory traffic: every weight the forward pass uses
is read once from device memory, and so is the KV cache of the context. The bound is the time
those bytes take at the GPU's bandwidth; efficiency is the measured decode TPS over the bound.

Bytes per target forward pass (one decode step), from the served checkpoint itself: config.json,
its ``quantization_config`` and the safetensors headers (actual tensor sizes, no weights read)::

    B_target = W_layers + W_lm_head + W_other + E_row * t + KV_token * c
    W_layers  = every tensor of the decoder layers: packed int4 ``qweight``, ``scales``,
                ``qzeros`` / ``g_idx``, and the unquantized ones (norms, biases)
    W_lm_head = the whole lm_head (every logit is computed); the embedding when tied
    W_other   = the rest (final norm, ...)
    E_row     = one embedding row per token processed (t tokens; the table is not read whole)
    KV_token  = 2 * layers * kv_heads * head_dim * kv_bytes (K and V, every layer)
    c         = the average context of a request: prompt_tokens + completion_tokens / 2

With speculative decoding a step is one target pass verifying 1 + k tokens (still one read of
the weights at these batch sizes) plus the draft's passes (a DFlash draft drafts the k tokens
in one pass; an autoregressive draft makes k), each reading the draft's tensors, its KV cache
and the lm_head it shares with the target::

    B_draft  = passes * (W_draft + W_lm_head_shared + KV_draft_token * c)
    T_step   = (B_target + B_draft) / BW
    bound    = L / T_step    with L = 1 + accepted / drafts (tokens per target pass)

Without speculative decoding ``bound = BW / B_target``; the report gives both (the plain
bound is what the same checkpoint could reach without a draft). With tensor parallelism n,
each GPU holds 1/n of every sharded tensor (linear layers, embedding, lm_head, KV heads) and a
whole copy of the replicated ones (1-D norms, a DFlash draft's ``fc``); the GPUs read in
parallel, so T_step uses the per-GPU bytes over the per-GPU bandwidth (n times the aggregate
bandwidth over about the same total bytes). Communication (all-reduce) is not in the bound.

BW is measured on the device before serving: a device-to-device copy of a 2 GiB buffer,
counting bytes read plus bytes written, median of 20 copies per GPU (CUDA events); the
smallest GPU's median is used. The vendor's datasheet figure is recorded beside it and used only
when no measurement is available.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kit.bench import BenchResult
from kit.errors import BadInputError
from kit.metrics import SpecDecode

log = logging.getLogger(__name__)

DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
TORCH_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float": 4, "half": 2}
QUANT_META = ("scales", "qzeros", "g_idx", "zeros", "scale")
COPY_BYTES = 2 << 30  # 2 GiB per buffer
COPY_ITERS = 20

FORMULA = (
    "bytes per target pass B = layer tensors (packed int4 qweight + scales + qzeros + "
    "unquantized norms) + lm_head + other + one embedding row per token + KV cache "
    "(2 x layers x kv_heads x head_dim x kv_bytes x c, c = prompt + completion/2); draft pass "
    "= draft tensors + shared lm_head + draft KV; per GPU with TP = sharded/n + replicated; "
    "bound TPS = L x BW / (B_target + B_draft), L = 1 + accepted/drafts; plain bound = "
    "BW / B_target; efficiency = measured decode TPS / bound TPS"
)


class TensorInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    dtype: str
    shape: list[int]
    nbytes: int


class ModelBytes(BaseModel):
    """What one checkpoint's tensors weigh, by role in a decode step (from safetensors headers)."""

    model_config = ConfigDict(extra="forbid")

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
        description="2 x layers x kv_heads x head_dim x kv_bytes: KV read per context token."
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


class GpuBandwidth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpu: int = Field(description="CUDA device index (as the measuring process saw it).")
    name: str = Field(description="Device name.")
    buffer_bytes: int = Field(description="Bytes per copied buffer.")
    copies: int = Field(description="Timed copies.")
    median_gbps: float = Field(description="Median over the copies, GB/s (read + written).")
    max_gbps: float = Field(description="Fastest copy, GB/s (read + written).")


class Bandwidth(BaseModel):
    """The memory bandwidth the bound uses, and where it comes from."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(description="How it was measured.")
    measured: list[GpuBandwidth] = Field(description="Per GPU; empty when not measured.")
    measure_error: str | None = Field(None, description="Why there is no measurement.")
    datasheet_gbps: float | None = Field(description="The vendor's per-GPU figure, GB/s.")
    used_gbps: float = Field(description="Per-GPU bandwidth the bound uses, GB/s.")
    used_source: Literal["measured", "datasheet"] = Field(description="Which of the two.")


class PromptRoofline(BaseModel):
    model_config = ConfigDict(extra="forbid")

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
    measured_decode_tps: float | None = Field(description="kit's mean decode TPS.")
    efficiency_pct: float | None = Field(description="measured / bound_tps, percent.")
    plain_efficiency_pct: float | None = Field(description="measured / plain_bound_tps, percent.")


class Roofline(BaseModel):
    """Decode efficiency against the memory-bandwidth bound (formula: kit/roofline.py)."""

    model_config = ConfigDict(extra="forbid")

    formula: str = Field(description="The formula, in one line.")
    tensor_parallel_size: int = Field(description="GPUs the model is sharded over.")
    spec_method: str = Field(description="Speculative decoding method ('none' without).")
    draft_passes_per_step: int = Field(description="Draft forward passes per step.")
    bandwidth: Bandwidth = Field(description="Bandwidth used, measured and datasheet figures.")
    target: ModelBytes = Field(description="The served (quantized) target's bytes.")
    draft: ModelBytes | None = Field(None, description="The draft's bytes.")
    prompts: list[PromptRoofline] = Field(description="Per prompt.")
    notes: list[str] = Field(default_factory=list, description="Caveats.")


# ---------------------------------------------------------------------------------------------
# checkpoint bytes


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
        * layers
        * kv_heads
        * head_dim
        * kv_element_bytes(config, kv_cache_dtype),
        quantization=quant,
    )


# ---------------------------------------------------------------------------------------------
# bandwidth

_BANDWIDTH_SCRIPT = r"""
import json, sys, torch
size, iters = int(sys.argv[1]), int(sys.argv[2])
out = []
for i in range(torch.cuda.device_count()):
    torch.cuda.set_device(i)
    src = [torch.empty(size, dtype=torch.uint8, device=i).random_(0, 255) for _ in range(2)]
    dst = [torch.empty(size, dtype=torch.uint8, device=i) for _ in range(2)]
    for k in range(5):
        dst[k % 2].copy_(src[k % 2])
    torch.cuda.synchronize(i)
    times = []
    for k in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); dst[k % 2].copy_(src[k % 2]); b.record(); b.synchronize()
        times.append(a.elapsed_time(b) / 1000.0)
    if not torch.equal(dst[0], src[0]):
        raise SystemExit("copy check failed")
    times.sort()
    med = times[len(times) // 2]
    out.append({"gpu": i, "name": torch.cuda.get_device_name(i), "buffer_bytes": size,
                "copies": iters, "median_gbps": 2 * size / med / 1e9,
                "max_gbps": 2 * size / times[0] / 1e9})
    del src, dst
    torch.cuda.empty_cache()
print(json.dumps(out))
"""

METHOD = (
    "device-to-device copy of a 2 GiB buffer (torch copy_, two buffer pairs alternated), "
    "bytes read + bytes written over CUDA-event time, median of 20 copies after 5 warm-ups"
)


def measure_bandwidth(
    python: str, pythonpath: str | None = None, timeout_s: float = 300
) -> list[GpuBandwidth]:
    """Copy bandwidth of every visible GPU, measured in a child interpreter that has torch
    (the engine's), so kit's own process holds no CUDA context while the server runs."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run(
        [python, "-c", _BANDWIDTH_SCRIPT, str(COPY_BYTES), str(COPY_ITERS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-300:] or f"exit {proc.returncode}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    if not data:
        raise RuntimeError("no CUDA device visible")
    return [GpuBandwidth.model_validate(d) for d in data]


def bandwidth_source(
    measured: list[GpuBandwidth], datasheet_gbps: float | None, error: str | None = None
) -> Bandwidth | None:
    """The bandwidth the bound uses: the slowest GPU's measured median, else the datasheet."""
    if measured:
        used = min(m.median_gbps for m in measured)
        return Bandwidth(
            method=METHOD,
            measured=measured,
            measure_error=None,
            datasheet_gbps=datasheet_gbps,
            used_gbps=used,
            used_source="measured",
        )
    if datasheet_gbps is None:
        return None
    return Bandwidth(
        method=METHOD,
        measured=[],
        measure_error=error,
        datasheet_gbps=datasheet_gbps,
        used_gbps=datasheet_gbps,
        used_source="datasheet",
    )


# ---------------------------------------------------------------------------------------------
# the bound


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


def prompt_bound(
    name: str,
    context: float,
    measured_tps: float | None,
    spec: SpecDecode | None,
    *,
    target: ModelBytes,
    draft: ModelBytes | None,
    passes: int,
    k: int,
    tp: int,
    bandwidth_gbps: float,
) -> PromptRoofline:
    bw = bandwidth_gbps * 1e9
    length = spec.acceptance_length if spec is not None else None
    verify_tokens = 1 + (k if length is not None else 0)
    b_target = target_pass_bytes(target, context, verify_tokens, tp)
    b_draft = draft_step_bytes(draft, target, passes, context, tp) if length is not None else 0.0
    step_s = (b_target + b_draft) / bw
    bound = (length or 1.0) / step_s
    plain = bw / target_pass_bytes(target, context, 1, tp)
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
    )


def mean_context(result: BenchResult, prompt: str) -> float | None:
    """Average context over the usable measured runs: prompt_tokens + completion_tokens / 2."""
    ctx = [
        (r.prompt_tokens or 0) + (r.completion_tokens or 0) / 2
        for r in result.records
        if r.prompt == prompt and r.phase == "measured" and r.usable
    ]
    return sum(ctx) / len(ctx) if ctx else None


def roofline(
    result: BenchResult,
    *,
    target_dir: Path,
    draft_dir: Path | None,
    spec_method: str,
    num_speculative_tokens: int,
    tensor_parallel_size: int,
    kv_cache_dtype: str,
    bandwidth: Bandwidth,
) -> Roofline:
    """The bound and the efficiency of each prompt of a bench result."""
    target = model_bytes(target_dir, "target", kv_cache_dtype)
    draft = model_bytes(draft_dir, "draft", kv_cache_dtype) if draft_dir is not None else None
    passes = draft_passes(spec_method, num_speculative_tokens)
    prompts = []
    for p in result.prompts:
        context = mean_context(result, p.prompt)
        if context is None:
            continue
        prompts.append(
            prompt_bound(
                p.prompt,
                context,
                p.decode_tps.mean,
                p.spec_decode,
                target=target,
                draft=draft,
                passes=passes,
                k=num_speculative_tokens,
                tp=tensor_parallel_size,
                bandwidth_gbps=bandwidth.used_gbps,
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
