"""A run's load points against a reference's published points (a recipe's
``reference.points``, as ``kit import`` writes them), label by label: each figure both have,
its delta and band, and a verdict per point and overall.

The band is kit's one rule (:func:`kit.noise.band`), the reference adding nothing (a published
figure has no interval): ``max(3 %, h)``, ``h`` the half-width of the run point's own 95 %
interval of the figure (a mean's 1.96 standard errors; a median's or percentile's order
statistics over the point's requests; none for a throughput, one reading a point). The
headline figures judged, as kit's peer check (:mod:`kit.vllm_bench.points`) judges them:
output tok/s and the medians of TTFT, TPOT and ITL. docs/import.md says why.
"""

from __future__ import annotations

from pydantic import Field

from kit.base import FrozenModel
from kit.bench.load import LoadPoint, Percentiles
from kit.bench.load.summary import completed, latencies_ms
from kit.noise import FLOOR_PCT, MAX_BAND_PCT, mean_interval, quantile_interval
from kit.recipe import Reference
from kit.recipe.figures import LatencyFigures, PointFigure
from kit.report.deltas import MetricDelta, figure_delta
from kit.report.figures import Figure
from kit.report.schema import Report
from kit.report.verdict import Verdict, num, unjudgeable

THROUGHPUTS: tuple[tuple[PointFigure, str, str], ...] = (
    ("output_tps", "output tok/s", "tok/s"),
    ("request_throughput", "req/s", "req/s"),
    ("total_tps", "total tok/s", "tok/s"),
)
LATENCIES: tuple[tuple[PointFigure, str], ...] = (
    ("ttft_ms", "TTFT"),
    ("tpot_ms", "TPOT"),
    ("itl_ms", "ITL"),
    ("e2e_ms", "E2E"),
)
# (LatencyFigures' statistic, Percentiles' field, its quantile; None: the mean)
STATISTICS: tuple[tuple[str, str, float | None], ...] = (
    ("mean", "mean", None),
    ("median", "p50", 0.5),
    ("p90", "p90", 0.9),
    ("p99", "p99", 0.99),
)
UNBOUNDED = {"status": "inconclusive", "band_pct": None, "band_from": None}
HEADLINE = frozenset({"output tok/s", "TTFT median", "TPOT median", "ITL median"})
BAND_RULE = (
    f"band = max({FLOOR_PCT:g} %, this run's 95 % interval of the figure at the point), the "
    "reference's figures carrying none (kit.noise); * a headline figure, judged"
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


def _half_pct(interval: tuple[float, float] | None, value: float | None) -> float | None:
    if interval is None or not value:
        return None
    return (interval[1] - interval[0]) / 2 / abs(value) * 100


def _judged(
    kind: tuple[str, str, bool], ref: float, run: float | None, half: float | None, void: bool
) -> MetricDelta:
    """A reference figure against the run's, by the one rule; ``kind`` is the figure's name,
    unit and whether up is better; ``void``: the run cannot be judged (INVALID or incomplete),
    so no figure is within or outside."""
    name, unit, up = kind
    headline = name in HEADLINE
    m = figure_delta(
        Figure(name, unit, up, ref, None, headline), Figure(name, unit, up, run, half, headline)
    )
    if void and m.delta_pct is not None:
        return m.model_copy(update={"status": "inconclusive", "better": None})
    if m.delta_pct is None and run is not None:  # a reference figure of 0: no percentage
        return m.model_copy(update=UNBOUNDED)
    return m


def _kit_name(ref: Reference, figure: PointFigure) -> str | None:
    """The figure of kit's points the reference's ``figure`` is compared with (None: none)."""
    d = ref.definitions.get(figure)
    return figure if d is None else d.kit


def _interval(pct: Percentiles, values: list[float], q: float | None) -> tuple[float, float] | None:
    """The run point's 95 % interval of a statistic: its mean (q None), or its q-quantile."""
    if q is not None:
        return quantile_interval(values, q)
    return mean_interval(pct.mean, pct.std, pct.n) if pct.mean is not None else None


def _check(ref: Reference, label: str, report: Report, point: LoadPoint, void: bool) -> PointCheck:
    """The reference's point ``label`` against the run's ``point``."""
    theirs = ref.points[label]
    records = report.bench.records if report.bench else []
    values = latencies_ms(completed(records, point.label))
    figures: list[MetricDelta] = []
    unlike: list[str] = []
    for field, name, unit in THROUGHPUTS:
        published = getattr(theirs, field)
        if published is None:
            continue
        mine = _kit_name(ref, field)
        if mine is None:
            unlike.append(f"{name}: {ref.definitions[field].text}")
            continue
        tps: float | None = getattr(point, mine, None)
        figures.append(_judged((name, unit, True), published, tps, None, void))
    for field, name in LATENCIES:
        lat: LatencyFigures | None = getattr(theirs, field)
        if lat is None:
            continue
        mine = _kit_name(ref, field)
        pct = getattr(point, mine, None) if mine is not None else None
        if not isinstance(pct, Percentiles):
            d = ref.definitions.get(field)
            why = d.text if d is not None else f"kit's points have no {field}"
            if mine is not None:
                why += f"; this run's points have no {mine} (written before kit kept it)"
            unlike.append(f"{name}: {why}")
            continue
        assert mine is not None
        ordered = sorted(values.get(mine, []))
        for stat, key, q in STATISTICS:
            published = getattr(lat, stat)
            if published is None:
                continue
            value: float | None = getattr(pct, key)
            interval = _interval(pct, ordered, q)
            kind = (f"{name} {stat}", "ms", False)
            m = _judged(kind, published, value, _half_pct(interval, value), void)
            if interval is None and q is not None and m.status in ("within", "outside"):
                # a percentile the point's requests cannot bound: no band, no judgement
                m = m.model_copy(update={**UNBOUNDED, "better": None})
            figures.append(m)
    verdict, summary = _point_verdict(figures)
    return PointCheck(
        label=label, verdict=verdict, summary=summary, figures=figures, not_comparable=unlike
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
    names = {f: n for f, n, _ in THROUGHPUTS} | dict(LATENCIES)
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
