"""Load points: a recipe's ``bench.load`` pattern against one server, one point per level, and
the summary of each point computed from its records alone (so that ``kit report verify``
recomputes it).

Per point: the warm-up requests (discarded; all of them end before the measured ones start),
then the measured ones, sent by the pattern (:mod:`kit.recipe.traffic`) over the asyncio client
(:mod:`kit.bench.aio`); then the cool-down.
Every request starts with a salt unique to its point and index, so no point is served from
the prefix cache another one filled.

The figures, as ``vllm bench serve`` defines them (its ``benchmarks/serve`` metrics):

- TTFT: send to the first chunk carrying text; E2E: send to the end of the stream;
- TPOT: (E2E - TTFT) / (output tokens - 1), per request with more than one token;
- ITL: the gaps between consecutive text chunks, every request's pooled;
- duration: the first measured send to the last measured end;
- output throughput: output tokens of the measured requests / duration; total throughput adds
  their prompt tokens; request throughput: completed requests / duration;
- goodput: completed requests meeting every SLO of ``bench.slo`` / duration.

Percentiles interpolate linearly between the two nearest ranks (numpy's default).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import random
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from kit.base import KitModel
from kit.bench import aio
from kit.bench.stream import Phase, RequestRecord, request_body
from kit.errors import BadInputError
from kit.metrics import ServerWindow, SpecDecode
from kit.recipe import Bench
from kit.recipe.traffic import (
    AnyLoad,
    FileDataset,
    RandomDataset,
    RateLoad,
    Slo,
    SweepLoad,
    point_label,
    point_levels,
    point_requests,
)

log = logging.getLogger(__name__)


class Percentiles(KitModel):
    """One latency over a point's completed requests, in ms."""

    n: int = Field(description="Number of values.")
    mean: float | None = Field(description="Arithmetic mean.")
    std: float | None = Field(description="Sample standard deviation (n-1); None when n < 2.")
    p50: float | None = Field(description="Median.")
    p90: float | None = Field(description="90th percentile.")
    p95: float | None = Field(description="95th percentile.")
    p99: float | None = Field(description="99th percentile.")


