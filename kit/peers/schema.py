"""What the report keeps of the peers run beside kit (:class:`Peers`): per tool and per point,
the command line, the figures read back from the tool's own result file, kit's beside them,
and whether they agree within :data:`kit.figures.AGREEMENT_PCT`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.base import FrozenModel
from kit.figures import AGREEMENT_PCT, TOOL_KINDS, Kind
from kit.recipe import PeerName

# changes when a field is renamed or removed, or changes meaning; a field added with a default
# does not change it
VERSION = 1
Statistic = Literal["p50", "p99"]


# the figures of a point set beside each tool's: the figure table's (kit.figures.TOOL_KINDS)
FigureSpec = Kind
FIGURES: tuple[Kind, ...] = TOOL_KINDS
RULE = (
    f"a figure agrees when kit's is within ±{AGREEMENT_PCT:g} % of the tool's ((kit - tool) / "
    "tool); a point agrees when output tok/s and the medians of TTFT, TPOT and ITL that both "
    "define alike do (the p99s are shown and flagged, never decide)"
)
KIT_DEFINITIONS: dict[str, str] = {
    "output_tps": "kit: output tokens of the completed measured requests over the first send "
    "to the last end",
    "ttft_ms": "kit: send to the first chunk carrying text (first_chunk_ms: to the first chunk "
    "with choices, text or not)",
    "tpot_ms": "kit: per request, (end - TTFT) / (output tokens - 1)",
    "itl_ms": "kit: the gaps between text chunks, every request's pooled",
}


class KitPoint(FrozenModel):
    """kit's own figures at one point, as the table shows them."""

    label: str = Field(description="The prompt's name, or the load point's label.")
    figures: dict[str, float | None] = Field(
        description="By FIGURES key (output_tps, ttft_p50, ...): kit's own definitions."
    )


class PeerFigure(FrozenModel):
    """One figure of one tool at one point, beside kit's."""

    key: str = Field(description="The FIGURES key (output_tps, ttft_p50, ...).")
    peer: float | None = Field(description="The tool's value, read from its result file.")
    kit: float | None = Field(description="kit's value of the figure the tool's is compared with.")
    compared_with: str | None = Field(
        description="kit's figure and statistic compared (first_chunk_ms p50 for vLLM's TTFT); "
        "None: the tool defines it unlike any of kit's, or does not measure it."
    )
    delta_pct: float | None = Field(description="(kit - tool) / tool, percent.")
    within: bool | None = Field(
        description="|delta| within the tolerance (None: not compared: a side is missing)."
    )


class PeerPoint(FrozenModel):
    """One tool at one point: what it was given, what it measured."""

    label: str = Field(description="The prompt's name, or the load point's label.")
    argv: list[str] = Field(description="Its command line, files by their names beside the report.")
    files: list[str] = Field(
        default_factory=list,
        description="Its inputs and outputs beside the report (dataset, scenario, result, log).",
    )
    result_file: str | None = Field(None, description="Its own result file, read back.")
    log_file: str | None = Field(None, description="Its output, where to look when it failed.")
    requests: int | None = Field(None, description="Measured requests, as the tool counted.")
    completed: int | None = Field(None, description="Of those, completed.")
    failed: int | None = Field(None, description="Of those, failed.")
    figures: list[PeerFigure] = Field(default_factory=list, description="Each figure, by key.")
    agree: bool | None = Field(
        None, description="Its headline figures all within the tolerance (None: none compared)."
    )
    notes: list[str] = Field(
        default_factory=list, description="How its traffic or counting differed from kit's."
    )
    error: str | None = Field(None, description="Why it failed, if it did.")


class PeerRun(FrozenModel):
    """One tool over every point."""

    tool: PeerName = Field(description="The recipe's name for it (bench.peers).")
    name: str = Field(description="The tool, e.g. 'guidellm'.")
    version: str | None = Field(description="Its version (None: not known, it failed first).")
    source: str = Field(description="Where it ran from: its venv and pin, or the engine's.")
    host_packages: list[str] = Field(
        default_factory=list,
        description="The packages its venv took from the engine's Python's site-packages "
        "(bench.peers_system_site_packages), name==version, those it requires directly or not; "
        "empty: its venv held all it needs.",
    )
    definitions: dict[str, str] = Field(
        default_factory=dict,
        description="How it defines each figure, by kit's figure name (its importer's words).",
    )
    points: list[PeerPoint] = Field(default_factory=list, description="Per point, kit's order.")
    agree: bool | None = Field(
        None, description="Every point compared agrees (None: none compared)."
    )
    error: str | None = Field(
        None, description="Why it did not run at all (its install, say), if so."
    )


class Peers(FrozenModel):
    """Other benchmark tools against the same server after kit's bench (bench.peers)."""

    version: Literal[1] = Field(1, description="This block's version (kit.peers.schema).")
    tolerance_pct: float = Field(description="How far kit's figure may lie from a tool's.")
    rule: str = Field(description="The agreement rule, in words.")
    kit_definitions: dict[str, str] = Field(description="kit's own definitions, by figure.")
    kit: list[KitPoint] = Field(description="kit's figures per point, the table's first rows.")
    runs: list[PeerRun] = Field(description="Each tool, in bench.peers order.")
    agree: bool | None = Field(description="Every tool agrees (None: none compared).")
    notes: list[str] = Field(default_factory=list, description="What differed, and failures.")
