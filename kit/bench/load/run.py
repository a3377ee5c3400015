"""Running a load point: its requests sent by the pattern (:mod:`kit.bench.load.send`), from this
process or from several (:mod:`kit.bench.load.procs`), and their records in send order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from kit.bench.load.datasets import Planned
from kit.bench.load.procs import run_in_processes
from kit.bench.load.send import PointJob, cpu_pct, send_point
from kit.bench.stream import Phase, RequestRecord
from kit.recipe import Bench


def in_send_order(records: list[RequestRecord]) -> list[RequestRecord]:
    """In send order, indexed so, as the verifier expects them."""
    records = sorted(records, key=lambda r: r.sent_s or 0.0)
    return [r.model_copy(update={"index": n}) for n, r in enumerate(records)]


@dataclass(frozen=True)
class LoadTarget:
    """What every point of a load run shares: the server at ``url`` serving ``model``, the
    recipe's ``bench`` and the requests drawn for it (``planned``, warm-ups first)."""

    url: str
    bench: Bench
    model: str
    planned: list[Planned]


def run_point(
    target: LoadTarget,
    level: float,
    phase: Phase,
    salt: str,
    t0: float,
    on_request: Callable[[RequestRecord], None] | None = None,
) -> tuple[list[RequestRecord], float]:
    """The warm-up (``phase`` load_warmup) or the measured requests (load) of one point of the
    recipe's load pattern; their records, in send order, and the client's CPU use over them
    in percent of one core (with ``bench.load.processes`` above 1, its busiest process's).
    ``t0`` (perf_counter) is the point's start: ``sent_s`` counts from it."""
    bench = target.bench
    load = bench.load
    assert load is not None
    count = load.warmups_at(level) if phase == "load_warmup" else load.requests_at(level)
    if count == 0:
        return [], 0.0
    job = PointJob(target.url, bench, target.model, level, target.planned, phase, count, salt, t0)
    if load.processes > 1:
        records, cpu = run_in_processes(job, load.processes)
        if on_request:
            for rec in records:
                on_request(rec)
        return in_send_order(records), cpu
    cpu0, wall0 = time.process_time(), time.perf_counter()
    records = asyncio.run(send_point(job, on_request))
    return in_send_order(records), round(cpu_pct(cpu0, wall0), 1)


def levels(bench: Bench) -> list[float]:
    assert bench.load is not None
    return bench.load.planned_levels()
