"""The memory bandwidth the bound uses: measured on the device, else the datasheet figure."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Literal

from pydantic import Field

from kit.base import KitModel
from kit.roofline.gpus import find_gpu

COPY_BYTES = 2 << 30  # 2 GiB per buffer
COPY_ITERS = 20


class GpuBandwidth(KitModel):
    gpu: int = Field(description="CUDA device index (as the measuring process saw it).")
    name: str = Field(description="Device name.")
    buffer_bytes: int = Field(description="Bytes per copied buffer.")
    copies: int = Field(description="Timed copies.")
    median_gbps: float = Field(description="Median over the copies, GB/s (read + written).")
    max_gbps: float = Field(description="Fastest copy, GB/s (read + written).")


class Bandwidth(KitModel):
    """The memory bandwidth the bound uses, and where it comes from."""

    method: str = Field(description="How it was measured.")
    measured: list[GpuBandwidth] = Field(description="Per GPU; empty when not measured.")
    measure_error: str | None = Field(None, description="Why there is no measurement.")
    datasheet_gbps: float | None = Field(
        description="The vendor's per-GPU figure, GB/s: the recipe's, else kit's table's for "
        "the measured GPU (kit.roofline.gpus)."
    )
    used_gbps: float = Field(description="Per-GPU bandwidth the bound uses, GB/s.")
    used_source: Literal["measured", "datasheet"] = Field(description="Which of the two.")


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
    """The bandwidth the bound uses: the slowest GPU's measured median, else the datasheet
    figure (the recipe's; without one, kit's table's for the measured GPU, kit.roofline.gpus)."""
    if measured and datasheet_gbps is None:
        known = find_gpu(min(measured, key=lambda m: m.median_gbps).name)
        datasheet_gbps = known.bandwidth_gbps if known is not None else None
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
