"""A row of Club-3090's ``BENCHMARKS.md``: ``Compose | Rig | KV | Max ctx | Narr / Code TPS |
PP tok/s | Peak VRAM | Date | Notes`` (llama.cpp tables: ``Quant`` for ``KV``), the rig cell
by the file's convention (cards and link, power cap, interconnect, custom all-reduce). One row
is read, picked by its line number or by words of its Rig and Date cells (``--row``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kit.errors import BadInputError
from kit.importers.club3090.common import (
    DEFINITIONS,
    TOOL,
    canonical_protocol,
    rig_detail,
    spec_from_text,
)
from kit.importers.parse import NO_OPTIONS, ImportOptions, Parsed, Reader, parse_file
from kit.importers.schema import Imported, SpecDecode
from kit.recipe.protocol import PromptFigures

TPS_HEADER = "Narr / Code TPS"
_SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_NUM = r"~?\s*(\d+(?:\.\d+)?)"
_PAIR = re.compile(_NUM + r"\s*/\s*" + _NUM)
_DECODE_PAIR = re.compile(r"\bdecode\s+" + _NUM + r"\s*/\s*" + _NUM, re.I)
_WALL_PAIR = re.compile(r"\bwall\s+" + _NUM + r"\s*/\s*" + _NUM, re.I)
_RUNS = re.compile(r"\bn=(\d+)")
_CV = re.compile(r"\bCV\s+([\d.]+)%\s*/\s*([\d.]+)%")
_TTFT = re.compile(r"\bTTFT\s+(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\s*ms")
_NOTES_DECODE = re.compile(r"\bDecode\s+([\d.]+)\s*/\s*([\d.]+)\s*TPS")
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_MIB = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+)\s*MiB")


def detect(path: Path, data: Parsed) -> bool:
    """Markdown holding a table whose header has ``Rig`` and ``Narr / Code TPS``."""
    if data.json is not None or data.lines is not None:
        return False
    return any(
        line.startswith("|") and TPS_HEADER in line and "Rig" in line
        for line in data.text.splitlines()
    )


def _plain(text: str) -> str:
    return re.sub(r"[*`]", "", text).strip()


def _cells(line: str) -> list[str]:
    parts = _CELL_SPLIT.split(line.strip())
    return [p.strip() for p in parts[1:-1]] if len(parts) > 2 else []


@dataclass(frozen=True)
class Row:
    """One result row: its line (1-based), its cells by header, and the headings above it."""

    line: int
    cells: dict[str, str]
    model: str | None
    section: str | None

    def cell(self, name: str) -> str:
        return self.cells.get(name, "")

    @property
    def shown(self) -> str:
        return f"line {self.line}: {_plain(self.cell('Rig'))} | {_plain(self.cell('Date'))}"


def rows(text: str) -> list[Row]:
    """Every result row of the file's tables, in file order."""
    lines = text.splitlines()
    out: list[Row] = []
    model = section = None
    header: list[str] | None = None
    for i, line in enumerate(lines):
        if line.startswith("## "):
            model, section = _plain(line[3:]), None
        elif line.startswith("### "):
            section = _plain(line[4:])
        if not line.startswith("|"):
            header = None
            continue
        if header is None:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            names = [_plain(c) for c in _cells(line)]
            header = names if _SEPARATOR.match(nxt) else None
            continue
        if _SEPARATOR.match(line) or "Rig" not in header or TPS_HEADER not in header:
            continue
        values = _cells(line)
        out.append(Row(i + 1, dict(zip(header, values, strict=False)), model, section))
    return out


