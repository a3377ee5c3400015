"""The charts of a sequential run: decode tok/s and TTFT per measured run, the prefill probe,
spec-decode acceptance per draft position, and the GPU timeline. Each returns inline SVG, or
None when the report lacks the data."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kit.bench.plausible import plausible
from kit.bench.stream import RequestRecord
from kit.probe import Unavailable
from kit.report.html.figure import Marks, pyplot, to_svg
from kit.report.html.windows import measured_windows
from kit.report.schema import Report

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
WIDE = (10.5, 4.4)


def _reference(report: Report) -> dict[str, Any]:
    ref = report.recipe.get("reference")
    return ref if isinstance(ref, dict) else {}


def _ref_figure(report: Report, prompt: str, field: str) -> float | None:
    figures = (_reference(report).get("prompts") or {}).get(prompt) or {}
    value = figures.get(field)
    return float(value) if isinstance(value, int | float) else None


def measured(report: Report) -> dict[str, list[RequestRecord]]:
    """Measured records by prompt, in the order the prompts ran; those that are no plausible
    measurement left out (kit.bench.plausible), as every summary leaves them out."""
    out: dict[str, list[RequestRecord]] = {}
    for r in report.bench.records if report.bench else []:
        if r.phase == "measured" and plausible(r):
            out.setdefault(r.prompt, []).append(r)
    return out


def per_run_chart(report: Report, metric: str) -> str | None:
    """Decode tok/s (``decode``) or TTFT in ms (``ttft``) per measured run, one series per
    prompt, its mean ± std as a band and the recipe's reference figure as a dashed line."""
    runs = measured(report)
    if not runs:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=WIDE)
    mark = Marks()
    summaries = {p.prompt: p for p in report.bench.prompts} if report.bench else {}
    drawn = False
    for i, (prompt, records) in enumerate(runs.items()):
        color = COLORS[i % len(COLORS)]
        pts = [(r.index + 1, _value(r, metric), r.usable) for r in records]
        pts = [(x, y, ok) for x, y, ok in pts if y is not None]
        if not pts:
            continue
        drawn = True
        s = summaries.get(prompt)
        stats = (s.decode_tps if metric == "decode" else s.ttft_ms) if s else None
        label = prompt
        if stats is not None and stats.mean is not None:
            std = f" ± {stats.std:.2f}" if stats.std is not None else ""
            unit = "tok/s" if metric == "decode" else "ms"
            label = f"{prompt}: {stats.mean:.2f}{std} {unit} (n={stats.n})"
        good = [(x, y) for x, y, ok in pts if ok]
        bad = [(x, y) for x, y, ok in pts if not ok]
        if good:
            mark(ax.plot(*zip(*good, strict=True), "o-", color=color, label=label, ms=7))
        if bad:
            mark(ax.plot(*zip(*bad, strict=True), "x", color=color, ms=9, mew=2))
            label = f"{prompt}: not usable"
            ax.plot([], [], "x", color=color, label=label)
        if stats is not None and stats.mean is not None:
            mark(ax.axhline(stats.mean, color=color, lw=1, alpha=0.6))
            if stats.std is not None:
                lo, hi = stats.mean - stats.std, stats.mean + stats.std
                mark(ax.axhspan(lo, hi, color=color, alpha=0.12, lw=0))
        ref = _ref_figure(report, prompt, "decode_tps" if metric == "decode" else "ttft_ms")
        if ref is not None:
            mark(
                ax.axhline(ref, color=color, ls="--", lw=1.8, label=f"{prompt}: reference {ref:g}")
            )
    if not drawn:
        plt.close(fig)
        return None
    if metric == "decode":
        ax.set_title("Decode throughput per measured run")
        ax.set_ylabel("decode tokens/s (after the first token)")
    else:
        ax.set_title("Time to first token per measured run")
        ax.set_ylabel("TTFT (ms)")
    ax.set_xlabel("measured run")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.margins(y=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return to_svg(fig, metric)


def _value(r: RequestRecord, metric: str) -> float | None:
    if metric == "decode":
        return r.decode_tps
    return None if r.ttft_s is None else r.ttft_s * 1000


def prefill_chart(report: Report) -> str | None:
    """Prefill tok/s per depth: each run, the mean ± std, and the reference figure."""
    b = report.bench
    done = [p for p in b.prefill if p.status == "measured" and p.prefill_tps] if b else []
    done = [p for p in done if p.prefill_tps is not None and p.prefill_tps.mean is not None]
    if b is None or not done:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.4))
    mark = Marks()
    refs = _reference(report).get("prefill_tps") or {}
    xs = list(range(len(done)))
    for x, p in zip(xs, done, strict=True):
        s = p.prefill_tps
        if s is None or s.mean is None:
            continue
        runs = [
            (r.prompt_tokens or 0) / r.ttft_s
            for r in b.records
            if r.prompt == f"prefill-{p.depth}"
            and r.phase == "prefill"
            and r.ttft_s
            and plausible(r)
        ]
        mark(ax.bar(x, s.mean or 0, width=0.55, color=COLORS[0], alpha=0.35))
        if s.std is not None:
            mark(ax.errorbar(x, s.mean or 0, yerr=s.std, color="black", capsize=6, lw=1.5))
        if runs:
            mark(ax.plot([x] * len(runs), runs, "o", color=COLORS[0], ms=6))
        ttft = p.ttft_ms.mean if p.ttft_ms else None
        text = f"{s.mean:,.0f} tok/s" + (f"\nTTFT {ttft:,.0f} ms" if ttft else "")
        ax.annotate(
            text,
            (x, s.mean or 0),
            xytext=(0, 10),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=10,
        )
        ref = refs.get(str(p.depth), refs.get(p.depth))
        if isinstance(ref, int | float):
            mark(ax.hlines(ref, x - 0.35, x + 0.35, colors=COLORS[1], linestyles="--", lw=2))
    if any(isinstance(v, int | float) for v in refs.values()):
        ax.plot([], [], "--", color=COLORS[1], label="reference")
        ax.legend(loc="upper right", frameon=False)
    ax.set_xticks(xs, [f"{p.depth:,}" for p in done])
    ax.set_xlabel("prompt depth (tokens)")
    ax.set_ylabel("prefill tokens/s (prompt tokens / TTFT)")
    ax.set_title("Prefill probe")
    ax.margins(y=0.3)
    ax.set_ylim(bottom=0)
    return to_svg(fig, "prefill")


