"""Sending one load point: its requests, as its pattern says, over the asyncio client, from this
process or (with a :class:`Share`) from one of several client processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kit.bench import aio
from kit.bench.load.datasets import Planned, nth
from kit.bench.stream import Phase, RequestRecord, RequestTag, StreamLimits, request_body
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


@dataclass(frozen=True)
class PointJob:
    """What a client sends for one point: the ``count`` requests of ``phase`` (load_warmup or
    load) at ``level`` of the recipe's load pattern, their prompts from ``planned`` and salted
    with ``salt``; ``sent_s`` counts from ``t0`` (perf_counter). It crosses to the client
    processes as it is (pickled)."""

    url: str
    bench: Bench
    model: str
    level: float
    planned: list[Planned]
    phase: Phase
    count: int
    salt: str
    t0: float

    @property
    def load(self) -> AnyLoad:
        assert self.bench.load is not None
        return self.bench.load


async def send_point(
    job: PointJob,
    on_request: Callable[[RequestRecord], None] | None = None,
    share: Share | None = None,
) -> list[RequestRecord]:
    """The requests of one point (or, with ``share``, one client process's part of them) sent
    as its pattern says, over the asyncio client; their records as they ended."""
    load, level, count, phase = job.load, job.level, job.count, job.phase
    label = load.label(level)
    offset = load.warmups_at(level) if phase == "load" else 0  # the measured follow on

    def body(i: int) -> dict[str, Any]:
        p = nth(job.planned, offset + i)
        text = f"[{job.salt}-{offset + i}] {p.text}"
        return request_body(job.bench, job.model, text, p.max_tokens)

    async def one(conn: aio.Connection, i: int) -> RequestRecord:
        rec = await aio.stream_request(
            conn, body(i), RequestTag(label, phase, i), StreamLimits.of(job.bench), t0=job.t0
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
            conn = aio.Connection(job.url)
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
                conn = idle.pop() if idle else aio.Connection(job.url)
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
