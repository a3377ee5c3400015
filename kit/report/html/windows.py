"""The measured windows on the GPU sampler's clock, named by the prompt or load point that ran in
each, with the energy and tokens of each and the clock events seen in them. Computed from what
the report holds (the sampler's marks and readings, the bench's records and points); nothing
here is stored in the report."""

from __future__ import annotations

from dataclasses import dataclass

from kit.probe import GpuSampling, Unavailable, window_energy
from kit.probe.findings import BENIGN_REASONS
from kit.report.schema import Report


@dataclass(frozen=True)
class Window:
    """One measured window: ``name`` (a prompt, a load point, or ``window N`` when the report's
    summaries do not match the marks one to one), its span in seconds since sampling started,
    and the tokens generated in it (None when not known)."""

    name: str
    start_s: float
    end_s: float
    tokens: int | None


def window_labels(report: Report, count: int) -> list[str]:
    """Names of the measured windows: the prompts, or the load points, when their count fits."""
    b = report.bench
    names = [p.label for p in b.load_points] if b and b.load_points else []
    if not names and b is not None:
        names = [p.prompt for p in b.prompts]
    return names if len(names) == count else [f"window {i + 1}" for i in range(count)]


def _tokens(report: Report, count: int) -> list[int | None]:
    """Tokens generated in each window: a load point's output tokens, or the completion tokens
    of a prompt's measured runs; None for all when the summaries do not match the windows."""
    b = report.bench
    if b is None:
        return [None] * count
    if b.load_points:
        found: list[int | None] = [p.output_tokens for p in b.load_points]
    else:
        found = [
            sum(
                r.completion_tokens or 0
                for r in b.records
                if r.phase == "measured" and r.prompt == p.prompt
            )
            for p in b.prompts
        ]
    return found if len(found) == count else [None] * count


def measured_windows(report: Report) -> list[Window]:
    """The windows between each ``measure_start`` and ``measure_end`` mark, in time order."""
    s = report.gpu_sampling
    if s is None:
        return []
    starts = [m.t_s for m in s.marks if m.label == "measure_start"]
    ends = [m.t_s for m in s.marks if m.label == "measure_end"]
    spans = list(zip(starts, ends, strict=False))
    names = window_labels(report, len(spans))
    tokens = _tokens(report, len(spans))
    return [Window(name, a, z, n) for (a, z), name, n in zip(spans, names, tokens, strict=True)]


def window_joules(sampling: GpuSampling, window: Window) -> float | Unavailable:
    """GPU energy of a window in joules: the sum over the sampled GPUs of each one's energy
    between its first and last reading inside the window (:func:`kit.probe.window_energy`: the
    energy counter's delta, else the trapezoid rule over power readings)."""
    total = 0.0
    for gpu in sampling.gpus:
        inside = [
            x
            for x in sampling.samples
            if x.gpu == gpu.index and window.start_s <= x.t_s <= window.end_s
        ]
        joules, _ = window_energy(inside)
        if isinstance(joules, Unavailable):
            return joules
        total += joules
    return total if sampling.gpus else Unavailable(reason="NoGpuSampled")


@dataclass(frozen=True)
class ClockEvent:
    """A clocks-event reason of one GPU seen in the measured windows: when it was first and last
    read (seconds since sampling started), in how many readings, and in which windows."""

    gpu: int
    reason: str
    first_s: float
    last_s: float
    readings: int
    windows: tuple[str, ...]
    first_window: Window


def clock_events(report: Report) -> list[ClockEvent]:
    """Every clocks-event reason that is not benign (an idle GPU, boost sync, a display
    setting), read inside a measured window, per GPU and reason, in order of first reading."""
    s = report.gpu_sampling
    if s is None:
        return []
    windows = measured_windows(report)
    seen: dict[tuple[int, str], list[tuple[float, Window]]] = {}
    for x in s.samples:
        if not isinstance(x.clock_event_reasons, list):
            continue
        where = next((w for w in windows if w.start_s <= x.t_s <= w.end_s), None)
        if where is None:
            continue
        for reason in x.clock_event_reasons:
            if reason not in BENIGN_REASONS:
                seen.setdefault((x.gpu, reason), []).append((x.t_s, where))
    events = [
        ClockEvent(
            gpu=gpu,
            reason=reason,
            first_s=hits[0][0],
            last_s=hits[-1][0],
            readings=len(hits),
            windows=tuple(dict.fromkeys(w.name for _, w in hits)),
            first_window=hits[0][1],
        )
        for (gpu, reason), hits in seen.items()
    ]
    return sorted(events, key=lambda e: (e.first_s, e.gpu, e.reason))
