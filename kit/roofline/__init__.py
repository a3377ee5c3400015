"""Roofline: decode efficiency against the memory-bandwidth bound (docs/roofline.md has the
formula and every term): :class:`ModelBytes`, a checkpoint's bytes by role, read or estimated
(:mod:`kit.roofline.checkpoint`, :mod:`kit.roofline.estimate`); :class:`Bandwidth`, measured or
from the datasheet (:mod:`kit.roofline.gpus`); :func:`roofline`, the bound and each prompt's
efficiency; a published figure against the bound on its own rig (:mod:`kit.roofline.plausible`).
"""

from __future__ import annotations

from kit.roofline.bandwidth import Bandwidth, GpuBandwidth, bandwidth_source, measure_bandwidth
from kit.roofline.bound import (
    BoundSetup,
    Deployment,
    PromptRoofline,
    Roofline,
    bound_at,
    draft_passes,
    draft_step_bytes,
    prompt_bound,
    roofline,
    target_pass_bytes,
)
from kit.roofline.checkpoint import ModelBytes, TensorInfo, model_bytes, read_safetensors_header
from kit.roofline.estimate import Quant, config_bytes
from kit.roofline.gpus import GPUS, GpuSpec, find_gpu
from kit.roofline.plausible import Plausibility, PromptPlausibility, RigBandwidth

__all__ = [
    "GPUS",
    "Bandwidth",
    "BoundSetup",
    "Deployment",
    "GpuBandwidth",
    "GpuSpec",
    "ModelBytes",
    "Plausibility",
    "PromptPlausibility",
    "PromptRoofline",
    "Quant",
    "RigBandwidth",
    "Roofline",
    "TensorInfo",
    "bandwidth_source",
    "bound_at",
    "config_bytes",
    "draft_passes",
    "draft_step_bytes",
    "find_gpu",
    "measure_bandwidth",
    "model_bytes",
    "prompt_bound",
    "read_safetensors_header",
    "roofline",
    "target_pass_bytes",
]
