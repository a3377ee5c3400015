"""A sweep's cells: recipes x the values each varied key takes x rig classes, each one whole
``kit reproduce``, kept under ``OUT/<cell>/`` (report.json, cell.log, cell.json; a failed
cell's partial report as report.failed.json).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from pathlib import Path
from typing import Literal

from pydantic import Field

from kit.base import KitModel
from kit.errors import BadInputError

CELL_FILE = "cell.json"
REPORT_FILE = "report.json"
FAILED_REPORT = "report.failed.json"  # what a failed cell's run left, kept
LOG_FILE = "cell.log"
MAX_NAME = 100
_SLUG = re.compile(r"[^a-z0-9.]+")

Status = Literal["done", "failed", "skipped"]


class Cell(KitModel):
    """One run of a sweep."""

    name: str = Field(description="Folder name under the sweep's output, unique in the sweep.")
    recipe: str = Field(description="Recipe file, as given.")
    sets: list[str] = Field(description="--set overrides of this cell, the fixed ones first.")
    rig: str | None = Field(description="Rig class it must run on (None: any).")


class CellResult(KitModel):
    """What became of a cell (OUT/<cell>/cell.json)."""

    cell: Cell = Field(description="The cell.")
    status: Status = Field(description="done, failed, or skipped (a verified report was there).")
    backend: str = Field(description="local, or ray <address>.")
    job_id: str | None = Field(None, description="The Ray job's submission id.")
    error: str | None = Field(None, description="Why it failed.")
    report: str | None = Field(None, description="Its report, relative to the sweep's output.")
    signed_by: str | None = Field(None, description="The report's signing key fingerprint.")


def slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-")


def rig_class(gpus: list[tuple[str, int]], isa: list[str] | None) -> str:
    """The class of a machine from its GPUs (product name, memory MiB each) and CPU ISA, the way
    ``kit fleet resources`` derives it from the host probe: ``1x-nvidia-h200-140g`` (card count,
    model, memory per card in GiB) or, without GPUs, ``cpu-avx512`` / ``cpu-avx2``. On a Ray
    cluster each node offers ``rig:<class>: 1``, so a cell asking for it runs only there, one
    cell at a time per node."""
    if not gpus:
        flags = set(isa or [])
        return "cpu-avx512" if "avx512f" in flags else "cpu-avx2"
    names = {name for name, _ in gpus}
    name = names.pop() if len(names) == 1 else "mixed"
    gib = min(mib for _, mib in gpus) // 1024
    return f"{len(gpus)}x-{slug(name)}-{gib}g"


def _vary(pairs: tuple[str, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadInputError(
                f"--vary {pair!r}: expected KEY=VALUE", hint="e.g. --vary bench.runs=3"
            )
        values = out.setdefault(key.strip(), [])
        if value in values:
            raise BadInputError(f"--vary {pair!r}: the value is given twice")
        values.append(value)
    return out


def _name(recipe: str, varied: list[tuple[str, str]], rig: str | None) -> str:
    parts = [Path(recipe).stem]
    parts += [f"{slug(k.rsplit('.', 1)[-1])}-{slug(v)}" for k, v in varied]
    if rig:
        parts.append(slug(rig.removeprefix("rig:")))
    name = "_".join(p for p in parts if p)
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(json.dumps([recipe, varied, rig]).encode()).hexdigest()[:10]
        name = f"{name[: MAX_NAME - 11]}-{digest}"
    return name


def expand(
    recipes: tuple[str, ...], sets: tuple[str, ...], vary: tuple[str, ...], rigs: tuple[str, ...]
) -> list[Cell]:
    """Every cell, in order: each recipe, each combination of the varied values (the keys in
    the order first given), each rig class (or any rig)."""
    varied = _vary(vary)
    keys = list(varied)
    combos = list(itertools.product(*(varied[k] for k in keys))) if keys else [()]
    cells = []
    for recipe in recipes:
        for combo in combos:
            pairs = list(zip(keys, combo, strict=True))
            for rig in rigs or (None,):
                cells.append(
                    Cell(
                        name=_name(recipe, pairs, rig),
                        recipe=recipe,
                        sets=[*sets, *(f"{k}={v}" for k, v in pairs)],
                        rig=rig.removeprefix("rig:") if rig else None,
                    )
                )
    names = [c.name for c in cells]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadInputError(
            f"two cells would share a folder: {', '.join(twice)}",
            hint="give each recipe file a different name",
        )
    return cells
