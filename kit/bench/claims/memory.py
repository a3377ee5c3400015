"""What the soak reads of memory before and after each session: GPU memory per card (NVML), or
on a CPU the resident memory of the engine's processes (/proc, where kit started the server)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from kit.base import KitModel
from kit.probe import Unavailable
from kit.probe.nvml import as_mib, as_uint, call, error_name, read, start_nvml
from kit.probe.procfs import PROC

MIB = 1024 * 1024
ENGINE = "engine processes"

MemorySource = Literal["nvml", "rss"]


class MemoryReading(KitModel):
    """Memory in use on one device at one moment."""

    device: str = Field(description="'GPU <index>' (NVML), or 'engine processes' (their RSS).")
    used_mib: float = Field(description="In use, MiB: the card's (NVML), or the summed RSS.")


def gpu_memory() -> list[MemoryReading] | str:
    """Memory used on every card NVML sees, or why it cannot be read."""
    nvml, error = start_nvml()
    if nvml is None:
        return error or "NVML could not start"
    try:
        count = read(call(nvml, "nvmlDeviceGetCount"), as_uint)
        if isinstance(count, Unavailable) or count == 0:
            return "NVML found no NVIDIA GPU"
        out = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:  # an NVML error is an answer: the card cannot be read
                return f"GPU {index}: {error_name(exc)}"
            used = read(call(nvml, "nvmlDeviceGetMemoryInfo", handle), as_mib("used"))
            if isinstance(used, Unavailable):
                return f"GPU {index}: memory {used.reason}"
            out.append(MemoryReading(device=f"GPU {index}", used_mib=float(used)))
        return out
    finally:
        call(nvml, "nvmlShutdown")


def rss_mib(pids: set[int], proc: Path = PROC) -> float:
    """The summed resident memory of ``pids`` (statm's resident pages), MiB; a process gone
    meanwhile counts nothing."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        try:
            fields = (proc / str(pid) / "statm").read_text(encoding="ascii").split()
            total += int(fields[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total / MIB


def engine_memory(pids: set[int], proc: Path = PROC) -> list[MemoryReading] | str:
    """The resident memory of the engine's processes ``pids`` (kit.runtimes finds them)."""
    if not pids:
        return "no engine process under kit"
    return [MemoryReading(device=ENGINE, used_mib=round(rss_mib(pids, proc), 3))]


@dataclass(frozen=True)
class MemoryProbe:
    """How the soak reads memory here: the source and its reader, or why it cannot (each
    runtime's, kit.runtimes.Runtime.memory_probe)."""

    source: MemorySource | None
    read: Callable[[], list[MemoryReading] | str] | None
    note: str | None = None
