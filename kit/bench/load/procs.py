"""A load point sent from several client processes (``bench.load.processes``).

Each process runs the same asyncio client (:mod:`kit.bench.aio`) on its share of the point
(:class:`kit.bench.load.send.Share`); the records merge as if one client sent them
(:func:`run_in_processes`).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from kit.bench.load.send import PointJob, Share, cpu_pct, send_point
from kit.bench.stream import BenchAborted, RequestRecord

READY_TIMEOUT_S = 120.0  # a process's start (imports) before the point
START_DELAY_S = 0.2  # the common start of a rate point's arrivals, after the go


@dataclass(frozen=True)
class _Sync:
    """What the client processes of one point share: the next request index (``counter``), the
    go (``go``) and the common start of a rate point's arrivals (``start``, perf_counter)."""

    counter: Any
    go: Any
    start: Any


def _child(conn: Connection, k: int, of: int, sync: _Sync, job: PointJob) -> None:
    counter = sync.counter

    def take() -> int | None:
        with counter.get_lock():
            i = int(counter.value)
            if i >= job.count:
                return None
            counter.value = i + 1
            return i

    try:
        conn.send(("ready", None, 0.0))
        sync.go.wait()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        share = Share(k=k, of=of, take=take, start=float(sync.start.value))
        records = asyncio.run(send_point(job, share=share))
        conn.send(("ok", [r.model_dump_json() for r in records], cpu_pct(cpu0, wall0)))
    except BaseException as exc:  # the parent says what failed; nothing is lost silently
        conn.send(("error", f"{type(exc).__name__}: {exc}", 0.0))
    finally:
        conn.close()


def run_in_processes(job: PointJob, processes: int) -> tuple[list[RequestRecord], float]:
    """The point's records (as they came, not yet in send order) from ``processes`` client
    processes, and the busiest one's CPU use in percent of one core.

    At a concurrency point each process runs its streams, which take the next request index
    from one counter shared by every process, so the point sends each request once and in the
    same order as one process would; at a rate point, the arrivals whose index falls to it, at
    their times after one common start. The processes are spawned (not forked: the parent has
    sampler threads) and import everything before the point starts, so no request waits for a
    process to come up. ``sent_s`` and every chunk time come from ``perf_counter``, one clock
    for every process on the host, so the records merge as if one client sent them."""
    ctx = mp.get_context("spawn")
    counter = ctx.Value("q", 0)
    go = ctx.Event()
    start = ctx.Value("d", 0.0)
    procs, pipes = [], []
    try:
        for k in range(processes):
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(
                target=_child,
                args=(send, k, processes, _Sync(counter, go, start), job),
                name=f"kit-load-{k}",
                daemon=True,
            )
            proc.start()
            send.close()
            procs.append(proc)
            pipes.append(receive)
        for k, pipe in enumerate(pipes):
            if not pipe.poll(READY_TIMEOUT_S):
                raise BenchAborted(f"client process {k} did not start in {READY_TIMEOUT_S:g} s")
            status, detail, _ = pipe.recv()
            if status != "ready":
                raise BenchAborted(f"client process {k} failed to start: {detail}")
        start.value = time.perf_counter() + START_DELAY_S
        go.set()
        records: list[RequestRecord] = []
        cpus: list[float] = []
        for k, pipe in enumerate(pipes):
            try:
                status, payload, cpu = pipe.recv()
            except EOFError:
                raise BenchAborted(f"client process {k} ended without its records") from None
            if status != "ok":
                raise BenchAborted(f"client process {k} failed: {payload}")
            records += [RequestRecord.model_validate_json(line) for line in payload]
            cpus.append(cpu)
        return records, round(max(cpus), 1)
    finally:
        go.set()  # a process still waiting for the go ends instead of hanging
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
