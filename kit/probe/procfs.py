"""Readers of /proc for the host-load sampler: processes, CPU times, load average, uptime.

Every reader is race-safe: a process that vanishes between listing and reading is skipped,
and an unreadable file gives None, never an exception.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# Fields of the /proc/stat cpu lines, in order (guest time is already inside user and nice).
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq")


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


CLOCK_TICKS = _clock_ticks()


@dataclass(frozen=True)
class ProcStat:
    """What kit reads of one /proc/[pid]/stat."""

    pid: int
    comm: str
    ppid: int
    pgrp: int
    cpu_ticks: int  # utime + stime, in clock ticks
    start_ticks: int  # start time after boot, in clock ticks


def read_process(pid: int, proc: Path = PROC) -> ProcStat | None:
    """One process's stat line; None when it is gone, unreadable or malformed."""
    try:
        text = (proc / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
    head, sep, tail = text.rpartition(")")
    if not sep:
        return None
    fields = tail.split()
    try:
        return ProcStat(
            pid=pid,
            comm=head.partition("(")[2],
            ppid=int(fields[1]),
            pgrp=int(fields[2]),
            cpu_ticks=int(fields[11]) + int(fields[12]),
            start_ticks=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def list_pids(proc: Path = PROC) -> list[int]:
    """The pids under /proc now (processes, not their threads)."""
    try:
        return [int(entry.name) for entry in proc.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def read_processes(proc: Path = PROC) -> dict[int, ProcStat]:
    """Every process that could be read, by pid."""
    found: dict[int, ProcStat] = {}
    for pid in list_pids(proc):
        stat = read_process(pid, proc)
        if stat is not None:
            found[pid] = stat
    return found


def process_tree(root_pids: Iterable[int], proc: Path = PROC) -> set[int]:
    """The given pids that are alive and all their descendants (PPid links of /proc/[pid]/stat)."""
    return tree_of(set(root_pids), read_processes(proc))


def tree_of(roots: set[int], processes: dict[int, ProcStat]) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in processes.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    tree: set[int] = set()
    todo = [pid for pid in roots if pid in processes]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return tree


def process_group(pgid: int, proc: Path = PROC) -> set[int]:
    """The pids of one process group (a server started in its own session leads one)."""
    return {stat.pid for stat in read_processes(proc).values() if stat.pgrp == pgid}


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate cpu line of /proc/stat, in clock ticks, and the online CPUs."""

    ticks: dict[str, int]
    cores: int


def read_cpu_times(proc: Path = PROC) -> CpuTimes | None:
    """The /proc/stat cpu counters; None when unreadable."""
    try:
        lines = (proc / "stat").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    ticks: dict[str, int] | None = None
    cores = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if name == "cpu":
            values = [int(v) for v in rest.split()]
            ticks = {
                key: (values[i] if i < len(values) else 0) for i, key in enumerate(STAT_FIELDS)
            }
        elif name.startswith("cpu") and name[3:].isdigit():
            cores += 1
    if ticks is None:
        return None
    return CpuTimes(ticks=ticks, cores=cores or os.cpu_count() or 1)


def read_loadavg(proc: Path = PROC) -> float | None:
    """The 1-minute load average; None when unreadable."""
    try:
        return float((proc / "loadavg").read_text(encoding="utf-8").split()[0])
    except (OSError, IndexError, ValueError):
        return None


def read_uptime_s(proc: Path = PROC) -> float | None:
    """Seconds since boot (the clock /proc/[pid]/stat start times count on)."""
    try:
        return float((proc / "uptime").read_text(encoding="utf-8").split()[0])
    except (OSError, IndexError, ValueError):
        return None
