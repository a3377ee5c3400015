"""A peer's result file, read back through kit's importer (:mod:`kit.importers`), against
kit's own figures at the same point: each figure of :data:`~kit.peers.schema.FIGURES`, the
figure of kit's each is compared with (as the tool's importer defines it: vLLM's TTFT with
kit's first_chunk_ms), the delta and whether it lies within the tolerance."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from kit.bench.load import LoadPoint, Percentiles
from kit.figures import AGREEMENT_PCT
from kit.importers import Imported, ImportedPoint, read_file
from kit.peers.schema import FIGURES, FigureSpec, KitPoint, PeerFigure
from kit.recipe.figures import Definition, LatencyFigures, PointFigure

# a statistic of ours, by its name in a tool's published LatencyFigures
PUBLISHED = {"p50": "median", "p99": "p99"}


def kit_figures(point: LoadPoint) -> KitPoint:
    """kit's own figures at a point, by FIGURES key, as kit defines them."""
    values: dict[str, float | None] = {}
    for spec in FIGURES:
        value = getattr(point, spec.figure)
        values[spec.key] = getattr(value, spec.stat) if spec.stat else value
    return KitPoint(label=point.label, figures=values)


def read_back(path: Path) -> tuple[Imported, ImportedPoint]:
    """The tool's result file through kit's importer: what it read, and its one point (a file
    of one invocation holds one)."""
    imported = read_file(path)
    return imported, imported.points[0]


def _theirs(spec: FigureSpec, point: ImportedPoint) -> float | None:
    value = getattr(point.figures, spec.figure)
    if spec.stat is None or value is None:
        return value if spec.stat is None else None
    assert isinstance(value, LatencyFigures)
    published: float | None = getattr(value, PUBLISHED[spec.stat])
    return published


def _ours(spec: FigureSpec, kit: LoadPoint, mine: str) -> tuple[float | None, str]:
    """kit's value of figure ``mine`` (a LoadPoint field) at ``spec``'s statistic, and its name;
    a tool's first-chunk TTFT falls back to kit's text TTFT where kit's point has none (a
    prompt's runs: kit keeps first chunks at load points only)."""
    value = getattr(kit, mine, None)
    if value is None and mine == "first_chunk_ms":
        mine, value = "ttft_ms", kit.ttft_ms
    if spec.stat is None:
        return (value if isinstance(value, float | int) else None), mine
    stat = value if isinstance(value, Percentiles) else None
    return (getattr(stat, spec.stat) if stat is not None else None), f"{mine} {spec.stat}"


def compare_figures(
    point: ImportedPoint, definitions: Mapping[PointFigure, Definition], kit: LoadPoint | None
) -> list[PeerFigure]:
    """Each figure of FIGURES: the tool's (from its file), kit's alike-defined one, the delta."""
    out = []
    for spec in FIGURES:
        theirs = _theirs(spec, point)
        d = definitions.get(cast(PointFigure, spec.figure))
        mine = spec.figure if d is None else d.kit
        if mine is None or kit is None:
            ours, named = None, None
        else:
            ours, named = _ours(spec, kit, mine)
        delta = (ours - theirs) / theirs * 100 if ours is not None and theirs else None
        out.append(
            PeerFigure(
                key=spec.key,
                peer=theirs,
                kit=ours,
                compared_with=named if mine is not None else None,
                delta_pct=delta,
                within=abs(delta) <= AGREEMENT_PCT if delta is not None else None,
            )
        )
    return out


def agreement(figures: list[PeerFigure]) -> bool | None:
    """Whether the headline figures compared all lie within (None: none compared)."""
    headline = {s.key for s in FIGURES if s.headline}
    judged = [f.within for f in figures if f.key in headline and f.within is not None]
    return all(judged) if judged else None


def all_agree(verdicts: list[bool | None]) -> bool | None:
    """Every verdict given True (those None left out; None when none is given)."""
    judged = [v for v in verdicts if v is not None]
    return all(judged) if judged else None


def differences(label: str, tool: str, figures: list[PeerFigure]) -> list[str]:
    """A note per headline figure outside the tolerance."""
    titles = {s.key: s for s in FIGURES}
    out = []
    for f in figures:
        spec = titles[f.key]
        if spec.headline and f.within is False and f.delta_pct is not None:
            out.append(
                f"{label}: {tool} {spec.title} {f.peer:.4g} {spec.unit}, kit {f.kit:.4g} "
                f"({f.delta_pct:+.1f} %, outside ±{AGREEMENT_PCT:g} %)"
            )
    return out