def spec_chart(report: Report) -> str | None:
    """Acceptance rate per draft position over all measured windows; for a synthetic run, its
    target rate and the verdict's tolerance at each position (:func:`target_band`)."""
    sd = report.bench.spec_decode if report.bench else None
    if sd is None or not sd.per_position_rate:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    mark = Marks()
    xs = list(range(1, len(sd.per_position_rate) + 1))
    rates = [r * 100 for r in sd.per_position_rate]
    mark(ax.bar(xs, rates, width=0.6, color=COLORS[2], label="achieved"))
    synthetic = _synthetic_target(ax, report, xs, mark)
    for x, r, n in zip(xs, rates, sd.per_position_accepted, strict=False):
        ax.annotate(
            f"{r:.1f}%\n({n:,})",
            (x, r),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=9,
        )
    if max(rates) < 2:
        ax.text(
            0.5,
            0.5,
            "almost no draft tokens were accepted",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=12,
            color="#555555",
        )
    al = f"acceptance length {sd.acceptance_length:.2f}" if sd.acceptance_length else ""
    ax.set_title(
        f"Speculative decoding: acceptance per draft position{'  (' + al + ')' * bool(al)}"
    )
    if synthetic:
        ax.legend(loc="upper right", frameon=False)
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted / draft steps (%)")
    ax.set_xticks(xs)
    ax.set_ylim(0, 118)
    ax.grid(axis="x", visible=False)
    return to_svg(fig, "spec")


def target_band(report: Report) -> list[tuple[float, float, float]]:
    """A synthetic run's target rate per draft position with the verdict's tolerance, in
    percent: (target, lowest, highest). The band is the widest window's (below, plus the steps
    cut short): a rate over all windows, each within its own tolerance, lies within it."""
    check = report.synthetic_acceptance
    if check is None:
        return []
    out = []
    for i, p in enumerate(check.target.rates):
        below = [w.position_tolerance[i] + w.shortfall for w in check.windows]
        above = [w.position_tolerance[i] for w in check.windows]
        lo, hi = p - max(below, default=0.0), p + max(above, default=0.0)
        out.append((p * 100, max(lo, 0.0) * 100, min(hi, 1.0) * 100))
    return out


