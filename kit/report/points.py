"""A run's load points against a reference's published points (a recipe's
``reference.points``, as ``kit import`` writes them), label by label: each figure both have,
its delta and band, and a verdict per point and overall. Which figures a point has, how each is
banded and which are judged is the figure table's (:data:`kit.figures.POINT_KINDS`).
"""

from __future__ import annotations

from typing import cast

from pydantic import Field

from kit.base import FrozenModel
from kit.bench.load import LoadPoint, Percentiles
from kit.bench.load.summary import completed, latencies_ms
from kit.figures import POINT_KINDS, Kind, Reading
from kit.noise import FLOOR_PCT, MAX_BAND_PCT
from kit.recipe import Reference
from kit.recipe.figures import PointFigure
from kit.report.deltas import MetricDelta, figure_delta
from kit.report.figures import Figure, point_interval_pct
from kit.report.schema import Report
from kit.report.verdict import Verdict, num, unjudgeable

# the published statistic of a latency (kit.recipe.figures.LatencyFigures) for each of the
# table's: its median is the table's p50
_PUBLISHED_STAT = {"mean": "mean", "p50": "median", "p90": "p90", "p99": "p99"}
UNBOUNDED = {"status": "inconclusive", "band_pct": None, "band_from": None}
BAND_RULE = (
    "each figure by the rule of its kind (docs/figures.md): the run point's 95 % interval of "
    "it, the reference's rounding added (a published figure has none); * a judged figure"
)


class PointCheck(FrozenModel):
    """One load point on both sides."""

    label: str = Field(description="The point's label (concurrency-4, rate-2).")
    verdict: Verdict = Field(description="The point's verdict, from its headline figures.")
    summary: str = Field(description="The verdict in one line.")
    figures: list[MetricDelta] = Field(
        description="Every figure both sides define alike: a the reference, b this run."
    )
    not_comparable: list[str] = Field(
        description="The reference's figures this run cannot be compared on, and why."
    )


class PointsVerdict(FrozenModel):
    """A run's load points against a published reference's, label by label."""

    verdict: Verdict = Field(description="REPRODUCED, DIFFERENT, INCONCLUSIVE or NOT COMPARABLE.")
    summary: str = Field(description="The verdict in one line.")
    band: str = Field(description="The band used, and why.")
    definitions: list[str] = Field(
        description="The reference's figures compared with another of kit's, or with none."
    )
    reference_only: str | None = Field(
        description="Why the reference's traffic cannot be re-run (None: it can)."
    )
    points: list[PointCheck] = Field(description="The points both sides have, reference order.")
    only_reference: list[str] = Field(description="The reference's points this run lacks.")
    only_run: list[str] = Field(description="This run's points the reference lacks.")
    inconclusive: list[str] = Field(description="Why no figure can be judged (this run's state).")

    @property
    def worse(self) -> bool:
        """A point the run did not measure, or a headline figure worse or missing."""
        return bool(self.only_reference) or any(
            m.b is None or m.better is False
            for p in self.points
            for m in p.figures
            if m.headline and m.status != "within"
        )

    def text(self) -> str:
        lines = [
            "per point, against the reference: delta = this run - reference, in % of it",
            BAND_RULE,
        ]
        if self.reference_only:
            lines.append(f"reference-only: {self.reference_only}")
        lines += [f"definitions: {d}" for d in self.definitions]
        lines += [f"inconclusive: {why}" for why in self.inconclusive]
        head = f"  {'figure':<17} {'reference':>10} {'this run':>10} {'delta %':>8} {'band ±%':>8}"
        for p in self.points:
            lines += ["", f"{p.label}: {p.summary}", head]
            for m in p.figures:
                name = m.metric if m.unit in m.metric else f"{m.metric} ({m.unit})"
                delta = num(m.delta_pct, "+.1f") if m.delta_pct is not None else "-"
                band = num(m.band_pct, ".1f") if m.band_pct is not None else "-"
                lines.append(
                    f" {'*' if m.headline else ' '}{name:<17} {_shown(m.a):>10} "
                    f"{_shown(m.b):>10} {delta:>8} {band:>8}  {_flag(m)}"
                )
            lines += [f"  NOT COMPARABLE: {why}" for why in p.not_comparable]
        if self.only_reference or self.only_run:
            lines.append("")
        lines += [
            f"{label}: in the reference only, not measured by this run"
            for label in self.only_reference
        ]
        lines += [f"{label}: in this run only" for label in self.only_run]
        lines += ["", f"verdict per point: {self.summary}"]
        return "\n".join(lines)


