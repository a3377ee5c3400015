"""Sampling GPU memory, power, clocks, PCIe link and throttling while a benchmark runs.

    with GpuSampler(interval_s=0.5) as sampler:
        sampler.mark("idle")
        sampler.mark("measure_start")
        run_the_benchmark()
        sampler.mark("measure_end")
        sampler.mark("post")
    sampling = sampler.sampling

A background thread reads every GPU each ``interval_s``; ``mark()`` also reads every GPU at once,
so the window's edges are readings. Summaries are computed by :func:`build_sampling`, which
works the same on a recorded sampling.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from types import TracebackType
from typing import Any, Literal

from kit.errors import BadInputError
from kit.probe.dump import utc_now
from kit.probe.models import (
    GpuSample,
    GpuSampling,
    GpuSummary,
    Mark,
    SampledGpu,
    SamplingWindow,
    Unavailable,
    VramTriplet,
)
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
)

log = logging.getLogger(__name__)

EnergyMethod = Literal["energy_counter", "power_trapezoid"]


class GpuSampler:
    """A context manager that samples every GPU on a background thread."""

    def __init__(self, interval_s: float = 0.5) -> None:
        if interval_s <= 0:
            raise BadInputError(
                f"sampling interval must be positive, not {interval_s}", hint="try 0.5"
            )
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handles: list[tuple[int, Any]] = []
        self._gpus: list[SampledGpu] = []
        self._samples: list[GpuSample] = []
        self._marks: list[Mark] = []
        self._unavailable: str | None = None
        self._t0 = 0.0
        self._started_at = ""
        self._active = False
        self._sampling: GpuSampling | None = None

    def __enter__(self) -> GpuSampler:
        self._t0 = time.monotonic()
        self._started_at = utc_now()
        self._active = True
        self._open_nvml()
        if self._handles:
            with self._lock:
                self._read_all(mark=None)
            self._thread = threading.Thread(target=self._loop, name="kit-gpu-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._handles:
                self._read_all(mark=None)
            duration = time.monotonic() - self._t0
            self._active = False
        if self._nvml is not None:
            call(self._nvml, "nvmlShutdown")
        self._sampling = build_sampling(
            started_at=self._started_at,
            interval_s=self.interval_s,
            duration_s=round(duration, 4),
            unavailable=self._unavailable,
            gpus=self._gpus,
            marks=self._marks,
            samples=self._samples,
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
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:
            self._unavailable = f"NVML could not start: {error_name(exc)}"
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

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
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


# ---------------------------------------------------------------------------------------------
# summaries


def build_sampling(
    *,
    started_at: str,
    interval_s: float,
    duration_s: float,
    unavailable: str | None,
    gpus: list[SampledGpu],
    marks: list[Mark],
    samples: list[GpuSample],
) -> GpuSampling:
    """A GpuSampling with its window and per-GPU summaries computed from the readings."""
    marks = sorted(marks, key=lambda m: m.t_s)
    samples = sorted(samples, key=lambda s: (s.t_s, s.gpu))
    window = _window(marks, samples)
    summaries = [] if window is None else [_summary(gpu, samples, window) for gpu in gpus]
    return GpuSampling(
        started_at=started_at,
        interval_s=interval_s,
        duration_s=duration_s,
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
