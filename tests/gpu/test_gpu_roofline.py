"""On an NVIDIA GPU: the roofline's bandwidth measurement (skipped without one)."""

from __future__ import annotations

import shutil
import sys

import pytest

pytestmark = pytest.mark.gpu


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU and torch with CUDA")
def test_copy_bandwidth_is_plausible() -> None:
    from kit.roofline import measure_bandwidth

    gpus = measure_bandwidth(shutil.which("python3") or sys.executable)
    assert gpus
    for g in gpus:
        # read + written; an H200 moves ~4.3 TB/s, any current GPU more than 100 GB/s
        assert 100 < g.median_gbps <= g.max_gbps < 10_000