def _shown(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.2f}" if abs(value) < 100 else num(value)


def _flag(m: MetricDelta) -> str:
    if m.b is None:
        return "NOT MEASURED by this run"
    if m.status == "within":
        return "within"
    if m.status == "outside":
        return f"OUTSIDE ({m.direction}, {'better' if m.better else 'worse'})"
    return f"INCONCLUSIVE ({_unjudged(m)})"


def _unjudged(m: MetricDelta) -> str:
    """Why a figure with both values is neither within nor outside its band."""
    if m.delta_pct is None:
        return "the reference's figure is 0"
    if m.band_pct is None:
        return "too few requests to bound it"
    if m.band_pct > MAX_BAND_PCT:
        return f"band wider than ±{MAX_BAND_PCT:g} %"
    return "this run cannot be judged"


def rounding(value: float) -> float:
    """Half a unit of a published figure's last digit (120.08: 0.005; 168: 0.5)."""
    text = repr(float(value))
    if "e" in text or "." not in text:
        return 0.5
    decimals = len(text.split(".")[1].rstrip("0"))
    return 0.5 * 10.0**-decimals


def _judged(k: Kind, ref: float, run: float | None, half: float | None, void: bool) -> MetricDelta:
    """A reference figure against the run's, by the rule of its kind (docs/figures.md): the
    throughputs by the relative rule, the latencies with an absolute floor. A published figure
    has no interval, so its band is the run point's own 95 % interval (a mean's 1.96 standard
    errors; a percentile's order statistics over the point's requests; none for a throughput,
    one reading a point) plus its rounding. ``void``: the run cannot be judged (INVALID or
    incomplete), so no figure is within or outside."""
    theirs, mine = Figure(k, "", ref), Figure(k, "", run, half)
    m = figure_delta(theirs, mine, Reading(ref, rounding=rounding(ref)), mine.reading())
    if void and m.b is not None:
        return m.model_copy(update={"status": "inconclusive", "better": None})
    if m.delta_pct is None and run is not None:  # a reference figure of 0: no percentage
        return m.model_copy(update=UNBOUNDED)
    return m


def _kit_name(ref: Reference, figure: PointFigure) -> str | None:
    """The figure of kit's points the reference's ``figure`` is compared with (None: none)."""
    d = ref.definitions.get(figure)
    return figure if d is None else d.kit


def _check(ref: Reference, label: str, report: Report, point: LoadPoint, void: bool) -> PointCheck:
    """The reference's point ``label`` against the run's ``point``."""
    theirs = ref.points[label]
    records = report.bench.records if report.bench else []
    values = latencies_ms(completed(records, point.label))
    figures: list[MetricDelta] = []
    unlike: dict[str, str] = {}
    for k in POINT_KINDS:
        field = cast(PointFigure, k.point_field)
        published = getattr(theirs, field)
        if k.point_stat is not None and published is not None:
            published = getattr(published, _PUBLISHED_STAT[k.point_stat])
        if published is None:
            continue
        mine = _kit_name(ref, field)
        title = k.title.split(" ")[0] if k.point_stat else k.title
        if mine is None:
            unlike.setdefault(title, f"{title}: {ref.definitions[field].text}")
            continue
        if k.point_stat is None:
            tps: float | None = getattr(point, mine, None)
            figures.append(_judged(k, published, tps, None, void))
            continue
        pct = getattr(point, mine, None)
        if not isinstance(pct, Percentiles):
            d = ref.definitions.get(field)
            why = d.text if d is not None else f"kit's points have no {field}"
            why += f"; this run's points have no {mine} (written before kit kept it)"
            unlike.setdefault(title, f"{title}: {why}")
            continue
        value: float | None = getattr(pct, k.point_stat)
        half = point_interval_pct(k, value, values.get(mine, []), pct.std, pct.n)
        m = _judged(k, published, value, half, void)
        if half is None and k.point_stat != "mean" and m.status in ("within", "outside"):
            # a percentile the point's requests cannot bound: no band, no judgement
            m = m.model_copy(update={**UNBOUNDED, "better": None})
        figures.append(m)
    verdict, summary = _point_verdict(figures)
    return PointCheck(
        label=label,
        verdict=verdict,
        summary=summary,
        figures=figures,
        not_comparable=list(unlike.values()),
    )


