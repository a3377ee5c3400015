"""The charts of a load sweep (report.bench.load_points): output tok/s against the level, the
latency percentiles against it, and throughput per GPU against interactivity with its Pareto
front. Interactivity is tokens/s per user: 1000 / TPOT p50 (ms)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kit.figures import POINT_KINDS
from kit.metrics import finite
from kit.recipe.patterns import load_class
from kit.report.describe import rig
from kit.report.html.charts import COLORS
from kit.report.html.figure import Marks, pyplot, to_svg
from kit.report.schema import Report

if TYPE_CHECKING:
    from kit.bench.load import LoadPoint


def _points(report: Report) -> list[LoadPoint]:
    pts = report.bench.load_points if report.bench else []
    return sorted(pts, key=lambda p: p.level)


def level_axis(ax: Any, points: list[LoadPoint], short: bool = False) -> None:
    """The levels as their pattern draws them: on a log axis labelled with the levels run
    (concurrency, in base 2), or as they are (rate); a pattern kit does not know by its name."""
    pattern = load_class(points[0].pattern)
    levels = [p.level for p in points]
    if pattern is not None and pattern.log_base and min(levels) > 0:
        ax.set_xscale("log", base=pattern.log_base)
        ax.set_xticks(levels, [f"{v:g}" for v in levels])
        ax.minorticks_off()
    if pattern is None:
        ax.set_xlabel(points[0].pattern)
    else:
        ax.set_xlabel(pattern.axis_short if short else pattern.axis_label)


def short_label(point: LoadPoint) -> str:
    """A point's name on a chart: c=4, rate 2."""
    pattern = load_class(point.pattern)
    return pattern.short_label(point.level) if pattern is not None else point.label


def gpu_count(report: Report) -> int:
    r = rig(report.host)
    if r is not None and r.gpu_count:
        return r.gpu_count
    tp = (report.recipe.get("server") or {}).get("tensor_parallel_size")
    return tp if isinstance(tp, int) and tp > 0 else 1


def throughput_chart(report: Report) -> str | None:
    points = [p for p in _points(report) if p.output_tps is not None]
    if not points:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10.5, 4.6))
    mark = Marks()
    xs = [p.level for p in points]
    ys = [p.output_tps or 0 for p in points]
    mark(ax.plot(xs, ys, "o-", color=COLORS[0], ms=7, lw=2, label="output tok/s"))
    for x, y in zip(xs, ys, strict=True):
        ax.annotate(
            f"{y:,.0f}", (x, y), xytext=(0, 8), textcoords="offset points", ha="center", fontsize=9
        )
    level_axis(ax, points)
    ax.set_ylabel("output tokens/s (all requests)")
    ax.set_title("Output throughput against load")
    ax.set_ylim(0, max(ys) * 1.18)
    return to_svg(fig, "throughput")


# the medians the chart draws: the table's judged latencies but E2E (kit.figures)
_LATENCIES = tuple(
    (k.figure, k.title.split(" ")[0])
    for k in POINT_KINDS
    if k.point_stat == "p50" and k.figure != "e2e_ms"
)


def latency_chart(report: Report) -> str | None:
    points = _points(report)
    if not points:
        return None
    plt = pyplot()
    # lazy: matplotlib is the html extra (heavy)
    from matplotlib import ticker  # noqa: PLC0415

    fig, axes = plt.subplots(1, 3, figsize=(12.0, 4.4))
    mark = Marks()
    drawn = False
    for ax, (field, name) in zip(axes, _LATENCIES, strict=True):
        for q, color, style in (("p50", COLORS[0], "o-"), ("p99", COLORS[1], "s--")):
            pts = [(p.level, getattr(getattr(p, field), q)) for p in points]
            pts = [(x, y) for x, y in pts if y is not None]
            if pts:
                drawn = True
                mark(ax.plot(*zip(*pts, strict=True), style, color=color, ms=5, label=q))
        values = [y for q in ("p50", "p99") for p in points if (y := getattr(getattr(p, field), q))]
        if values and min(values) > 0 and max(values) / min(values) > 30:
            ax.set_yscale("log")  # one slow tail would flatten the rest on a linear scale
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        level_axis(ax, points, short=True)
        ax.set_title(f"{name} p50 / p99")
        ax.set_ylabel(f"{name} (ms)")
        ax.legend(frameon=False)
    if not drawn:
        plt.close(fig)
        return None
    fig.tight_layout(w_pad=2.5)
    return to_svg(fig, "latency")


def pareto_front(pairs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both axes (higher is better on both), by x."""
    front = [
        (x, y)
        for x, y in pairs
        if not any(x2 >= x and y2 >= y and (x2, y2) != (x, y) for x2, y2 in pairs)
    ]
    return sorted(front)


def pareto_chart(report: Report) -> str | None:
    """Throughput per GPU against tokens/s per user (1000 / TPOT p50), the front drawn."""
    gpus = gpu_count(report)
    rows = [
        (x, y, p)
        for p in _points(report)
        if p.tpot_ms.p50
        and p.output_tps is not None
        # a TPOT next to nothing is no interactivity a chart can place
        and (x := finite(1000 / p.tpot_ms.p50)) is not None
        and (y := finite(p.output_tps / gpus)) is not None
    ]
    if not rows:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10.5, 5.4))
    mark = Marks()
    pairs = [(x, y) for x, y, _ in rows]
    mark(
        ax.plot(
            [x for x, _ in pairs],
            [y for _, y in pairs],
            "o",
            color=COLORS[0],
            ms=8,
            label="load point",
        )
    )
    front = pareto_front(pairs)
    mark(ax.plot(*zip(*front, strict=True), "-", color=COLORS[1], lw=2, label="Pareto front"))
    for i, (x, y, p) in enumerate(rows):  # alternate right / left: neighbours lie close
        ax.annotate(
            short_label(p),
            (x, y),
            xytext=(-9 if i % 2 else 9, 4),
            textcoords="offset points",
            ha="right" if i % 2 else "left",
            va="bottom",
            fontsize=10,
        )
    ax.set_xlabel("interactivity: tokens/s per user (1000 / TPOT p50)")
    ax.set_ylabel(f"output tokens/s per GPU ({gpus} GPU{'s' * (gpus != 1)})")
    ax.set_title("Throughput per GPU against interactivity")
    top, right = max(y for _, y in pairs), max(x for x, _ in pairs)
    ax.set_ylim(0, finite(top * 1.15) or top)
    ax.set_xlim(0, finite(right * 1.15) or right)
    ax.legend(loc="upper right", frameon=False)
    return to_svg(fig, "pareto")
