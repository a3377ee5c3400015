"""A comparison as text (``kit report compare``): the differences and warnings, a row per
figure, the verdict; a published reference's load points and its plausibility after them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kit.report.show.summary import number
from kit.report.show.trust import sides_label

if TYPE_CHECKING:
    from kit.report.compare import Comparison, MetricDelta


# a figure both sides have whose difference is no finite percentage of A's
NO_PCT = "no percentage of A"


def _differ(aspect: str) -> str:
    return f"{aspect} {'differ' if aspect.endswith('s') else 'differs'}"


def _delta_flag(m: MetricDelta) -> str:
    """within / OUTSIDE (higher, better) / INCONCLUSIVE / band unknown / one side only, or a
    published figure's note (not measured, not comparable)."""
    if m.note is not None:
        return m.note.upper() if m.note.startswith("not measured") else m.note
    if m.a is None or m.b is None:
        return "one side only"
    if m.status is None:
        return "band unknown"
    if m.status == "within":
        return "within"
    if m.status == "inconclusive":
        return f"INCONCLUSIVE ({'band too wide' if m.delta_pct is not None else NO_PCT})"
    way = f"{m.direction}, {'better' if m.better else 'worse'}"
    return f"OUTSIDE ({way})"


def comparison_text(c: Comparison, labels: Mapping[str, str] | None = None) -> str:
    """A comparison as text: the differences and warnings, then one row per figure, then the
    verdict. ``labels`` gives a side ("A", "B") its trust label (:func:`trust_label`): its A:/B:
    line, every metric row and every line of the verdict carry it."""
    labels = labels or {}
    tag = sides_label(labels)
    trust = f"  {tag}" if tag else ""
    lines = [
        f"A: {labels['A'] + ' ' if 'A' in labels else ''}{c.a}",
        f"B: {labels['B'] + ' ' if 'B' in labels else ''}{c.b}",
    ]
    for d in c.differences:
        kind = "forced" if d.refuses else "warning"
        lines.append(f"{kind}: {_differ(d.aspect)}: {d.detail}")
    lines += [f"warning: {w}" for w in c.warnings]
    head = f"{'metric':<32} {'A':>10} {'B':>10} {'delta':>10} {'delta %':>8} {'band ±%':>8}"
    lines += ["", head, "-" * len(head)]
    for m in c.metrics:
        mark = "*" if m.headline else " "
        lines.append(
            f"{mark}{m.metric + ' (' + m.unit + ')':<31} {number(m.a):>10} {number(m.b):>10} "
            f"{number(m.delta, sign=True):>10} {number(m.delta_pct, 1, sign=True):>8} "
            f"{number(m.band_pct, 1):>8}  {_delta_flag(m)}{trust}"
        )
    lines.append("")
    if c.reference:
        lines.append(
            "delta = this run - reference (means, as published); * judged; band = the rule of "
            "the figure's kind with this run's interval, plus the published figure's rounding "
            "(docs/figures.md)"
        )
    else:
        lines.append(
            "delta = B - A (medians of runs; * judged by the verdict); band = the rule of the "
            "figure's kind (docs/figures.md): throughput max(3 %, sqrt(ha² + hb²)) from both "
            "95 % intervals, wider than 10 % inconclusive; latency the same with a floor in ms; "
            "counters their standard errors; memory and energy a tolerance; the soak a threshold"
        )
    if c.verdict is not None:
        title = "this run against the reference" if c.reference else "B as a re-run of A"
        lines += ["", f"{title} (kit.report.reproduction):{trust}"]
        lines += [f"{line}{trust}" if line else line for line in c.verdict.text().splitlines()]
    if c.points is not None:  # a published reference's load points (kit.report.points)
        shown = c.points.text().splitlines()
        lines += ["", *(f"{line}{trust}" if line else line for line in shown)]
    if c.plausibility is not None:  # the bound on the reference's rig (kit.roofline.plausible)
        lines += ["", *c.plausibility.lines()]
    return "\n".join(lines)
