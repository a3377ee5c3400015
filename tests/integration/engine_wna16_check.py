"""Run by the ENGINE's interpreter: vLLM CPU's INT4 linear paths against a plain reference.

Builds GPTQ-packed 4-bit layers with random weights (symmetric, and with zero points) the way
vLLM's AutoGPTQ loader does (``qweight``, ``scales`` and ``qzeros`` registered, the zero-point
name always passed), runs them through ``CPUWNA16LinearKernel`` on each path this CPU's kernel
build can run, chosen with VLLM_CPU_INT4_PATH (patch 0006): ``torch`` (patch 0003's fallback),
``w4a16`` (the compiled ``cpu_gemm_wna16``) and ``w4a8`` (``int4_scaled_mm_cpu``, int8
activations; forced also on a CPU without AMX where the op exists), plus ``auto`` (the path
vLLM itself picks here). Prints one JSON line per case with each path's largest error against
a reference written here from the format's definition: unpack the nibbles with shifts,
(q - 8) * scale or (q - zero) * scale in float32, round to bf16, matmul in float32. For W4A8
it also prints the bound that int8 activations allow: each activation may move by up to
max|x| / 127 (twice the rounding step of any 8-bit grid over [-max|x|, max|x|]), so an output
may move by that times the column's sum of |w|, plus the bf16 rounding of the output.

usage: python engine_wna16_check.py   (prints JSON lines; exit 0)
"""

from __future__ import annotations

import json
import os

import torch
from vllm.model_executor.kernels.linear.mixed_precision.cpu import (
    CPUWNA16LinearKernel,
    MPLinearLayerConfig,
)
from vllm.scalar_type import scalar_types


def _nibbles(words: torch.Tensor, dim: int) -> torch.Tensor:
    """Unpack int32 words, eight 4-bit values each (lowest bits first), along ``dim``."""
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    w = words.movedim(dim, -1).unsqueeze(-1)
    q = (w >> shifts) & 0xF
    return q.reshape(*q.shape[:-2], -1).movedim(-1, dim)


def _pack(q: torch.Tensor, dim: int) -> torch.Tensor:
    """The inverse of _nibbles: eight 4-bit values per int32 word along ``dim``."""
    q = q.movedim(dim, -1)
    q = q.reshape(*q.shape[:-1], -1, 8).to(torch.int64)
    words = torch.zeros(q.shape[:-1], dtype=torch.int64)
    for i in range(8):
        words |= q[..., i] << (4 * i)
    words = torch.where(words >= 2**31, words - 2**32, words)  # as int32 bit patterns
    return words.to(torch.int32).movedim(-1, dim)


def _param(t: torch.Tensor, **dims: int) -> torch.nn.Parameter:
    p = torch.nn.Parameter(t, requires_grad=False)
    for name, value in dims.items():
        setattr(p, name, value)
    return p


