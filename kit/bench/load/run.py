"""Running a load point: its requests sent by the pattern over the asyncio client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kit.bench import aio
from kit.bench.load.datasets import Planned, nth
from kit.bench.stream import Phase, RequestRecord, request_body
from kit.recipe import Bench
from kit.recipe.traffic import AnyLoad


@dataclass(frozen=True)
class Share:
    """One client process's part of a point: process ``k`` of ``of``. Streams are dealt out
    (the first ``level % of`` get one more), each taking the next request index from
    ``take``; a rate point's arrivals go by index (``i % of == k``), at their times after
    ``start`` (perf_counter, the same clock in every process on one host)."""

    k: int
    of: int
    take: Callable[[], int | None]
    start: float


def cpu_pct(cpu0: float, wall0: float) -> float:
    """This process's CPU time since ``cpu0`` (process_time) over the wall time since ``wall0``
    (perf_counter), in percent of one core."""
    wall = time.perf_counter() - wall0
    return (time.process_time() - cpu0) / wall * 100 if wall > 0 else 0.0


async def send_point(
    url: str,
    bench: Bench,
    model: str,
    load: AnyLoad,
    level: float,
    planned: list[Planned],
    phase: Phase,
    count: int,
    salt: str,
    t0: float,
    on_request: Callable[[RequestRecord], None] | None,
    share: Share | None = None,
) -> list[RequestRecord]:
    """The ``count`` requests of one point (or, with ``share``, one client process's part of
    them) sent as its pattern says, over the asyncio client; their records as they ended."""
    label = load.label(level)
    offset = load.warmups_at(level) if phase == "load" else 0  # the measured follow on

    def body(i: int) -> dict[str, Any]:
        p = nth(planned, offset + i)
        return request_body(bench, model, f"[{salt}-{offset + i}] {p.text}", p.max_tokens)

    async def one(conn: aio.Connection, i: int) -> RequestRecord:
        rec = await aio.stream_request(
            conn,
            body(i),
            prompt=label,
            phase=phase,
            index=i,
            usable_fraction=bench.usable_fraction,
            deadline_s=bench.request_timeout_s,
            stall_s=bench.stall_timeout_s,
            t0=t0,
        )
        if on_request:
            on_request(rec)
        return rec

    records: list[RequestRecord] = []
    plan = load.send_plan(level, count)
    if plan.gaps is None:  # closed loop: each stream sends its next request as its last ends
        queue = iter(range(count))
        take = share.take if share else lambda: next(queue, None)
        streams = plan.streams
        if share is not None:
            streams = streams // share.of + (1 if share.k < streams % share.of else 0)

        async def worker() -> None:
            conn = aio.Connection(url)
            try:
                while (i := take()) is not None:
                    records.append(await one(conn, i))
            finally:
                await conn.close()

        await asyncio.gather(*(worker() for _ in range(streams)))
    else:  # open loop: each request at its arrival time, however many are in flight
        most = plan.streams
        if share is not None:
            most = max(-(-most // share.of), 1)
        limit = asyncio.Semaphore(most)
        idle: list[aio.Connection] = []

        async def send(i: int) -> None:
            async with limit:
                conn = idle.pop() if idle else aio.Connection(url)
                records.append(await one(conn, i))
                idle.append(conn)

        tasks = []
        start, due = (share.start if share else time.perf_counter()), 0.0
        for i, gap in enumerate(plan.gaps):
            due += gap
            if share is not None and i % share.of != share.k:
                continue
            delay = start + due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(send(i)))
        await asyncio.gather(*tasks)
        for conn in idle:
            await conn.close()
    return records


def in_send_order(records: list[RequestRecord]) -> list[RequestRecord]:
    """In send order, indexed so, as the verifier expects them."""
    records = sorted(records, key=lambda r: r.sent_s or 0.0)
    return [r.model_copy(update={"index": n}) for n, r in enumerate(records)]


def run_point(
    url: str,
    bench: Bench,
    model: str,
    level: float,
    planned: list[Planned],
    phase: Phase,
    salt: str,
    t0: float,
    on_request: Callable[[RequestRecord], None] | None = None,
) -> tuple[list[RequestRecord], float]:
    """The warm-up (``phase`` load_warmup) or the measured requests (load) of one point of the
    recipe's load pattern; their records, in send order, and the client's CPU use over them
    in percent of one core (with ``bench.load.processes`` above 1, its busiest process's).
    ``t0`` (perf_counter) is the point's start: ``sent_s`` counts from it."""
    load = bench.load
    assert load is not None
    count = load.warmups_at(level) if phase == "load_warmup" else load.requests_at(level)
    if count == 0:
        return [], 0.0
    if load.processes > 1:
        from kit.bench.load.procs import run_in_processes

        args = (url, bench, model, level, planned, phase, count, salt, t0)
        records, cpu = run_in_processes(args, load.processes)
        if on_request:
            for rec in records:
                on_request(rec)
        return in_send_order(records), cpu
    cpu0, wall0 = time.process_time(), time.perf_counter()
    records = asyncio.run(
        send_point(url, bench, model, load, level, planned, phase, count, salt, t0, on_request)
    )
    return in_send_order(records), round(cpu_pct(cpu0, wall0), 1)


def levels(bench: Bench) -> list[float]:
    assert bench.load is not None
    return bench.load.planned_levels()
