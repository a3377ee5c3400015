"""Load points: a recipe's ``bench.load`` pattern against one server, one point per level
(:func:`run_point`), and the summary of each point computed from its records alone
(:func:`summarize_point`, so that ``kit report verify`` recomputes it).
"""

from kit.bench.load.datasets import Planned, file_requests, random_requests

# Per point: the warm-up requests (discarded; all of them end before the measured ones start),
# then the measured ones, sent by the pattern (kit.recipe.traffic) over the asyncio client
# (kit.bench.aio); then the cool-down. Every request starts with a salt unique to its point and
# index, so no point is served from the prefix cache another one filled.
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
