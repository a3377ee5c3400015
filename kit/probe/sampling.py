"""GPU sampling as recorded, and its summaries over the measured window.

:func:`build_sampling` turns readings and marks into a :class:`GpuSampling` with per-GPU
summaries; it works the same on a live sampler's readings (:mod:`kit.probe.sampler`) and on
a recorded sampling, which is how the verifier recomputes a report's figures.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from kit.base import FrozenModel
from kit.probe.models import Unavailable

EnergyMethod = Literal["energy_counter", "power_trapezoid"]


class Mark(FrozenModel):
    """A phase boundary recorded with GpuSampler.mark()."""

    label: str = Field(description="idle, measure_start, measure_end, post, or another label.")
    t_s: float = Field(description="Seconds since the sampler started.")


class SampledGpu(FrozenModel):
    """A GPU the sampler watched, with the static facts its summary compares against."""

    index: int = Field(description="NVML index.")
    name: str | Unavailable = Field(description="Product name.")
    pcie_gen_max: int | Unavailable = Field(description="Highest PCIe generation in this slot.")
    pcie_width_max: int | Unavailable = Field(description="Maximum PCIe link width.")


class GpuSample(FrozenModel):
    """One reading of one GPU."""

    gpu: int = Field(description="NVML index.")
    t_s: float = Field(description="Seconds since the sampler started.")
    mark: str | None = Field(description="The mark label this reading was taken for, if any.")
    memory_used_mib: int | Unavailable = Field(description="Memory in use, MiB.")
    power_w: float | Unavailable = Field(description="Power draw, W.")
    energy_mj: int | Unavailable = Field(description="Energy counter since driver load, mJ.")
    sm_clock_mhz: int | Unavailable = Field(description="SM clock, MHz.")
    pcie_gen: int | Unavailable = Field(description="Current PCIe generation.")
    pcie_width: int | Unavailable = Field(description="Current PCIe width.")
    temperature_c: int | Unavailable = Field(description="Temperature, °C.")
    clock_event_reasons: list[str] | Unavailable = Field(description="Active clocks-event reasons.")


class SamplingWindow(FrozenModel):
    """The measured window the summaries cover."""

    start_s: float = Field(description="Start, seconds since the sampler started.")
    end_s: float = Field(description="End, seconds since the sampler started.")
    source: Literal["marks", "whole_session"] = Field(
        description="From the measure_start/measure_end marks, or the whole session without them."
    )


class VramTriplet(FrozenModel):
    """Memory in use before, during and after the measured window, MiB."""

    idle_mib: int | Unavailable = Field(
        description="At the last 'idle' mark before the window, else the last reading before it."
    )
    peak_mib: int | Unavailable = Field(description="Highest reading inside the window.")
    post_mib: int | Unavailable = Field(
        description="At the last 'post' mark after the window, else the last reading after it."
    )
    growth_mib: int | Unavailable = Field(description="post - idle.")


class GpuSummary(FrozenModel):
    """One GPU over the measured window."""

    gpu: int = Field(description="NVML index.")
    samples_in_window: int = Field(description="Readings inside the window.")
    vram: VramTriplet = Field(description="Memory idle/peak/post.")
    pcie_gen_max: int | Unavailable = Field(description="Highest PCIe generation in this slot.")
    pcie_width_max: int | Unavailable = Field(description="Maximum PCIe width.")
    pcie_gen_min_under_load: int | Unavailable = Field(description="Lowest generation in window.")
    pcie_width_min_under_load: int | Unavailable = Field(description="Lowest width in window.")
    clock_event_reasons_seen: list[str] = Field(description="Every reason active in the window.")
    power_max_w: float | Unavailable = Field(description="Highest power draw in the window.")
    temperature_max_c: int | Unavailable = Field(description="Highest temperature in the window.")
    energy_j: float | Unavailable = Field(description="Energy over the window, J.")
    energy_method: EnergyMethod | None = Field(
        description="Counter delta (preferred) or trapezoid over the power readings."
    )


class GpuSampling(FrozenModel):
    """What GpuSampler recorded, and its per-GPU summaries."""

    started_at: str = Field(description="When sampling started (UTC, ISO 8601).")
    interval_s: float = Field(description="Seconds between background readings.")
    duration_s: float = Field(description="Seconds from start to stop.")
    unavailable: str | None = Field(description="Why there are no readings; None when there are.")
    gpus: list[SampledGpu] = Field(description="The GPUs watched.")
    marks: list[Mark] = Field(description="Phase boundaries in time order.")
    samples: list[GpuSample] = Field(description="Readings in time order.")
    window: SamplingWindow | None = Field(description="The measured window; None without readings.")
    summaries: list[GpuSummary] = Field(description="Per-GPU summaries over the window.")
    energy_j: float | Unavailable = Field(description="Energy of all GPUs over the window, J.")


# ---------------------------------------------------------------------------------------------
# summaries


@dataclass(frozen=True)
class Readings:
    """What a sampling session read, before any summary: when it started, its interval and
    duration, why there are no readings (None when there are), the GPUs, marks and samples."""

    started_at: str
    interval_s: float
    duration_s: float
    unavailable: str | None
    gpus: list[SampledGpu]
    marks: list[Mark]
    samples: list[GpuSample]


def build_sampling(readings: Readings) -> GpuSampling:
    """A GpuSampling with its window and per-GPU summaries computed from the readings."""
    gpus, unavailable = readings.gpus, readings.unavailable
    marks = sorted(readings.marks, key=lambda m: m.t_s)
    samples = sorted(readings.samples, key=lambda s: (s.t_s, s.gpu))
    window = _window(marks, samples)
    summaries = [] if window is None else [_summary(gpu, samples, window) for gpu in gpus]
    return GpuSampling(
        started_at=readings.started_at,
        interval_s=readings.interval_s,
        duration_s=readings.duration_s,
        unavailable=unavailable,
        gpus=gpus,
        marks=marks,
        samples=samples,
        window=window,
        summaries=summaries,
        energy_j=_total_energy(summaries, unavailable),
    )


def _window(marks: list[Mark], samples: list[GpuSample]) -> SamplingWindow | None:
    if not samples:
        return None
    starts = [m.t_s for m in marks if m.label == "measure_start"]
    if not starts:
        return SamplingWindow(start_s=samples[0].t_s, end_s=samples[-1].t_s, source="whole_session")
    # several measured windows (one per prompt) make one span: first start to last end
    ends = [m.t_s for m in marks if m.label == "measure_end" and m.t_s >= starts[0]]
    end = ends[-1] if ends else samples[-1].t_s
    return SamplingWindow(start_s=starts[0], end_s=end, source="marks")


def _ints(values: list[int | Unavailable]) -> list[int]:
    return [v for v in values if isinstance(v, int)]


def _floats(values: list[float | Unavailable]) -> list[float]:
    return [v for v in values if isinstance(v, float)]


def _missing(values: list[Any], empty: str) -> Unavailable:
    """The reason the readings gave, or ``empty`` when there were none."""
    for value in values:
        if isinstance(value, Unavailable):
            return value
    return Unavailable(reason=empty)


def _summary(gpu: SampledGpu, samples: list[GpuSample], window: SamplingWindow) -> GpuSummary:
    mine = [s for s in samples if s.gpu == gpu.index]
    inside = [s for s in mine if window.start_s <= s.t_s <= window.end_s]
    before = [s for s in mine if s.t_s <= window.start_s]
    after = [s for s in mine if s.t_s >= window.end_s]
    idle_at = [s for s in before if s.mark == "idle"] or before
    post_at = [s for s in after if s.mark == "post"] or after

    idle = idle_at[-1].memory_used_mib if idle_at else Unavailable(reason="NoSampleBeforeWindow")
    post = post_at[-1].memory_used_mib if post_at else Unavailable(reason="NoSampleAfterWindow")
    growth: int | Unavailable
    if isinstance(idle, Unavailable):
        growth = idle
    elif isinstance(post, Unavailable):
        growth = post
    else:
        growth = post - idle

    energy, method = window_energy(inside)
    return GpuSummary(
        gpu=gpu.index,
        samples_in_window=len(inside),
        vram=VramTriplet(
            idle_mib=idle,
            peak_mib=_max_int([s.memory_used_mib for s in inside]),
            post_mib=post,
            growth_mib=growth,
        ),
        pcie_gen_max=gpu.pcie_gen_max,
        pcie_width_max=gpu.pcie_width_max,
        pcie_gen_min_under_load=_min_or([s.pcie_gen for s in inside]),
        pcie_width_min_under_load=_min_or([s.pcie_width for s in inside]),
        clock_event_reasons_seen=sorted(
            {
                r
                for s in inside
                if isinstance(s.clock_event_reasons, list)
                for r in s.clock_event_reasons
            }
        ),
        power_max_w=_max_float([s.power_w for s in inside]),
        temperature_max_c=_max_int([s.temperature_c for s in inside]),
        energy_j=energy,
        energy_method=method,
    )


def _max_int(values: list[int | Unavailable]) -> int | Unavailable:
    numbers = _ints(values)
    return max(numbers) if numbers else _missing(values, "NoSampleInWindow")


def _min_or(values: list[int | Unavailable]) -> int | Unavailable:
    numbers = _ints(values)
    return min(numbers) if numbers else _missing(values, "NoSampleInWindow")


def _max_float(values: list[float | Unavailable]) -> float | Unavailable:
    numbers = _floats(values)
    return max(numbers) if numbers else _missing(values, "NoSampleInWindow")


def window_energy(inside: list[GpuSample]) -> tuple[float | Unavailable, EnergyMethod | None]:
    """Energy in joules over readings of one GPU, in time order, and how it was computed.

    The energy counter's delta between the first and last reading is preferred; without it, the
    trapezoid rule over the power readings (readings without power are skipped).
    """
    if len(inside) < 2:
        return Unavailable(reason="FewerThanTwoSamples"), None
    first, last = inside[0], inside[-1]
    if (
        isinstance(first.energy_mj, int)
        and isinstance(last.energy_mj, int)
        and last.energy_mj >= first.energy_mj
    ):
        return round((last.energy_mj - first.energy_mj) / 1000, 3), "energy_counter"
    powered = [(s.t_s, s.power_w) for s in inside if isinstance(s.power_w, float)]
    if len(powered) < 2:
        return _missing([s.power_w for s in inside], "FewerThanTwoSamples"), None
    joules = sum((p0 + p1) / 2 * (t1 - t0) for (t0, p0), (t1, p1) in itertools.pairwise(powered))
    return round(joules, 3), "power_trapezoid"


def _total_energy(summaries: list[GpuSummary], unavailable: str | None) -> float | Unavailable:
    if not summaries:
        return Unavailable(reason=unavailable or "NoSamples")
    total = 0.0
    for summary in summaries:
        if isinstance(summary.energy_j, Unavailable):
            return summary.energy_j
        total += summary.energy_j
    return round(total, 3)


def energy_per_token_j(sampling: GpuSampling, generated_tokens: int) -> float | Unavailable:
    """Joules of all sampled GPUs over the measured window per generated token."""
    if isinstance(sampling.energy_j, Unavailable):
        return sampling.energy_j
    if generated_tokens <= 0:
        return Unavailable(reason="NoTokens")
    return sampling.energy_j / generated_tokens
