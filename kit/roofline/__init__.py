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

- :mod:`kit.roofline.checkpoint`: :class:`ModelBytes`, a checkpoint's bytes by role.
- :mod:`kit.roofline.bandwidth`: :class:`Bandwidth`, measured or from the datasheet.
- :mod:`kit.roofline.bound`: :func:`roofline`, the bound and each prompt's efficiency.
"""

from __future__ import annotations

from kit.roofline.bandwidth import Bandwidth, GpuBandwidth, bandwidth_source, measure_bandwidth
from kit.roofline.bound import (
    BoundSetup,
    Deployment,
    PromptRoofline,
    Roofline,
    draft_passes,
    draft_step_bytes,
    prompt_bound,
    roofline,
    target_pass_bytes,
)
from kit.roofline.checkpoint import ModelBytes, TensorInfo, model_bytes, read_safetensors_header

__all__ = [
    "Bandwidth",
    "BoundSetup",
    "Deployment",
    "GpuBandwidth",
    "ModelBytes",
    "PromptRoofline",
    "Roofline",
    "TensorInfo",
    "bandwidth_source",
    "draft_passes",
    "draft_step_bytes",
    "measure_bandwidth",
    "model_bytes",
    "prompt_bound",
    "read_safetensors_header",
    "roofline",
    "target_pass_bytes",
]