def _point_verdict(figures: list[MetricDelta]) -> tuple[Verdict, str]:
    judged = [m for m in figures if m.headline]
    if not judged:
        return "NOT COMPARABLE", "NOT COMPARABLE: no headline figure both sides define alike"
    missing = [m for m in judged if m.b is None]
    outside = [m for m in judged if m.status == "outside"]
    if missing or outside:
        parts = [
            f"{m.metric} {num(m.delta_pct, '+.1f')} % ({m.direction}, "
            f"{'better' if m.better else 'worse'}; band ±{num(m.band_pct, '.1f')} %)"
            for m in outside
            if m.delta_pct is not None and m.band_pct is not None
        ] + [f"{m.metric} not measured" for m in missing]
        return "DIFFERENT", "DIFFERENT: " + "; ".join(parts)
    open_ = [m for m in judged if m.status != "within"]
    if open_:
        parts = [f"{m.metric}: {_unjudged(m)}" for m in open_]
        return "INCONCLUSIVE", "INCONCLUSIVE: " + "; ".join(parts)
    widest = max(m.band_pct or FLOOR_PCT for m in judged)
    told = (
        f"{len(judged)} headline figures within their bands"
        if len(judged) > 1
        else (f"{judged[0].metric} within its band")
    )
    return "REPRODUCED", f"REPRODUCED: {told} (at most ±{widest:.1f} %)"


def _definitions(ref: Reference) -> list[str]:
    """A line for each reference figure compared with another of kit's, or with none."""
    names = {k.point_field: k.title.split(" ")[0] if k.point_stat else k.title for k in POINT_KINDS}
    out = []
    for figure, d in ref.definitions.items():
        if d.kit is None:
            out.append(f"{names[figure]} not comparable: {d.text}")
        elif d.kit != figure:
            out.append(f"{names[figure]} compared with kit's {d.kit}: {d.text}")
    return out


def compare_points(report: Report, ref: Reference) -> PointsVerdict:
    """The report's load points against ``ref.points``, by label."""
    mine = {p.label: p for p in report.bench.load_points} if report.bench else {}
    void = unjudgeable(report, "this run")
    checks = [
        _check(ref, label, report, mine[label], bool(void)) for label in ref.points if label in mine
    ]
    only_reference = [label for label in ref.points if label not in mine]
    only_run = [label for label in mine if label not in ref.points]
    common = {
        "band": BAND_RULE,
        "definitions": _definitions(ref),
        "reference_only": ref.reference_only,
        "points": checks,
        "only_reference": only_reference,
        "only_run": only_run,
        "inconclusive": void,
    }
    if not checks:
        theirs = ", ".join(ref.points) or "none"
        ours = ", ".join(mine) or "none"
        return PointsVerdict(
            verdict="NOT COMPARABLE",
            summary=f"NOT COMPARABLE: no point of this run has a label of the reference's "
            f"(reference: {theirs}; this run: {ours})",
            **common,
        )
    different = [c.label for c in checks if c.verdict == "DIFFERENT"]
    if different or only_reference:
        parts = []
        if different:
            parts.append(
                f"{len(different)} of {len(checks)} points outside their bands "
                f"({', '.join(different)})"
            )
        if only_reference:
            parts.append(f"{len(only_reference)} not measured ({', '.join(only_reference)})")
        return PointsVerdict(
            verdict="DIFFERENT", summary="DIFFERENT: " + "; ".join(parts), **common
        )
    unsure = [c.label for c in checks if c.verdict == "INCONCLUSIVE"]
    if unsure:
        return PointsVerdict(
            verdict="INCONCLUSIVE",
            summary=f"INCONCLUSIVE: {len(unsure)} of {len(checks)} points cannot be judged "
            f"({', '.join(unsure)})" + (f": {'; '.join(void)}" if void else ""),
            **common,
        )
    alike = [c for c in checks if c.verdict == "REPRODUCED"]
    if not alike:
        return PointsVerdict(
            verdict="NOT COMPARABLE",
            summary="NOT COMPARABLE: no headline figure of any point is defined alike",
            **common,
        )
    unlike = [c.label for c in checks if c.verdict == "NOT COMPARABLE"]
    told = f"all {len(alike)}" if not unlike else f"{len(alike)} of {len(checks)}"
    return PointsVerdict(
        verdict="REPRODUCED",
        summary=f"REPRODUCED: {told} points within their bands"
        + (f"; not comparable: {', '.join(unlike)}" if unlike else ""),
        **common,
    )
