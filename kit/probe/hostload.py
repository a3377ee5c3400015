"""Sampling how busy the host is while a benchmark measures: is the box quiet?

CPU figures on a shared machine are noisy; :class:`HostLoadSampler` says why.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kit.probe.background import BackgroundSampler
from kit.probe.models import HostLoad, ProcessCpu
from kit.probe.nvml import error_name, start_nvml
from kit.probe.procfs import (
    BUSY_FIELDS,
    CLOCK_TICKS,
    STAT_FIELDS,
    CpuTimes,
    ProcStat,
    read_cpu_times,
    read_loadavg,
    read_processes,
    read_uptime_s,
    tree_of,
)

log = logging.getLogger(__name__)

TOP_OTHER = 5


@dataclass
class _Reading:
    t: float  # monotonic seconds
    uptime_s: float | None
    cpu: CpuTimes | None
    processes: dict[int, ProcStat]
    ours: set[int]


@dataclass
class _Totals:
    """What the closed and the open window have added up so far."""

    window_s: float = 0.0
    windows: int = 0
    samples: int = 0
    stat: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAT_FIELDS, 0))
    cores: int | None = None
    own_ticks: int = 0
    other_ticks: dict[str, int] = field(default_factory=dict)
    loadavg_start: float | None = None
    loadavg_end: float | None = None
    foreign_gpu: int | None = None


class HostLoadSampler(BackgroundSampler):
    """A context manager that measures the host's CPU load inside the measured windows.

    It reads /proc only (Linux)::

        own = lambda: process_tree({os.getpid(), server.pid}) | process_group(server.pgid)
        with HostLoadSampler(own_pids=own, interval_s=0.5) as load:
            load.mark("idle")
            for prompt in prompts:          # one measured window per prompt; they are summed
                load.mark("measure_start")
                run(prompt)
                load.mark("measure_end")
            load.mark("post")
        host_load = load.host_load          # a HostLoad
        findings = host_load_findings(host_load)   # kit.probe.findings

    It has the ``mark(label)`` hook of :class:`~kit.probe.sampler.GpuSampler`, so both can hang
    on the bench's phase marks. Only ``measure_start`` and ``measure_end`` matter; other labels
    are accepted and ignored. Inside a window it reads, at each mark and every ``interval_s`` on
    a background thread:

    - the aggregate ``cpu`` line of /proc/stat: busy and steal shares of all CPUs;
    - /proc/loadavg (1 minute) at the first start and the last end;
    - every process's utime + stime from /proc/[pid]/stat. A process whose pid is in
      ``own_pids()`` (asked again at every reading, so late children count) is *ours*, any other
      is *other*, kernel threads included. Other processes' CPU is a share of the machine's
      capacity, cores × window; the five names that used most are kept, by ``comm`` only (never
      command lines).
    - where NVML works, the compute processes on each GPU whose pid is not ours.

    Limits: a process that starts and ends between two readings is not seen, and one that ends
    loses its time since the last reading (keep ``interval_s`` short for many short processes);
    /proc mounted with ``hidepid`` hides other users' processes. In a container, NVML may report
    host pids, which then look foreign unless ``own_pids`` includes them.

    Processes that vanish between listing and reading are skipped. Nothing here raises into the
    benchmark once the ``with`` block has started: what fails is logged and lands in
    ``HostLoad.error``, and the figures cover what was read before.
    """

    def __init__(
        self, own_pids: Callable[[], set[int]] | None = None, interval_s: float = 0.5
    ) -> None:
        """``own_pids`` gives the pids that are ours (default: this process and its children)."""
        super().__init__(interval_s)
        self._own_pids = own_pids  # None: this process's tree, from each reading's own listing
        self._totals = _Totals()
        self._open: _Reading | None = None  # the last reading of the window in progress
        self._opened_at = 0.0
        self._errors: list[str] = []
        self._nvml: Any = None
        self._gpu_handles: list[Any] = []
        self._gpu_unavailable: str | None = None
        self._host_load: HostLoad | None = None

    def __enter__(self) -> HostLoadSampler:
        self._active = True
        self._open_nvml()
        self._start_thread("kit-host-load-sampler")
        return self

    def _finish(self) -> None:
        with self._lock:
            if self._open is not None:
                self._guarded(self._close)
            self._active = False
            try:
                self._host_load = self._result()
            except Exception as exc:  # not even the summing may break the bench
                log.warning("host load could not be summed: %s", exc, exc_info=True)
                self._host_load = _failed(f"{type(exc).__name__}: {exc}")
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()

    def mark(self, label: str) -> None:
        """A phase boundary: ``measure_start`` opens a window, ``measure_end`` closes it."""
        if not self._active:
            raise RuntimeError("HostLoadSampler.mark() called outside its 'with' block")
        with self._lock:
            if label == "measure_start" and self._open is None:
                self._guarded(self._start)
            elif label == "measure_end" and self._open is not None:
                self._guarded(self._close)

    @property
    def host_load(self) -> HostLoad:
        """The result, once the ``with`` block has ended."""
        if self._host_load is None:
            raise RuntimeError("HostLoadSampler.host_load is ready only after the 'with' block")
        return self._host_load

    # -- readings (the caller holds the lock) --------------------------------------------------

    def _guarded(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as exc:  # never into the bench: the report says what broke
            log.warning("host load sampling failed: %s", exc, exc_info=True)
            self._error(f"{type(exc).__name__}: {exc}")

    def _error(self, message: str) -> None:
        if message not in self._errors:
            self._errors.append(message)

    def _read(self) -> _Reading:
        cpu = read_cpu_times()
        if cpu is None:
            self._error("/proc/stat could not be read")
        t = time.monotonic()
        uptime_s = read_uptime_s()  # before the listing: a process it misses started later
        processes = read_processes()
        ours = {os.getpid()}
        try:
            ours = tree_of(ours, processes) if self._own_pids is None else set(self._own_pids())
        except Exception as exc:
            self._error(f"own_pids() failed: {type(exc).__name__}: {exc}")
        reading = _Reading(t=t, uptime_s=uptime_s, cpu=cpu, processes=processes, ours=ours)
        self._count_gpu_processes(ours)
        self._totals.samples += 1
        return reading

    def _start(self) -> None:
        self._open = self._read()
        self._opened_at = self._open.t
        if self._totals.windows == 0:
            self._totals.loadavg_start = read_loadavg()
        self._totals.windows += 1

    def _close(self) -> None:
        try:
            self._sample()
        finally:  # a failed last reading still closes the window, at the reading before
            if self._open is not None:
                self._totals.window_s += self._open.t - self._opened_at
            self._totals.loadavg_end = read_loadavg()
            self._open = None

    def _sample(self) -> None:
        """A reading inside the open window, added to the totals."""
        before = self._open
        if before is None:
            return
        after = self._read()
        totals = self._totals
        if before.cpu is not None and after.cpu is not None:
            for key in STAT_FIELDS:
                totals.stat[key] += max(0, after.cpu.ticks[key] - before.cpu.ticks[key])
            totals.cores = after.cpu.cores
        for pid, now in after.processes.items():
            then = before.processes.get(pid)
            if then is not None and then.start_ticks == now.start_ticks:
                used = now.cpu_ticks - then.cpu_ticks
            elif _started_after(now, before.uptime_s):
                used = now.cpu_ticks  # a new process: all its time is inside the window
            else:
                used = 0  # there before, but not read then: its past time is unknown
            if used <= 0:
                continue
            if pid in after.ours or pid in before.ours:
                totals.own_ticks += used
            else:
                totals.other_ticks[now.comm] = totals.other_ticks.get(now.comm, 0) + used
        self._open = after

    def _tick(self) -> None:
        if self._open is not None:
            self._guarded(self._sample)

    # -- GPUs ----------------------------------------------------------------------------------

    def _open_nvml(self) -> None:
        pynvml, self._gpu_unavailable = start_nvml()
        if pynvml is None:
            return
        self._nvml = pynvml
        try:
            count = int(pynvml.nvmlDeviceGetCount())
            self._gpu_handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self._gpu_unavailable = f"NVML could not list the GPUs: {error_name(exc)}"
            self._gpu_handles = []
            return
        if not self._gpu_handles:
            self._gpu_unavailable = "NVML found no NVIDIA GPU"

    def _count_gpu_processes(self, ours: set[int]) -> None:
        if not self._gpu_handles or self._gpu_unavailable is not None:
            return
        foreign = 0
        for handle in self._gpu_handles:
            try:
                running = self._nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception as exc:
                self._gpu_unavailable = (
                    f"nvmlDeviceGetComputeRunningProcesses failed: {error_name(exc)}"
                )
                self._totals.foreign_gpu = None
                return
            foreign += sum(1 for p in running if int(getattr(p, "pid", -1)) not in ours)
        self._totals.foreign_gpu = max(foreign, self._totals.foreign_gpu or 0)

    # -- result --------------------------------------------------------------------------------

    def _result(self) -> HostLoad:
        totals = self._totals
        errors = list(self._errors)
        if totals.windows == 0:
            errors.insert(0, "no measured window: mark('measure_start') was never called")
        total = sum(totals.stat.values())
        cores = totals.cores
        capacity = (cores or 0) * totals.window_s * CLOCK_TICKS  # in ticks

        def share(ticks: int, of: float) -> float | None:
            return round(100 * ticks / of, 2) if of > 0 else None

        top = sorted(totals.other_ticks.items(), key=lambda item: (-item[1], item[0]))[:TOP_OTHER]
        gpu_why = self._gpu_unavailable
        if gpu_why is None and totals.windows == 0:
            gpu_why = "no measured window"
        return HostLoad(
            window_s=round(totals.window_s, 4),
            windows=totals.windows,
            samples=totals.samples,
            cores=cores,
            busy_pct=share(sum(totals.stat[k] for k in BUSY_FIELDS), total),
            steal_pct=share(totals.stat["steal"], total),
            own_cpu_pct=share(totals.own_ticks, capacity),
            other_cpu_pct=share(sum(totals.other_ticks.values()), capacity),
            loadavg_start=totals.loadavg_start,
            loadavg_end=totals.loadavg_end,
            top_other=[
                ProcessCpu(comm=comm, cpu_s=round(ticks / CLOCK_TICKS, 2)) for comm, ticks in top
            ],
            foreign_gpu_processes=totals.foreign_gpu if gpu_why is None else None,
            foreign_gpu_unavailable=gpu_why,
            error="; ".join(errors) or None,
        )


def _failed(error: str) -> HostLoad:
    return HostLoad(
        window_s=0.0,
        windows=0,
        samples=0,
        cores=None,
        busy_pct=None,
        steal_pct=None,
        own_cpu_pct=None,
        other_cpu_pct=None,
        loadavg_start=None,
        loadavg_end=None,
        top_other=[],
        foreign_gpu_processes=None,
        foreign_gpu_unavailable="not sampled",
        error=error,
    )


def _started_after(stat: ProcStat, uptime_s: float | None) -> bool:
    """The process started after the reading taken at ``uptime_s`` (seconds since boot)."""
    if uptime_s is None:
        return False
    return stat.start_ticks / CLOCK_TICKS >= uptime_s - 1 / CLOCK_TICKS
