"""Sampling GPU memory, power, clocks, PCIe link and throttling while a benchmark runs
(:class:`GpuSampler`); summaries are computed by :func:`kit.probe.sampling.build_sampling`,
which works the same on a recorded sampling.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kit.probe.background import BackgroundSampler
from kit.probe.dump import utc_now
from kit.probe.models import Unavailable
from kit.probe.nvml import (
    Raw,
    as_mib,
    as_reasons,
    as_str,
    as_uint,
    as_watts,
    call,
    constant,
    error_name,
    read,
    start_nvml,
)
from kit.probe.sampling import (
    GpuSample,
    GpuSampling,
    Mark,
    Readings,
    SampledGpu,
    build_sampling,
)

log = logging.getLogger(__name__)


class GpuSampler(BackgroundSampler):
    """A context manager that samples every GPU on a background thread::

        with GpuSampler(interval_s=0.5) as sampler:
            sampler.mark("idle")
            sampler.mark("measure_start")
            run_the_benchmark()
            sampler.mark("measure_end")
            sampler.mark("post")
        sampling = sampler.sampling

    The thread reads every GPU each ``interval_s``; ``mark()`` also reads every GPU at once,
    so the window's edges are readings."""

    def __init__(self, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self._nvml: Any = None
        self._handles: list[tuple[int, Any]] = []
        self._gpus: list[SampledGpu] = []
        self._samples: list[GpuSample] = []
        self._marks: list[Mark] = []
        self._unavailable: str | None = None
        self._t0 = 0.0
        self._started_at = ""
        self._sampling: GpuSampling | None = None

    def __enter__(self) -> GpuSampler:
        self._t0 = time.monotonic()
        self._started_at = utc_now()
        self._active = True
        self._open_nvml()
        if self._handles:
            with self._lock:
                self._read_all(mark=None)
            self._start_thread("kit-gpu-sampler")
        return self

    def _finish(self) -> None:
        with self._lock:
            if self._handles:
                self._read_all(mark=None)
            duration = time.monotonic() - self._t0
            self._active = False
        if self._nvml is not None:
            call(self._nvml, "nvmlShutdown")
        self._sampling = build_sampling(
            Readings(
                started_at=self._started_at,
                interval_s=self.interval_s,
                duration_s=round(duration, 4),
                unavailable=self._unavailable,
                gpus=self._gpus,
                marks=self._marks,
                samples=self._samples,
            )
        )

    def mark(self, label: str) -> None:
        """Record a phase boundary and read every GPU at that moment."""
        if not self._active:
            raise RuntimeError("GpuSampler.mark() called outside its 'with' block")
        with self._lock:
            t_s = self._now()
            self._marks.append(Mark(label=label, t_s=t_s))
            if self._handles:
                self._read_all(mark=label, t_s=t_s)

    @property
    def sampling(self) -> GpuSampling:
        """The result, once the ``with`` block has ended."""
        if self._sampling is None:
            raise RuntimeError("GpuSampler.sampling is ready only after the 'with' block")
        return self._sampling

    def _now(self) -> float:
        return round(time.monotonic() - self._t0, 4)

    def _open_nvml(self) -> None:
        pynvml, self._unavailable = start_nvml()
        if pynvml is None:
            return
        self._nvml = pynvml
        count = read(call(pynvml, "nvmlDeviceGetCount"), as_uint)
        if isinstance(count, Unavailable) or count == 0:
            self._unavailable = "NVML found no NVIDIA GPU"
            return
        for index in range(count):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:
                log.warning("GPU %d cannot be sampled: %s", index, error_name(exc))
                continue
            self._handles.append((index, handle))
            self._gpus.append(
                SampledGpu(
                    index=index,
                    name=read(call(pynvml, "nvmlDeviceGetName", handle), as_str),
                    pcie_gen_max=read(
                        call(pynvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle), as_uint
                    ),
                    pcie_width_max=read(
                        call(pynvml, "nvmlDeviceGetMaxPcieLinkWidth", handle), as_uint
                    ),
                )
            )
        if not self._handles:
            self._unavailable = "no GPU handle could be opened"

    def _tick(self) -> None:
        self._read_all(mark=None)

    def _read_all(self, mark: str | None, t_s: float | None = None) -> None:
        """Read every GPU; the caller holds the lock. Mark readings share the mark's time."""
        for index, handle in self._handles:
            raw = read_sample_raw(self._nvml, handle)
            self._samples.append(
                sample_from_raw(index, self._now() if t_s is None else t_s, mark, raw)
            )


def read_sample_raw(nvml: Any, handle: Any) -> dict[str, Raw]:
    """One reading of a GPU as raw results."""
    sm = constant(nvml, "NVML_CLOCK_SM", 1)
    gpu_sensor = constant(nvml, "NVML_TEMPERATURE_GPU", 0)
    raw = {
        "nvmlDeviceGetMemoryInfo": call(nvml, "nvmlDeviceGetMemoryInfo", handle),
        "nvmlDeviceGetPowerUsage": call(nvml, "nvmlDeviceGetPowerUsage", handle),
        "nvmlDeviceGetTotalEnergyConsumption": call(
            nvml, "nvmlDeviceGetTotalEnergyConsumption", handle
        ),
        "nvmlDeviceGetClockInfo(SM)": call(nvml, "nvmlDeviceGetClockInfo", handle, sm),
        "nvmlDeviceGetCurrPcieLinkGeneration": call(
            nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle
        ),
        "nvmlDeviceGetCurrPcieLinkWidth": call(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
        "nvmlDeviceGetTemperature(GPU)": call(nvml, "nvmlDeviceGetTemperature", handle, gpu_sensor),
        "nvmlDeviceGetCurrentClocksEventReasons": call(
            nvml, "nvmlDeviceGetCurrentClocksEventReasons", handle
        ),
    }
    return raw


def sample_from_raw(gpu: int, t_s: float, mark: str | None, raw: dict[str, Raw]) -> GpuSample:
    """A GpuSample from one raw reading."""
    return GpuSample(
        gpu=gpu,
        t_s=t_s,
        mark=mark,
        memory_used_mib=read(raw.get("nvmlDeviceGetMemoryInfo"), as_mib("used")),
        power_w=read(raw.get("nvmlDeviceGetPowerUsage"), as_watts),
        energy_mj=read(raw.get("nvmlDeviceGetTotalEnergyConsumption"), int),
        sm_clock_mhz=read(raw.get("nvmlDeviceGetClockInfo(SM)"), as_uint),
        pcie_gen=read(raw.get("nvmlDeviceGetCurrPcieLinkGeneration"), as_uint),
        pcie_width=read(raw.get("nvmlDeviceGetCurrPcieLinkWidth"), as_uint),
        temperature_c=read(raw.get("nvmlDeviceGetTemperature(GPU)"), as_uint),
        clock_event_reasons=read(raw.get("nvmlDeviceGetCurrentClocksEventReasons"), as_reasons),
    )
