"""Known GPUs' datasheet memory bandwidth, each with the vendor document it comes from.

The one table kit has of them: the roofline's datasheet figure beside a measurement
(:mod:`kit.roofline.bandwidth`) and the bound on a published reference's rig
(:mod:`kit.roofline.plausible`) both read it. docs/roofline.md lists it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model: its ``name``, the ``aliases`` it goes by (NVML names, a rig's words), its
    datasheet memory ``bandwidth_gbps`` (GB/s, 10^9 bytes, per GPU), ``memory_gb`` and the
    ``source`` of the bandwidth figure."""

    name: str
    aliases: tuple[str, ...]
    bandwidth_gbps: float
    memory_gb: float
    source: str


_A100 = (
    "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_H100 = (
    "NVIDIA H100 Tensor Core GPU datasheet, "
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
)

GPUS: tuple[GpuSpec, ...] = (
    GpuSpec(
        "RTX 3090",
        ("rtx 3090", "geforce rtx 3090", "3090"),
        936.0,
        24,
        "NVIDIA Ampere GA102 GPU Architecture whitepaper, GeForce RTX 3090 column (19.5 Gbps "
        "GDDR6X on a 384-bit bus), https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-"
        "architecture-whitepaper-v2.pdf",
    ),
    GpuSpec(
        "RTX 3090 Ti",
        ("rtx 3090 ti", "geforce rtx 3090 ti", "3090 ti"),
        1008.0,
        24,
        "NVIDIA GeForce RTX 3090 Ti specifications (21 Gbps GDDR6X on a 384-bit bus), "
        "https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/rtx-3090-3090ti/",
    ),
    GpuSpec(
        "RTX 4090",
        ("rtx 4090", "geforce rtx 4090", "4090"),
        1008.0,
        24,
        "NVIDIA Ada GPU Architecture whitepaper, GeForce RTX 4090 column (21 Gbps GDDR6X on a "
        "384-bit bus), https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-"
        "architecture.pdf",
    ),
    GpuSpec(
        "RTX A6000",
        ("rtx a6000", "a6000"),
        768.0,
        48,
        "NVIDIA RTX A6000 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/"
        "design-visualization/quadro-product-literature/proviz-print-nvidia-rtx-a6000-datasheet"
        "-us-nvidia-1454980-r9-web.pdf",
    ),
    GpuSpec(
        "RTX 6000 Ada",
        ("rtx 6000 ada", "rtx 6000 ada generation"),
        960.0,
        48,
        "NVIDIA RTX 6000 Ada Generation datasheet, "
        "https://www.nvidia.com/en-us/design-visualization/rtx-6000/",
    ),
    GpuSpec(
        "A10",
        ("a10",),
        600.0,
        24,
        "NVIDIA A10 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/"
        "products/a10-gpu/",
    ),
    GpuSpec(
        "A10G",
        ("a10g",),
        600.0,
        24,
        "AWS's variant of the A10 (EC2 G5 instances, https://aws.amazon.com/ec2/instance-types/"
        "g5/); NVIDIA publishes no A10G datasheet: the figure is the A10 datasheet's, for the "
        "same 24 GB of GDDR6",
    ),
    GpuSpec(
        "L4",
        ("l4",),
        300.0,
        24,
        "NVIDIA L4 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/l4/",
    ),
    GpuSpec(
        "L40",
        ("l40",),
        864.0,
        48,
        "NVIDIA L40 GPU datasheet, https://www.nvidia.com/en-us/data-center/l40/",
    ),
    GpuSpec(
        "L40S",
        ("l40s",),
        864.0,
        48,
        "NVIDIA L40S GPU datasheet, https://www.nvidia.com/en-us/data-center/l40s/",
    ),
    GpuSpec("T4", ("t4", "tesla t4"), 320.0, 16, "NVIDIA T4 Tensor Core GPU datasheet"),
    GpuSpec(
        "V100",
        ("v100", "tesla v100", "v100 sxm2", "v100 pcie"),
        900.0,
        32,
        "NVIDIA V100 Tensor Core GPU datasheet (900 GB/s for PCIe and SXM2, 16 and 32 GB)",
    ),
    GpuSpec(
        "A100 40GB",
        ("a100 40gb", "a100 sxm4 40gb", "a100 pcie 40gb", "a100 40gb pcie", "a100 40gb sxm"),
        1555.0,
        40,
        _A100 + " (40GB PCIe and SXM: 1,555 GB/s)",
    ),
    GpuSpec(
        "A100 80GB PCIe",
        ("a100 80gb pcie", "a100 pcie 80gb"),
        1935.0,
        80,
        _A100 + " (80GB PCIe: 1,935 GB/s)",
    ),
    GpuSpec(
        "A100 80GB SXM",
        ("a100 80gb sxm", "a100 sxm4 80gb", "a100 sxm 80gb"),
        2039.0,
        80,
        _A100 + " (80GB SXM: 2,039 GB/s)",
    ),
    GpuSpec(
        "H100 SXM",
        ("h100 sxm", "h100 sxm5", "h100 80gb hbm3", "h100 sxm 80gb"),
        3350.0,
        80,
        _H100 + " (H100 SXM: 3.35 TB/s)",
    ),
    GpuSpec(
        "H100 PCIe",
        ("h100 pcie", "h100 pcie 80gb"),
        2000.0,
        80,
        _H100 + " (H100 PCIe: 2 TB/s); NVIDIA H100 PCIe GPU product brief PB-11133-001",
    ),
    GpuSpec("H100 NVL", ("h100 nvl",), 3900.0, 94, _H100 + " (H100 NVL: 3.9 TB/s)"),
    GpuSpec(
        "H200",
        ("h200", "h200 sxm", "h200 nvl", "h200 141gb"),
        4800.0,
        141,
        "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM and H200 NVL: 4.8 TB/s), "
        "https://www.nvidia.com/en-us/data-center/h200/",
    ),
    GpuSpec(
        "MI300X",
        ("mi300x", "instinct mi300x", "amd instinct mi300x"),
        5300.0,
        192,
        "AMD Instinct MI300X accelerator data sheet, "
        "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
    ),
)

_VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla|amd|radeon|instinct|generation)\b")
_COUNT = re.compile(r"^\s*(\d+)\s*[x×]\s*", re.IGNORECASE)


def _normal(text: str) -> str:
    """Lower case, words only: 'NVIDIA A100-SXM4-80GB' -> 'a100 sxm4 80gb'."""
    words = re.sub(r"[^a-z0-9]+", " ", text.lower())
    return " ".join(_VENDOR_WORDS.sub(" ", words).split())


def find_gpu(text: str) -> GpuSpec | None:
    """The GPU a name or a rig's description names (``NVIDIA GeForce RTX 3090``, ``2x RTX 3090
    (24 GB), PCIe Gen4``): the entry whose longest alias appears in it as whole words."""
    words = f" {_normal(text)} "
    best: tuple[int, GpuSpec] | None = None
    for gpu in GPUS:
        for alias in gpu.aliases:
            key = _normal(alias)
            if f" {key} " in words and (best is None or len(key) > best[0]):
                best = (len(key), gpu)
    return best[1] if best is not None else None


def rig_gpus(rig: str) -> tuple[int | None, str]:
    """A published rig's GPU count and GPU words: ``2x RTX 3090 (24 GB), PCIe ...`` ->
    ``(2, 'RTX 3090')``; no leading count: ``(None, <the text before a comma or bracket>)``."""
    m = _COUNT.match(rig)
    count = int(m.group(1)) if m else None
    rest = rig[m.end() :] if m else rig
    return count, re.split(r"[,(;]", rest, maxsplit=1)[0].strip()


def known_names() -> str:
    return ", ".join(g.name for g in GPUS)
