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

from kit.bench.load.datasets import Planned, file_requests, random_requests
from kit.bench.load.run import LoadTarget, levels, run_point
from kit.bench.load.summary import (
    LoadPoint,
    Percentiles,
    meets,
    percentile,
    percentiles,
    summarize_point,
)

__all__ = [
    "LoadPoint",
    "LoadTarget",
    "Percentiles",
    "Planned",
    "file_requests",
    "levels",
    "meets",
    "percentile",
    "percentiles",
    "random_requests",
    "run_point",
    "summarize_point",
]
