"""BENCHMARKS.md: a section per kind, a heading per model × rig × engine in each; then the
unverified files apart."""

from __future__ import annotations

from collections.abc import Sequence

from kit.report.table.model import INVALID_COLUMNS, Refused, Section, Table


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = [
        "| " + " | ".join(_md(h) for h in head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    out += ["| " + " | ".join(_md(c) for c in cells) + " |" for cells in rows]
    return out


def _md_section(section: Section) -> list[str]:
    lines = ["", f"## {section.title}", "", section.note]
    for (model, rig_cell, engine), rows in section.groups():
        lines += ["", f"### {model} · {rig_cell} · {engine}", ""]
        lines += _md_table(
            (*section.columns, "run"),
            [[*(r.cells[c] for c in section.columns), r.run_id] for r in rows],
        )
    return lines


UNVERIFIED_HEAD = ("signature", "verdict", "file", "why refused", "model", "engine")
UNVERIFIED_TAIL = ("run",)


def unverified_cells(f: Refused) -> list[str]:
    """A refused file's cells under UNVERIFIED_HEAD, INVALID_COLUMNS[1:] and UNVERIFIED_TAIL: its
    label first, then what it claims, each figure led by the label."""
    rest = INVALID_COLUMNS[1:]
    if f.row is None:
        cells = ["-"] * (len(UNVERIFIED_HEAD) - 1 + len(rest) + len(UNVERIFIED_TAIL))
        cells[1:3] = [f.source, "; ".join(f.reasons)]
        return [f.label, *cells]
    r = f.row
    return [
        f.label,
        r.cells["verdict"],
        f.source,
        "; ".join(f.reasons),
        r.model,
        r.engine,
        *(r.cells[c] for c in rest),
        r.run_id,
    ]


def markdown(table: Table) -> str:
    """BENCHMARKS.md: a section per kind (single-stream decode, load-sweep peaks, INVALID runs),
    a heading per model × rig × engine in each, its runs under it; then Unverified."""
    sections = table.sections()
    lines = [
        "# Benchmarks",
        "",
        f"{len(table.rows)} report(s), each verified item by item (`kit report verify`) and "
        f"signed by one of the {table.keys} key(s) in `{table.keys_dir}`, in sections by kind: "
        + ", ".join(f"{s.title} ({len(s.rows)})" for s in sections)
        + ". The verdict (the report's own validity) leads each row.",
    ]
    for section in sections:
        lines += _md_section(section)
    if table.refused:
        lines += [
            "",
            "## Unverified",
            "",
            "These reports did not pass every verify item against the keys above: their "
            "figures are as the files claim them, unchecked, each led by why (UNSIGNED, "
            "UNTRUSTED: signed by a key not among them, UNVERIFIED: an item failed), and belong "
            "in no comparison.",
            "",
        ]
        head = (*UNVERIFIED_HEAD, *INVALID_COLUMNS[1:], *UNVERIFIED_TAIL)
        lines += _md_table(head, [unverified_cells(f) for f in table.refused])
    return "\n".join(lines) + "\n"