def pick(path: Path, all_rows: list[Row], row: str | None) -> Row:
    """The row ``row`` names: a line number, or words all found in its Rig and Date cells."""
    first, last = all_rows[0].line, all_rows[-1].line
    how = (
        f"name one with --row LINE (its line number, {first}-{last}) or --row 'WORDS' (words of "
        "its Rig and Date cells, e.g. --row '@noonghunna 2026-05-03')"
    )
    if row is None:
        raise BadInputError(
            f"{path.name}: a Club-3090 BENCHMARKS.md with {len(all_rows)} result rows: kit "
            "imports one",
            hint=how,
        )
    if row.strip().isdigit():
        number = int(row)
        found = [r for r in all_rows if r.line == number]
        if not found:
            raise BadInputError(f"{path.name}: line {number} is not a result row", hint=how)
        return found[0]
    terms = row.casefold().split()
    found = [
        r
        for r in all_rows
        if all(t in f"{_plain(r.cell('Rig'))} {_plain(r.cell('Date'))}".casefold() for t in terms)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise BadInputError(f"{path.name}: no result row's Rig and Date match {row!r}", hint=how)
    shown = "; ".join(r.shown for r in found[:8]) + (" ..." if len(found) > 8 else "")
    raise BadInputError(
        f"{path.name}: {len(found)} result rows match {row!r}: {shown}",
        hint="add words, or name one by its line with --row LINE",
    )


def _tps(cell: str, notes: str, warnings: list[str]) -> dict[str, dict[str, float | int]]:
    """Per prompt: wall and decode tok/s, runs, decode CV, by the file's convention: a bare pair
    is mean wall TPS (its Canonical bench section); "(decode, ...; wall a / b)" makes the pair
    decode; "(decode a / b)" adds decode beside the wall pair."""
    plain = _plain(cell)
    head = plain.split("(", 1)[0]
    inner = plain[len(head) :]
    out: dict[str, dict[str, float | int]] = {"narrative": {}, "code": {}}
    pair = _PAIR.search(head)
    if pair is None:
        return out
    if "~" in head:
        warnings.append(f"{TPS_HEADER} {head.strip()!r}: approximate (~) figures")
    headline_is_decode = bool(re.match(r"\(\s*decode\s*[,;)]", inner, re.I))
    key = "decode" if headline_is_decode else "wall"
    for name, value in zip(("narrative", "code"), pair.groups(), strict=True):
        out[name][key] = float(value)
    other = (_WALL_PAIR if headline_is_decode else _DECODE_PAIR).search(inner)
    if other is None and not headline_is_decode:
        other = _NOTES_DECODE.search(_plain(notes))
    if other is not None:
        for name, value in zip(("narrative", "code"), other.groups(), strict=True):
            out[name]["wall" if headline_is_decode else "decode"] = float(value)
    if runs := _RUNS.search(inner):
        for figs in out.values():
            figs["runs"] = int(runs.group(1))
    if headline_is_decode and (cv := _CV.search(inner)):
        for name, value in zip(("narrative", "code"), cv.groups(), strict=True):
            out[name]["cv"] = float(value)
    if ttft := _TTFT.search(_plain(notes)):
        for name, value in zip(("narrative", "code"), ttft.groups(), strict=True):
            out[name]["ttft"] = float(value)
    return out


def _prompts(figs: dict[str, dict[str, float | int]]) -> dict[str, PromptFigures]:
    out = {}
    for name, f in figs.items():
        if not f:
            continue
        runs = f.get("runs")
        out[name] = PromptFigures(
            wall_tps=f.get("wall"),
            decode_tps=f.get("decode"),
            decode_cv_pct=f.get("cv"),
            ttft_ms=f.get("ttft"),
            runs=int(runs) if runs is not None else None,
        )
    return out


def _peak(cell: str, cards: int | None, notes: list[str]) -> float | None:
    """An exact MiB figure per card; a GB figure (GB or GiB, rounded) stays a note."""
    plain = _plain(cell)
    mib = _MIB.search(plain)
    if mib and (cards == 1 or "/card" in plain):
        return float(mib.group(1).replace(",", ""))
    if plain and plain not in ("—", "-", "TBD"):
        notes.append(f"Peak VRAM: {plain!r} (not an exact MiB figure per card: kept as text)")
    return None


_NO_DRAFTER = re.compile(r"^n/a \((no drafter|MTP-off)", re.I)


def _speculative(row: Row, compose: str, notes: str) -> SpecDecode | None:
    """An ``AL`` cell of "n/a (no drafter)" says none ran; else what Compose and Notes name."""
    al = _plain(row.cell("AL"))
    if m := _NO_DRAFTER.match(al):
        return SpecDecode(drafting=False, source=f"the row's AL cell: {m.group(0)!r})")
    return spec_from_text(f"{compose} {notes}", "the row's Compose and Notes")


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read one row of a Club-3090 BENCHMARKS.md."""
    parsed = parse_file(path)
    all_rows = rows(parsed.text)
    if not all_rows:
        raise BadInputError(f"{path.name}: no result row under a {TPS_HEADER!r} header")
    row = pick(path, all_rows, options.row)
    warnings: list[str] = []
    notes = [f"row: {row.shown}"]
    notes_cell = row.cell("Notes")
    prompts = _prompts(_tps(row.cell(TPS_HEADER), notes_cell, warnings))
    if not any(p.wall_tps or p.decode_tps for p in prompts.values()):
        raise BadInputError(
            f"{path.name}: line {row.line}: {TPS_HEADER} is {_plain(row.cell(TPS_HEADER))!r}: "
            "not a narrative / code pair of figures, so kit reads none from it",
            hint="pick a row whose Narr / Code TPS cell holds the two figures",
        )
    compose = _plain(row.cell("Compose"))
    notes.append(f"compose: {compose}")
    rig_cell = row.cell("Rig")
    detail = rig_detail(rig_cell)
    cards = detail.cards if detail else None
    for name in ("Max ctx", "PP tok/s", "KV", "AL", "Per-pos accept", "Per-pos accept (code)"):
        value = _plain(row.cell(name))
        if value and value not in ("—", "-", "TBD"):
            notes.append(f"{name}: {value}")
    date = _DATE.search(row.cell("Date"))
    engine = row.section.rsplit("—", 1)[-1].strip() if row.section and "—" in row.section else None
    quant = _plain(row.cell("Quant")) or None
    runs = next((p.runs for p in prompts.values() if p.runs), None)
    return Imported(
        file=path.name,
        tool=TOOL,
        layout=f"BENCHMARKS.md row (line {row.line})",
        part=f"line-{row.line}",
        date=date.group(1) if date else None,
        model=row.model,
        engine=f"{engine} (the table's heading)" if engine else None,
        quantization=quant,
        hardware=_plain(rig_cell) or None,
        protocol=canonical_protocol(runs),
        prompts=prompts,
        peak_vram_mib=_peak(row.cell("Peak VRAM"), cards, notes),
        kv_cache_dtype=_plain(row.cell("KV")) or None,
        rig_detail=detail,
        speculative=_speculative(row, compose, notes_cell),
        warnings=warnings,
        notes=notes,
    )


READER = Reader(
    tool="club3090 BENCHMARKS.md",
    reads="a row of Club-3090's BENCHMARKS.md (--row LINE or --row 'RIG DATE')",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
    rows=True,
)
