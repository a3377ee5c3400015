"""The peer tools beside kit (``bench.peers``, :mod:`kit.peers`): per point, kit's figures and
each tool's, with the deltas and the tolerance flags, drawn from
:func:`kit.report.show.side_by_side_rows`; then the definitions each tool uses."""

from __future__ import annotations

from kit.peers.schema import FIGURES, Peers
from kit.report.html.crosscheck import agree_text
from kit.report.html.layout import (
    NOT_MEASURED,
    bullets,
    html_table,
    not_measured,
    paragraph,
    section,
)
from kit.report.schema import Report
from kit.report.show import SideBySideRow, side_by_side_rows

TITLE = "Peer tools"
OUTSIDE = "outside"
NOT_STATED = "not stated: compared with kit's"


def _name(spec_title: str, stat: str | None) -> str:
    return spec_title.removesuffix(f" {stat}") if stat else spec_title


# kit's figure name (output_tps, ttft_ms, ...) -> its title without the statistic
FIGURE_NAMES = {s.figure: _name(s.title, s.stat) for s in FIGURES}


def figure_cell(row: SideBySideRow, key: str) -> str:
    """A figure as the table shows it: kit's value; a tool's with its delta against kit's and
    ``outside`` where it lies beyond the tolerance."""
    value = row.values.get(key)
    if value is None:
        return "-"
    text = f"{value:,.2f}"
    delta = row.deltas.get(key)
    if delta is not None:
        text += f" ({delta:+.1f} %)"
    return text + (f" {OUTSIDE}" if row.within.get(key) is False else "")


def agrees_cell(row: SideBySideRow) -> str:
    """The point's verdict for a tool's row (empty on kit's)."""
    if row.is_kit:
        return ""
    if row.error:
        return "failed"
    return {True: "yes", False: "no", None: "not compared"}[row.agree]


def _table(rows: list[SideBySideRow], label: str | None) -> str:
    head = (
        "point",
        "tool",
        "requests done",
        *(s.title if s.unit in s.title else f"{s.title} ({s.unit})" for s in FIGURES),
        "agrees",
        "error",
    )
    body = (
        (
            row.point if row.is_kit else "",
            row.tool + (f" {row.version}" if row.version else ""),
            row.counted,
            *(figure_cell(row, s.key) for s in FIGURES),
            agrees_cell(row),
            row.error,
        )
        for row in rows
    )
    return html_table(head, body, numeric=set(range(2, 3 + len(FIGURES))), label=label)


def compared_notes(rows: list[SideBySideRow]) -> list[str]:
    """Where a tool's figure is compared with another figure of kit's than the column's."""
    titles = {s.key: s.title for s in FIGURES}
    notes = []
    for row in rows:
        for key, theirs in row.compared_with.items():
            note = f"{row.tool}'s {titles[key]} is compared with kit's {theirs}"
            if note not in notes:
                notes.append(note)
    return notes


def tool_notes(peers: Peers) -> list[str]:
    """How each tool's traffic or counting differed from kit's, once each; a tool that did not
    run, and why."""
    notes = []
    for run in peers.runs:
        if run.error:
            notes.append(f"{run.name} did not run: {run.error}")
        first = run.name.split()[0].lower()
        for point in run.points:
            for note in point.notes:
                named = note if note.lower().startswith(first) else f"{run.name}: {note}"
                if named not in notes:
                    notes.append(named)
    return notes


def _definition(definitions: dict[str, str], figure: str) -> str:
    if not definitions:  # a tool that never ran: nothing known
        return "-"
    return definitions.get(figure, NOT_STATED)


def definitions_table(peers: Peers) -> str:
    """Per figure, how kit and each tool define it (each importer's words)."""
    head = ("figure", "kit", *(run.name for run in peers.runs))
    rows = (
        (
            title,
            (peers.kit_definitions.get(figure) or "-").removeprefix("kit: "),
            *(_definition(run.definitions, figure) for run in peers.runs),
        )
        for figure, title in FIGURE_NAMES.items()
    )
    return html_table(head, rows)


def peers_section(report: Report, label: str | None = None) -> str | None:
    """The side-by-side table of kit and its peers, the rule, the definitions and what failed;
    None when the report has no ``peers`` block."""
    peers = report.peers
    if peers is None:
        return None
    rows = side_by_side_rows(report)
    cls = "ok" if peers.agree else ("bad" if peers.agree is False else "warnb")
    table = (
        _table(rows, label)
        if rows
        else not_measured("kit measured no point for the tools to be set beside")
    )
    body = (
        f'<div class="banner {cls}" id="peers-agree">{agree_text(peers.agree)}</div>'
        + paragraph(
            "Each tool ran after kit's bench against the same server, with kit's traffic at "
            "each point. A tool's figure is followed by kit's difference from it, (kit - tool) "
            f"/ tool; {OUTSIDE}: beyond ±{peers.tolerance_pct:g} %. Agreement: {peers.rule}."
        )
        + table
        + bullets([*compared_notes(rows), *tool_notes(peers)])
        + "<h3>Definitions</h3>"
        + definitions_table(peers)
        + paragraph(
            "Where each ran from: "
            + ("; ".join(f"{run.name}: {run.source}" for run in peers.runs) or NOT_MEASURED)
            + ".",
            "muted",
        )
    )
    return section("peers", TITLE, body, label)
