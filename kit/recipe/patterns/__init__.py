"""Load patterns: a recipe's ``bench.load``, one class each, each carrying its behaviour
(:class:`LoadPattern`). With one, the bench runs one measured point per level of the pattern,
each with its own requests, warm-up and cool-down.
"""

from __future__ import annotations

from typing import Annotated, cast, get_args

from pydantic import Field

from kit.recipe.patterns.base import (
    ForeignPoint,
    LoadPattern,
    Pacing,
    PointFigures,
    SendPlan,
    StreamsLoad,
)
from kit.recipe.patterns.concurrency import ConcurrencyLoad
from kit.recipe.patterns.rate import RateLoad
from kit.recipe.patterns.sweep import SweepLoad

# The patterns, by bench.load.pattern:
# - concurrency: that many streams in flight, a new request sent as soon as one ends;
# - rate: requests sent at that many per second, Poisson (exponential gaps, seeded) or evenly
#   spaced, however many are in flight (capped by max_concurrency where set);
# - sweep: concurrency raised by a factor per point until the output throughput stops rising
#   or the SLOs fail (the saturation point), or the highest concurrency is reached.
# A new pattern is one module here: its class, added to Load (and AnyLoad).
Load = Annotated[ConcurrencyLoad | RateLoad | SweepLoad, Field(discriminator="pattern")]
AnyLoad = ConcurrencyLoad | RateLoad | SweepLoad


def load_class(pattern: str) -> type[LoadPattern] | None:
    """The load pattern named ``pattern`` (a load point's), None if no pattern is."""
    for cls in get_args(AnyLoad):
        if pattern in get_args(cls.model_fields["pattern"].annotation):
            return cast("type[LoadPattern]", cls)
    return None


__all__ = [
    "AnyLoad",
    "ConcurrencyLoad",
    "ForeignPoint",
    "Load",
    "LoadPattern",
    "Pacing",
    "PointFigures",
    "RateLoad",
    "SendPlan",
    "StreamsLoad",
    "SweepLoad",
    "load_class",
]
