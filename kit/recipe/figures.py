"""Published figures of one load point (a recipe's ``reference.points``), in kit's names and
units: what ``kit import`` reads from another tool's result file (:mod:`kit.importers`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.figures import POINT_KINDS
from kit.recipe.base import RecipeModel

# a reference point's figures a run's load point can be compared on, and kit's figures of a
# load point (kit.bench.load.LoadPoint) that one may be compared with
PointFigure = Literal[
    "request_throughput", "output_tps", "total_tps", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"
]
THROUGHPUTS = frozenset(k.figure for k in POINT_KINDS if k.point_stat is None)
KitFigure = Literal[
    "request_throughput",
    "output_tps",
    "total_tps",
    "ttft_ms",
    "first_chunk_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
]


class LatencyFigures(RecipeModel):
    """One latency over a point's requests, in ms, as the tool published it."""

    mean: float | None = Field(None, ge=0, description="Arithmetic mean.")
    median: float | None = Field(None, ge=0, description="Median (p50).")
    p90: float | None = Field(None, ge=0, description="90th percentile.")
    p99: float | None = Field(None, ge=0, description="99th percentile.")


class ReferencePoint(RecipeModel):
    """A load point's published figures; keyed in ``reference.points`` by the label kit's
    own point at that level carries (``concurrency-4``, ``rate-2``)."""

    requests: int | None = Field(None, ge=0, description="Requests sent (measured).")
    completed: int | None = Field(None, ge=0, description="Of those, completed.")
    failed: int | None = Field(None, ge=0, description="Of those, failed.")
    duration_s: float | None = Field(None, ge=0, description="The point's duration.")
    request_throughput: float | None = Field(None, ge=0, description="Completed requests/s.")
    output_tps: float | None = Field(None, ge=0, description="Output tokens/s.")
    total_tps: float | None = Field(None, ge=0, description="Prompt and output tokens/s.")
    ttft_ms: LatencyFigures | None = Field(None, description="Time to first token.")
    tpot_ms: LatencyFigures | None = Field(None, description="Time per output token.")
    itl_ms: LatencyFigures | None = Field(None, description="Inter-token (chunk) latency.")
    e2e_ms: LatencyFigures | None = Field(None, description="End-to-end latency.")
    runs: int = Field(
        1, ge=1, description="Runs of this point the figures are the mean of (a repeated sweep)."
    )


class Definition(RecipeModel):
    """How the tool that measured a reference defines one of its figures, against kit's."""

    kit: KitFigure | None = Field(
        description="kit's figure of a load point that measures the same thing, compared with "
        "it (vLLM's TTFT: first_chunk_ms); null: none does, the figure is not comparable."
    )
    text: str = Field(description="The tool's definition, in words.")