def percentile(sorted_values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of sorted values, linear between the nearest ranks."""
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def percentiles(values: Iterable[float]) -> Percentiles:
    vals = sorted(float(v) for v in values)
    if not vals:
        return Percentiles(n=0, mean=None, std=None, p50=None, p90=None, p95=None, p99=None)
    return Percentiles(
        n=len(vals),
        mean=statistics.fmean(vals),
        std=statistics.stdev(vals) if len(vals) > 1 else None,
        p50=percentile(vals, 50),
        p90=percentile(vals, 90),
        p95=percentile(vals, 95),
        p99=percentile(vals, 99),
    )


class LoadPoint(KitModel):
    """One level of a load pattern: its requests' figures."""

    label: str = Field(description="The name its records carry, e.g. concurrency-4 or rate-2.")
    pattern: str = Field(description="concurrency or rate.")
    level: float = Field(description="Streams in flight, or requests per second.")
    requests: int = Field(description="Measured requests sent.")
    completed: int = Field(description="Of those, ended without error.")
    duration_s: float | None = Field(description="First measured send to last measured end.")
    request_throughput: float | None = Field(description="Completed requests per second.")
    output_tps: float | None = Field(description="Output tokens per second.")
    total_tps: float | None = Field(description="Prompt and output tokens per second.")
    prompt_tokens: int = Field(description="Prompt tokens of the completed requests.")
    output_tokens: int = Field(description="Output tokens of the completed requests.")
    ttft_ms: Percentiles = Field(description="Time to first token.")
    tpot_ms: Percentiles = Field(description="Time per output token after the first.")
    itl_ms: Percentiles = Field(description="Gaps between text chunks.")
    e2e_ms: Percentiles = Field(description="End-to-end latency.")
    good: int | None = Field(description="Completed requests meeting every SLO (None: no SLO).")
    goodput_rps: float | None = Field(description="good / duration (None: no SLO).")
    spec_decode: SpecDecode | None = Field(None, description="Over this point's window.")
    server: ServerWindow | None = Field(None, description="Server-side figures, same window.")
    client_cpu_pct: float | None = Field(
        None,
        description="kit's own CPU time over the point's wall time, in percent of one core: "
        "near 100 means the client, not the server, set the pace.",
    )
    stop_reason: str | None = Field(
        None, description="A sweep's last point: why the sweep stopped after it."
    )


def _tpot_s(r: RequestRecord) -> float | None:
    tokens = r.completion_tokens or 0
    if r.wall_s is None or r.ttft_s is None or tokens < 2:
        return None
    return (r.wall_s - r.ttft_s) / (tokens - 1)


def meets(r: RequestRecord, slo: Slo | None) -> bool:
    """Whether a completed request meets every SLO set."""
    if slo is None:
        return False
    tpot = _tpot_s(r)
    checks = [
        (slo.ttft_ms, r.ttft_s),
        (slo.tpot_ms, tpot),
        (slo.e2e_ms, r.wall_s),
    ]
    return all(limit is None or (v is not None and v * 1000 <= limit) for limit, v in checks)


def summarize_point(
    label: str, pattern: str, level: float, records: list[RequestRecord], slo: Slo | None
) -> LoadPoint:
    """A point's figures from its measured records (spec decode, server and client CPU
    aside: they come from counters, not records)."""
    measured = [r for r in records if r.prompt == label and r.phase == "load"]
    done = [r for r in measured if r.error is None and r.wall_s is not None]
    timed = [r for r in measured if r.sent_s is not None]
    duration = None
    if timed and done:
        start = min(r.sent_s or 0.0 for r in timed)
        end = max((r.sent_s or 0.0) + (r.wall_s or 0.0) for r in done)
        duration = round(end - start, 6) if end > start else None
    prompt_tokens = sum(r.prompt_tokens or 0 for r in done)
    output_tokens = sum(r.completion_tokens or 0 for r in done)
    good = sum(1 for r in done if meets(r, slo)) if slo is not None else None
    gaps = [
        (b - a) * 1000
        for r in done
        for a, b in zip(r.text_chunk_times_s, r.text_chunk_times_s[1:], strict=False)
    ]
    return LoadPoint(
        label=label,
        pattern=pattern,
        level=level,
        requests=len(measured),
        completed=len(done),
        duration_s=duration,
        request_throughput=len(done) / duration if duration else None,
        output_tps=output_tokens / duration if duration else None,
        total_tps=(prompt_tokens + output_tokens) / duration if duration else None,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        ttft_ms=percentiles((r.ttft_s or 0) * 1000 for r in done if r.ttft_s is not None),
        tpot_ms=percentiles(t * 1000 for r in done if (t := _tpot_s(r)) is not None),
        itl_ms=percentiles(gaps),
        e2e_ms=percentiles((r.wall_s or 0) * 1000 for r in done),
        good=good,
        goodput_rps=(good / duration if duration else None) if good is not None else None,
    )


def sweep_stop(load: SweepLoad, points: list[LoadPoint], slo: Slo | None) -> str | None:
    """Why a sweep stops after the last of ``points`` (None: it goes on): the SLOs failed, the
    output throughput rose less than ``min_gain_pct`` over the point before (saturated), or
    the highest concurrency was reached."""
    last = points[-1]
    if slo is not None and last.requests:
        share = (last.good or 0) / last.requests
        if share < load.slo_fraction:
            return (
                f"SLOs failed: {share * 100:.0f} % of requests met bench.slo, below "
                f"{load.slo_fraction * 100:.0f} %"
            )
    if len(points) > 1:
        before, now = points[-2].output_tps, last.output_tps
        if before and now is not None:
            gain = (now - before) / before * 100
            if gain < load.min_gain_pct:
                return (
                    f"saturated: output tok/s rose {gain:+.1f} % over {points[-2].label}, "
                    f"less than {load.min_gain_pct:g} %"
                )
    if last.level >= point_levels(load)[-1]:
        return f"reached max_concurrency {load.max_concurrency}"
    return None


# ---------------------------------------------------------------------------------------------
# datasets: the (text, max_tokens) of each request


@dataclass(frozen=True)
class Planned:
    text: str
    max_tokens: int


def file_requests(ds: FileDataset, recipe_dir: Path | None) -> list[Planned]:
    """The prompts of a local JSONL or ShareGPT file, refused unless its sha256 matches."""
    path = Path(ds.path)
    if not path.is_absolute() and recipe_dir is not None:
        path = recipe_dir / path
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"bench.dataset.path: {ds.path}: {exc.strerror or exc}") from None
    digest = hashlib.sha256(blob).hexdigest()
    if digest != ds.sha256:
        raise BadInputError(
            f"bench.dataset.sha256: {ds.path} has sha256 {digest}, the recipe pins {ds.sha256}",
            hint="the file changed since the recipe was written: restore it, or pin the new one",
        )
    out: list[Planned] = []
    try:
        if ds.format == "jsonl":
            for n, line in enumerate(blob.decode().splitlines(), 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
                    raise BadInputError(f'bench.dataset: {ds.path} line {n}: no "prompt" string')
                out.append(Planned(row["prompt"], int(row.get("max_tokens") or ds.max_tokens)))
        else:
            for n, conv in enumerate(json.loads(blob), 1):
                turns = conv.get("conversations") if isinstance(conv, dict) else None
                first = next(
                    (t for t in turns or [] if isinstance(t, dict) and t.get("from") == "human"),
                    None,
                )
                if first is None or not isinstance(first.get("value"), str):
                    raise BadInputError(f"bench.dataset: {ds.path} entry {n}: no human turn")
                out.append(Planned(first["value"], ds.max_tokens))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInputError(f"bench.dataset: {ds.path}: not {ds.format}: {exc}") from None
    if not out:
        raise BadInputError(f"bench.dataset: {ds.path} holds no prompt")
    return out


def _words() -> list[str]:
    from kit.model.synthetic import _words as words

    return list(words())


def random_requests(
    ds: RandomDataset, count: int, count_tokens: Callable[[str], int | None]
) -> list[Planned]:
    """``count`` prompts of random words sized to the drawn token lengths: words per token
    fitted on two /tokenize counts of the server, as the prefill probe sizes its prompts."""
    words = _words()
    rng = random.Random(ds.seed)
    probe_a = " ".join(rng.choice(words) for _ in range(64))
    probe_b = " ".join(rng.choice(words) for _ in range(512))
    a, b = count_tokens(probe_a), count_tokens(probe_b)
    if a is None or b is None or b <= a:
        raise BadInputError(
            "bench.dataset: random prompts are sized with the server's /tokenize, which did not "
            "answer",
            hint="use a server with /tokenize (vLLM has it), or kind: prompts / file",
        )
    per_word = (b - a) / (512 - 64)
    fixed = a - per_word * 64
    out = []
    for _ in range(count):
        n_in = _draw(rng, ds.input_tokens, ds.range_ratio)
        n_out = _draw(rng, ds.output_tokens, ds.range_ratio)
        n_words = max(int((n_in - fixed) / per_word), 1)
        out.append(Planned(" ".join(rng.choice(words) for _ in range(n_words)), n_out))
    return out


def _draw(rng: random.Random, mean: int, ratio: float) -> int:
    if ratio == 0:
        return mean
    return max(rng.randint(int(mean * (1 - ratio)), math.ceil(mean * (1 + ratio))), 1)


# ---------------------------------------------------------------------------------------------
# running a point


def arrival_gaps(load: RateLoad, rate: float, count: int) -> list[float]:
    """Seconds between consecutive sends at ``rate`` (the first send at 0)."""
    if load.arrival == "constant":
        return [0.0] + [1.0 / rate] * (count - 1)
    rng = random.Random(load.seed)
    return [0.0] + [rng.expovariate(rate) for _ in range(count - 1)]


async def _run_point(
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
) -> list[RequestRecord]:
    label = point_label(load, level)
    offset = load.warmup_requests if phase == "load" else 0  # the measured ones follow on

    def body(i: int) -> dict[str, Any]:
        p = planned[(offset + i) % len(planned)]
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
    if not isinstance(load, RateLoad):  # concurrency, or a sweep's point
        queue = iter(range(count))

        async def worker() -> None:
            conn = aio.Connection(url)
            try:
                for i in queue:
                    records.append(await one(conn, i))
            finally:
                await conn.close()

        await asyncio.gather(*(worker() for _ in range(int(level))))
    else:
        limit = asyncio.Semaphore(load.max_concurrency or count)
        idle: list[aio.Connection] = []

        async def send(i: int) -> None:
            async with limit:
                conn = idle.pop() if idle else aio.Connection(url)
                records.append(await one(conn, i))
                idle.append(conn)

        tasks = []
        start, due = time.perf_counter(), 0.0
        for i, gap in enumerate(arrival_gaps(load, level, count)):
            due += gap
            delay = start + due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(send(i)))
        await asyncio.gather(*tasks)
        for conn in idle:
            await conn.close()
    # in send order, indexed so, as the verifier expects them
    records.sort(key=lambda r: r.sent_s or 0.0)
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
    in percent of one core. ``t0`` (perf_counter) is the point's start: ``sent_s`` counts
    from it."""
    load = bench.load
    assert load is not None
    count = load.warmup_requests if phase == "load_warmup" else point_requests(load, level)
    if count == 0:
        return [], 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    records = asyncio.run(
        _run_point(url, bench, model, load, level, planned, phase, count, salt, t0, on_request)
    )
    wall = time.perf_counter() - wall0
    cpu = (time.process_time() - cpu0) / wall * 100 if wall > 0 else 0.0
    return records, round(cpu, 1)


def levels(bench: Bench) -> list[float]:
    assert bench.load is not None
    return point_levels(bench.load)
