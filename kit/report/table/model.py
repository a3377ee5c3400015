"""The results table's model: its columns and sections, a row, a refused file, the table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from kit.base import FrozenModel

HEAD = (
    "verdict",
    "rig",
    "power cap",
    "interconnect",
    "custom all-reduce",
    "KV dtype",
    "max context",
)
TAIL = ("peak VRAM", "acceptance", "date", "key")
DECODE = ("narrative decode TPS", "code decode TPS", "prefill tok/s")
PEAK = ("peak output tok/s", "reached at", "tok/s per stream there")
SINGLE_COLUMNS = (*HEAD, *DECODE, *TAIL)
SWEEP_COLUMNS = (*HEAD, *PEAK, *TAIL)
INVALID_COLUMNS = ("verdict", "kind", *HEAD[1:], *DECODE, *PEAK, *TAIL)
FIGURES = frozenset({*DECODE, *PEAK, "peak VRAM", "acceptance"})
LABELLED = FIGURES | {"verdict"}  # the cells a refused file's label leads
DECODE_NOTE = (
    "One stream at a time (the sequential protocol): decode TPS is each prompt's headline, the "
    "median of its usable measured runs with its 95 % interval, then the Club-3090 mean and CV."
)
SWEEP_NOTE = (
    "Load sweeps: the peak output tok/s summed over every stream in flight, at the load level "
    "named, and the tok/s each stream saw there (1000 / TPOT p50). An aggregate over many "
    "streams, not comparable with single-stream decode."
)
INVALID_NOTE = (
    "Runs whose own validity verdict is INVALID (each code names why; kit report verify "
    "lists them): signed and verified, but their figures are unreliable, so they are kept "
    "apart and never ranked among the valid runs."
)


class Row(FrozenModel):
    """One report in the table's words; every cell is text, with the figures behind it."""

    source: str = Field(description="The report file as given.")
    run_id: str = Field(description="The report's run id.")
    model: str = Field(description="Model, quantization, KV dtype (describe.model_text).")
    engine: str = Field(description="Engine and patches (describe.engine_text).")
    rig: str = Field(description="Card count × model, PCIe generation and lanes per card.")
    gpus: list[str] = Field(description="Each GPU's model name, sorted (empty: a CPU run).")
    kind: Literal["single-stream", "load sweep"] = Field(
        description="Which figures it has: single-stream decode (the sequential protocol), or a "
        "load sweep's peak (no per-prompt runs)."
    )
    valid: bool = Field(description="The report's own validity verdict.")
    cells: dict[str, str] = Field(description="Each column of INVALID_COLUMNS, as text.")
    decode_tps: float | None = Field(
        description="The row's decode figure for sorting: narrative decode TPS, else code."
    )
    sweep_peak_tps: float | None = Field(description="A load sweep's peak output tok/s.")
    peak_vram_mib: int | None = Field(description="The highest peak VRAM of any card, MiB.")

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.model, self.rig, self.engine)

    @property
    def rank(self) -> float | None:
        """The figure it is ranked by in its section: decode TPS, else the sweep's peak."""
        return self.decode_tps if self.kind == "single-stream" else self.sweep_peak_tps


def _groups(rows: Sequence[Row]) -> list[tuple[tuple[str, str, str], list[Row]]]:
    out: dict[tuple[str, str, str], list[Row]] = {}
    for r in rows:
        out.setdefault(r.group, []).append(r)
    return list(out.items())


class Section(FrozenModel):
    """One kind of run with its own columns: valid single-stream decode, valid load-sweep
    peaks, or INVALID runs of either kind (never ranked among the valid ones)."""

    sid: str = Field(description="Its id: single-stream, load-sweep or invalid.")
    title: str = Field(description="Its heading.")
    note: str = Field(description="What its figures are, one paragraph.")
    columns: tuple[str, ...] = Field(description="Its columns, the verdict first.")
    rows: list[Row] = Field(description="Its runs, in the table's order.")

    def groups(self) -> list[tuple[tuple[str, str, str], list[Row]]]:
        return _groups(self.rows)


class Refused(FrozenModel):
    """A report left out of the main rows, and why."""

    source: str = Field(description="The report file as given.")
    label: str = Field(
        description="UNSIGNED, UNTRUSTED (signed by a key not in the key folder) or UNVERIFIED "
        "(an item failed); it leads each of its figure cells."
    )
    reasons: list[str] = Field(description="Each verify item that did not pass, or the key.")
    row: Row | None = Field(description="Its figures, unchecked; None when unreadable.")


class Table(FrozenModel):
    """The verified rows, in group order, and the refused reports."""

    keys_dir: str = Field(description="The key directory given.")
    keys: int = Field(description="Public keys found in it.")
    rows: list[Row] = Field(description="Verified reports, sorted by model, rig, engine, date.")
    refused: list[Refused] = Field(description="Reports that did not verify, in input order.")

    def groups(self) -> list[tuple[tuple[str, str, str], list[Row]]]:
        return _groups(self.rows)

    def sections(self) -> list[Section]:
        """The verified rows by kind, the sections without rows left out."""
        valid = [r for r in self.rows if r.valid]
        out = [
            Section(
                sid="single-stream",
                title="Single-stream decode",
                note=DECODE_NOTE,
                columns=SINGLE_COLUMNS,
                rows=[r for r in valid if r.kind == "single-stream"],
            ),
            Section(
                sid="load-sweep",
                title="Load-sweep peaks",
                note=SWEEP_NOTE,
                columns=SWEEP_COLUMNS,
                rows=[r for r in valid if r.kind == "load sweep"],
            ),
            Section(
                sid="invalid",
                title="INVALID runs",
                note=INVALID_NOTE,
                columns=INVALID_COLUMNS,
                rows=[r for r in self.rows if not r.valid],
            ),
        ]
        return [s for s in out if s.rows]
