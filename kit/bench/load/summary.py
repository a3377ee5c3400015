"""A load point's figures, computed from its records alone (so that ``kit report verify``
recomputes them). The definitions are in :func:`summarize_point`."""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import Field

from kit.base import KitModel
from kit.bench.plausible import plausible
from kit.bench.stream import RequestRecord
from kit.metrics import ServerWindow, SpecDecode, between, fmean, stdev
from kit.recipe.traffic import Slo


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
    return between(sorted_values[lo], sorted_values[hi], pos - lo)


def percentiles(values: Iterable[float]) -> Percentiles:
    """n, mean, std and percentiles; all but n None unless every value is a finite number."""
    vals = sorted(float(v) for v in values)
    if not vals or not all(map(math.isfinite, vals)):
        return Percentiles(n=len(vals), mean=None, std=None, p50=None, p90=None, p95=None, p99=None)
    return Percentiles(
        n=len(vals),
        mean=fmean(vals),
        std=stdev(vals),
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
    ttft_ms: Percentiles = Field(description="Time to first token (the first chunk with text).")
    first_chunk_ms: Percentiles | None = Field(
        None,
        description="Time to the first chunk with choices, text or not: vLLM's benchmark's TTFT "
        "(None in reports written before kit kept it).",
    )
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


def tpot_s(r: RequestRecord) -> float | None:
    """A request's seconds per output token after the first: (E2E - TTFT) / (tokens - 1)."""
    tokens = r.completion_tokens or 0
    if r.wall_s is None or r.ttft_s is None or tokens < 2:
        return None
    return (r.wall_s - r.ttft_s) / (tokens - 1)


def meets(r: RequestRecord, slo: Slo | None) -> bool:
    """Whether a completed request meets every SLO set."""
    if slo is None:
        return False
    tpot = tpot_s(r)
    checks = [
        (slo.ttft_ms, r.ttft_s),
        (slo.tpot_ms, tpot),
        (slo.e2e_ms, r.wall_s),
    ]
    return all(limit is None or (v is not None and v * 1000 <= limit) for limit, v in checks)


def completed(records: list[RequestRecord], label: str) -> list[RequestRecord]:
    """A point's measured requests that ended without error, in the order given, those that
    are not plausible measurements left out (kit.bench.plausible): the ones its figures are
    computed from."""
    return [
        r
        for r in records
        if r.prompt == label
        and r.phase == "load"
        and r.error is None
        and r.wall_s is not None
        and plausible(r)
    ]


def latencies_ms(done: list[RequestRecord]) -> dict[str, list[float]]:
    """A point's latencies in ms, by its figure's name, from its completed requests: one value
    a request (``ttft_ms``, ``first_chunk_ms``, ``tpot_ms``, ``e2e_ms``), or one a gap between
    text chunks, every request's pooled (``itl_ms``)."""
    return {
        "ttft_ms": [(r.ttft_s or 0) * 1000 for r in done if r.ttft_s is not None],
        "first_chunk_ms": [r.first_chunk_s * 1000 for r in done if r.first_chunk_s is not None],
        "tpot_ms": [t * 1000 for r in done if (t := tpot_s(r)) is not None],
        "itl_ms": [
            (b - a) * 1000
            for r in done
            for a, b in zip(r.text_chunk_times_s, r.text_chunk_times_s[1:], strict=False)
        ],
        "e2e_ms": [(r.wall_s or 0) * 1000 for r in done],
    }


def summarize_point(
    label: str, pattern: str, level: float, records: list[RequestRecord], slo: Slo | None
) -> LoadPoint:
    """A point's figures from its measured records (spec decode, server and client CPU
    aside: they come from counters, not records).

    The figures, as ``vllm bench serve`` defines them (its ``benchmarks/serve`` metrics):

    - TTFT: send to the first chunk carrying text; E2E: send to the end of the stream;
    - TPOT: (E2E - TTFT) / (output tokens - 1), per request with more than one token;
    - ITL: the gaps between consecutive text chunks, every request's pooled;
    - duration: the first measured send to the last measured end;
    - output throughput: output tokens of the measured requests / duration; total throughput
      adds their prompt tokens; request throughput: completed requests / duration;
    - goodput: completed requests meeting every SLO of ``bench.slo`` / duration.

    Percentiles interpolate linearly between the two nearest ranks (numpy's default).
    """
    measured = [r for r in records if r.prompt == label and r.phase == "load"]
    done = completed(measured, label)
    timed = [r for r in measured if r.sent_s is not None and plausible(r)]
    duration = None
    if timed and done:
        start = min(r.sent_s or 0.0 for r in timed)
        end = max((r.sent_s or 0.0) + (r.wall_s or 0.0) for r in done)
        duration = round(end - start, 6) if end > start else None
    prompt_tokens = sum(r.prompt_tokens or 0 for r in done)
    output_tokens = sum(r.completion_tokens or 0 for r in done)
    good = sum(1 for r in done if meets(r, slo)) if slo is not None else None
    ms = latencies_ms(done)
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
        ttft_ms=percentiles(ms["ttft_ms"]),
        first_chunk_ms=percentiles(ms["first_chunk_ms"]) if ms["first_chunk_ms"] else None,
        tpot_ms=percentiles(ms["tpot_ms"]),
        itl_ms=percentiles(ms["itl_ms"]),
        e2e_ms=percentiles(ms["e2e_ms"]),
        good=good,
        goodput_rps=(good / duration if duration else None) if good is not None else None,
    )