def _case(
    k: int, n: int, group: int, zero_points: bool, bias: bool, seed: int
) -> dict[str, object]:
    g = torch.Generator().manual_seed(seed)
    groups = k // group
    q = torch.randint(0, 16, (k, n), generator=g, dtype=torch.int32)
    scales = (torch.rand(groups, n, generator=g) * 0.02 + 0.001).to(torch.bfloat16)
    zeros = torch.randint(0, 16, (groups, n), generator=g, dtype=torch.int32)
    b = (torch.randn(n, generator=g) * 0.1).to(torch.bfloat16) if bias else None
    xs = {m: torch.randn(m, k, generator=g).to(torch.bfloat16) for m in (1, 7, 64)}

    zero = zeros.float() if zero_points else torch.full((groups, n), 8.0)
    ref_w = (
        (q.float() - zero.repeat_interleave(group, 0)) * scales.float().repeat_interleave(group, 0)
    ).to(torch.bfloat16)

    def layer() -> torch.nn.Module:
        # as AutoGPTQLinearMethod.create_weights: qzeros is registered for symmetric weights
        # too (the checkpoint's 8s), and the kernel drops it unless the config has zero points
        mod = torch.nn.Module()
        mod.qweight = _param(_pack(q, 0), input_dim=0, output_dim=1, packed_dim=0)
        mod.scales = _param(scales.clone(), input_dim=0, output_dim=1)
        stored = zeros if zero_points else torch.full((groups, n), 8, dtype=torch.int32)
        mod.qzeros = _param(_pack(stored, 1), input_dim=0, output_dim=1, packed_dim=1)
        mod.register_parameter("bias", _param(b.clone()) if b is not None else None)
        return mod

    cfg = MPLinearLayerConfig(
        full_weight_shape=(k, n),
        partition_weight_shape=(k, n),
        weight_type=scalar_types.uint4 if zero_points else scalar_types.uint4b8,
        act_type=torch.bfloat16,
        group_size=group,
        zero_points=zero_points,
    )
    has = {name: hasattr(torch.ops._C, name) for name in ("cpu_gemm_wna16", "int4_scaled_mm_cpu")}
    out: dict[str, object] = {
        "k": k, "n": n, "group": group, "zero_points": zero_points, "bias": bias,
        "compiled_available": has["cpu_gemm_wna16"],
        "w4a8_available": has["int4_scaled_mm_cpu"],
        "amx": bool(torch.cpu._is_amx_tile_supported()),
    }  # fmt: skip
    outputs: dict[str, dict[int, torch.Tensor]] = {}
    paths = ["torch"] + (["w4a16"] if has["cpu_gemm_wna16"] else [])
    paths += ["w4a8"] if has["int4_scaled_mm_cpu"] else []
    os.environ.pop("VLLM_CPU_WNA16_TORCH", None)
    os.environ.pop("VLLM_CPU_INT4_W4A8", None)
    for path in [*paths, "auto"]:
        os.environ["VLLM_CPU_INT4_PATH"] = path
        kernel = CPUWNA16LinearKernel(cfg, "qweight", "scales", "qzeros")
        mod = layer()
        kernel.process_weights_after_loading(mod)
        took = (
            "torch"
            if getattr(mod, "use_torch_wna16", False)
            else "w4a8"
            if getattr(mod, "use_w4a8", False)
            else "w4a16"
        )
        out[f"{path}_took"] = took
        if path == "auto":
            continue
        if path == "torch":
            out["torch_weight_matches_reference"] = bool(torch.equal(mod.wna16_weight.t(), ref_w))
            out["torch_weight_bytes"] = mod.wna16_weight.numel() * mod.wna16_weight.element_size()
            out["packed_weight_bytes_left"] = mod.qweight.numel() * mod.qweight.element_size()
        outputs[path] = {m: kernel.apply_weights(mod, x, mod.bias).float() for m, x in xs.items()}
    out["paths"] = paths
    col_abs = ref_w.float().abs().sum(0).max().item()  # the largest column sum of |w|
    for m, x in xs.items():
        ref = x.float() @ ref_w.float()
        if b is not None:
            ref = ref + b.float()
        scale = ref.abs().max().item()
        for path in paths:
            err = (outputs[path][m] - ref).abs().max().item()
            out[f"{path}_m{m}_max_rel_err"] = err / scale
        moved = x.float().abs().max().item() / 127 * col_abs
        out[f"w4a8_m{m}_bound_rel"] = moved / scale + 2**-7
        if "w4a16" in outputs:
            diff = (outputs["w4a16"][m] - outputs["torch"][m]).abs().max().item()
            out[f"torch_vs_w4a16_m{m}_max_rel_err"] = diff / scale
    return out


def main() -> None:
    cases = [
        (256, 512, 128, False, False, 0),
        (256, 512, 128, False, True, 1),
        (512, 256, 64, True, False, 2),
        (1024, 96 * 16, 128, False, False, 3),
    ]
    for case in cases:
        print(json.dumps(_case(*case)), flush=True)


if __name__ == "__main__":
    main()
