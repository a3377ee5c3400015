"""The peers beside kit (``bench.peers``, :mod:`kit.peers`) side by side: per point, kit's row
then each tool's, every figure with a mark where it lies outside the tolerance.

:func:`side_by_side_rows` gives the rows as data, for any page that draws the table (the HTML
report can draw them as they are); :func:`peer_lines` writes them for a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kit.peers.schema import FIGURES, Peers
from kit.report.schema import Report
from kit.report.verdict import num

# the table's columns after the point and the tool: a throughput, then latency pairs
PAIRS = (("ttft_p50", "ttft_p99"), ("tpot_p50", "tpot_p99"), ("itl_p50", "itl_p99"))
TITLES = {s.key: s.title for s in FIGURES}


@dataclass(frozen=True)
class SideBySideRow:
    """One row: a tool at a point (kit's own first). ``values`` and, for a tool, its
    ``deltas`` against kit ((kit - tool) / tool, percent) and ``within`` (the tolerance) are by
    figure key (kit.peers.schema.FIGURES); ``compared_with`` names kit's figure where it is not
    the one of kit's row (vLLM's TTFT against kit's first chunk)."""

    point: str
    tool: str
    version: str | None
    values: dict[str, float | None]
    deltas: dict[str, float | None] = field(default_factory=dict)
    within: dict[str, bool | None] = field(default_factory=dict)
    compared_with: dict[str, str] = field(default_factory=dict)
    counted: str | None = None
    agree: bool | None = None
    error: str | None = None

    @property
    def is_kit(self) -> bool:
        return self.tool == "kit"


def side_by_side_rows(report: Report) -> list[SideBySideRow]:
    """The table's rows, point by point in kit's order: kit's, then each tool's."""
    peers = report.peers
    if peers is None:
        return []
    rows = []
    for mine in peers.kit:
        rows.append(
            SideBySideRow(point=mine.label, tool="kit", version=None, values=dict(mine.figures))
        )
        rows += _tool_rows(peers, mine.label)
    return rows


def _tool_rows(peers: Peers, label: str) -> list[SideBySideRow]:
    out = []
    for run in peers.runs:
        point = next((p for p in run.points if p.label == label), None)
        if point is None:
            out.append(
                SideBySideRow(label, run.name, run.version, {}, error=run.error or "not run")
            )
            continue
        figures = {f.key: f for f in point.figures}
        own = {s.key: f"{s.figure} {s.stat}" if s.stat else s.figure for s in FIGURES}
        counted = f"{point.completed}/{point.requests}" if point.requests is not None else None
        out.append(
            SideBySideRow(
                point=label,
                tool=run.name,
                version=run.version,
                values={k: f.peer for k, f in figures.items()},
                deltas={k: f.delta_pct for k, f in figures.items()},
                within={k: f.within for k, f in figures.items()},
                compared_with={
                    k: f.compared_with
                    for k, f in figures.items()
                    if f.compared_with is not None and f.compared_with != own[k]
                },
                counted=counted,
                agree=point.agree,
                error=point.error,
            )
        )
    return out


def _cell(row: SideBySideRow, key: str) -> str:
    value = row.values.get(key)
    if value is None:
        return "-"
    text = num(value, ".1f" if value >= 10 else ".2f")
    return text + ("*" if row.within.get(key) is False else "")


def _agrees(row: SideBySideRow) -> str:
    if row.is_kit:
        return ""
    if row.error:
        return "FAILED"
    return {True: "yes", False: "NO", None: "-"}[row.agree]


def peer_lines(report: Report) -> list[str]:
    """The side-by-side table for a terminal, with its footnotes; nothing without peers."""
    peers = report.peers
    if peers is None:
        return []
    head = (
        f"  {'point':<14} {'tool':<24} {'done':>5} {'out tok/s':>9} {'TTFT p50/p99':>15} "
        f"{'TPOT p50/p99':>13} {'ITL p50/p99':>13} {'agrees':>6}"
    )
    lines = [
        f"  beside kit (bench.peers): * outside ±{peers.tolerance_pct:g} % of the tool's figure",
        head,
        "  " + "-" * (len(head) - 2),
    ]
    notes: list[str] = []
    for row in side_by_side_rows(report):
        tool = row.tool + (f" {row.version}" if row.version else "")
        pairs = [f"{_cell(row, a)}/{_cell(row, b)}" for a, b in PAIRS]
        lines.append(
            f"  {row.point if row.is_kit else '':<14} {tool:<24} {row.counted or '':>5} "
            f"{_cell(row, 'output_tps'):>9} {pairs[0]:>15} {pairs[1]:>13} {pairs[2]:>13} "
            f"{_agrees(row):>6}"
        )
        if row.error:
            notes.append(f"{row.point}: {row.tool}: {row.error}")
        for key, theirs in row.compared_with.items():
            figure, mine = TITLES[key].split()[0], theirs.split()[0]  # TTFT, first_chunk_ms
            note = f"{row.tool}'s {figure} is compared with kit's {mine}"
            if note not in notes:
                notes.append(note)
    lines.append(f"  agreement: {peers.rule}")
    lines += [f"  {note}" for note in notes]
    return lines