def _synthetic_target(ax: Any, report: Report, xs: list[int], mark: Marks) -> bool:
    """Draw a synthetic run's target rates and tolerance over the achieved bars."""
    band = target_band(report)
    check = report.synthetic_acceptance
    if not band or check is None:
        return False
    tolerance = "verdict's tolerance (widest window)"
    for x, (p, lo, hi) in zip(xs, band, strict=False):
        if hi > lo:
            ax.bar(x, hi - lo, bottom=lo, width=0.8, color=COLORS[1], alpha=0.15, label=tolerance)
            tolerance = "_"  # labelled once
        mark(ax.hlines(p, x - 0.4, x + 0.4, colors=COLORS[1], linestyles="--", lw=2))
    al = check.target.acceptance_length
    ax.plot([], [], "--", color=COLORS[1], lw=2, label=f"synthetic target (AL {al:.2f})")
    return True


_SERIES = (
    ("power_w", "power (W)"),
    ("sm_clock_mhz", "SM clock (MHz)"),
    ("memory_used_mib", "VRAM used (GiB)"),
    ("temperature_c", "temperature (°C)"),
)


def prefill_spans(report: Report) -> list[tuple[float, float, str]]:
    """The prefill probe's depths as spans on the sampler's clock (from the records' UTC send
    times; the sampler's start is known to the second), for the timeline."""
    s, b = report.gpu_sampling, report.bench
    if s is None or b is None:
        return []
    try:
        t0 = datetime.fromisoformat(s.started_at)
        spans: dict[str, list[float]] = {}
        for r in b.records:
            if r.phase in ("prefill", "prefill_warmup") and r.wall_s is not None:
                start = (datetime.fromisoformat(r.started_at) - t0).total_seconds()
                span = spans.setdefault(r.prompt, [start, start + r.wall_s])
                span[0], span[1] = min(span[0], start), max(span[1], start + r.wall_s)
    except ValueError:  # a time kit did not write: no spans rather than wrong ones
        return []
    return [(a, z, name.replace("-", " ")) for name, (a, z) in spans.items()]


def timeline_chart(report: Report) -> str | None:
    """Power, SM clock, VRAM and temperature of each GPU over the session, the measured
    windows shaded and named, idle and post marks drawn."""
    s = report.gpu_sampling
    if s is None or not s.samples:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(len(_SERIES), 1, figsize=(10.5, 9.0), sharex=True)
    mark = Marks()
    gpus = sorted({x.gpu for x in s.samples})
    measured = measured_windows(report)
    windows = [(w.start_s, w.end_s) for w in measured]
    names = [w.name for w in measured]
    prefill = prefill_spans(report)
    for ax, (field, label) in zip(axes, _SERIES, strict=True):
        for i, gpu in enumerate(gpus):
            pts = [(x.t_s, getattr(x, field)) for x in s.samples if x.gpu == gpu]
            pts = [(t, v) for t, v in pts if not isinstance(v, Unavailable) and v is not None]
            if field == "memory_used_mib":
                pts = [(t, v / 1024) for t, v in pts]
            if pts:
                mark(
                    ax.plot(
                        *zip(*pts, strict=True),
                        color=COLORS[i % len(COLORS)],
                        lw=1.3,
                        label=f"GPU {gpu}",
                    )
                )
        for a, b in windows:
            ax.axvspan(a, b, color="#888888", alpha=0.15, lw=0)
        for a, b, _ in prefill:
            ax.axvspan(a, b, color=COLORS[4], alpha=0.15, lw=0)
        for m in s.marks:
            if m.label in ("idle", "post"):
                ax.axvline(m.t_s, color="#555555", ls=":", lw=1)
        ax.set_ylabel(label)
    top = axes[0]
    spans = [(a, b, name) for (a, b), name in zip(windows, names, strict=True)] + prefill
    for j, (a, b, name) in enumerate(spans):
        top.annotate(
            name,
            ((a + b) / 2, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(0, 3 + 11 * (j % 2)),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=9,
        )
    probe = ", orange: prefill probe" if prefill else ""
    top.set_title(
        f"GPU timeline (grey: measured windows{probe}; dotted: idle / post marks)", pad=30
    )
    if len(gpus) > 1:
        top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes[-1].set_xlabel("seconds since sampling started")
    fig.align_ylabels(axes)
    return to_svg(fig, "timeline")
