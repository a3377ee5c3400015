"""The sections of the figures: decode and TTFT per run, the prefill probe, spec decoding, the
GPU timeline (each a chart with its table or caption), the load sweep and the load client's
CPU per point."""

from __future__ import annotations

from html import escape

from kit.metrics import Stats
from kit.report.describe import left_out_text
from kit.report.figures import prompt_headline
from kit.report.html import charts, sweep
from kit.report.html.layout import NOT_MEASURED, html_table, section
from kit.report.schema import Report
from kit.report.validity import CLIENT_BUSY_PCT
from kit.report.verdict import num


def stats_rows(report: Report, label: str | None = None) -> str:
    """Per prompt: the headline decode figure with its interval, mean ± std, CV, TTFT, tokens."""
    b = report.bench
    if b is None or not b.prompts:
        return ""

    def ms(s: object) -> str:
        if not isinstance(s, Stats) or s.mean is None:
            return "-"
        return f"{s.mean:,.2f}" + (f" ± {s.std:,.2f}" if s.std is not None else "")

    def lead(prompt: str) -> str:
        h = prompt_headline(report, prompt)
        if h is None or h.value is None:
            return "-"
        ci = f" [{num(h.low)}-{num(h.high)}]" if h.low is not None and h.high is not None else ""
        held = f" ({left_out_text(h)})" if h.runs_excluded else ""
        return f"{num(h.value, ',.2f')}{ci}{held}"

    return html_table(
        (
            "prompt",
            "usable / measured",
            "decode tok/s: median [95 % CI]",
            "mean ± std (Club-3090)",
            "CV %",
            "TTFT ms",
            "tokens",
        ),
        (
            (
                p.prompt,
                f"{p.usable}/{p.measured}",
                lead(p.prompt),
                ms(p.decode_tps),
                "-" if p.decode_tps.cv_pct is None else f"{p.decode_tps.cv_pct:.2f}",
                ms(p.ttft_ms),
                ms(p.completion_tokens),
            )
            for p in b.prompts
        ),
        numeric={2, 3, 4, 5, 6},
        label=label,
    )


CAPTIONS = {
    "decode": "One point per measured run. Solid line: the mean; band: mean ± 1 std; dashed: "
    "the recipe's reference figure, when it has one; ×: a run that is not usable.",
    "ttft": "Send to the first chunk with text, per measured run; line, band and dashes as above.",
    "prefill": "Bars: mean prefill tokens/s per depth, whiskers ± 1 std, dots the runs; "
    "dashed: the recipe's reference figure, when it has one.",
    "spec": "Share of draft steps whose token at each position was accepted (counts in "
    "brackets), over all measured windows.",
    "timeline": "Every reading of the GPU sampler; the measured windows come from its marks.",
}
PREFILL_SPANS = " The prefill probe's span comes from the records' send times."


def chart_section(
    sid: str, title: str, svg: str | None, extra: str = "", label: str | None = None
) -> str | None:
    """A chart with its caption and ``extra`` (a table); None without the chart."""
    if svg is None:
        return None
    caption = f'<p class="muted">{escape(CAPTIONS[sid])}</p>' if sid in CAPTIONS else ""
    return section(sid, title, svg + caption + extra, label)


def timeline_section(report: Report, label: str | None = None) -> str | None:
    """The GPU timeline; its caption names the prefill probe only when the report has one."""
    svg = charts.timeline_chart(report)
    if svg is None:
        return None
    caption = CAPTIONS["timeline"] + (PREFILL_SPANS if charts.prefill_spans(report) else "")
    return section(
        "timeline", "GPU timeline", svg + f'<p class="muted">{escape(caption)}</p>', label
    )


def prefill_extra(report: Report, label: str | None = None) -> str:
    """Per prefill depth: its status, tok/s, TTFT and why it was not measured, if it was not."""
    b = report.bench
    if b is None:
        return ""
    rows = [
        (
            f"{p.depth:,}",
            p.status,
            "-"
            if not p.prefill_tps or p.prefill_tps.mean is None
            else f"{p.prefill_tps.mean:,.0f}",
            "-" if not p.ttft_ms or p.ttft_ms.mean is None else f"{p.ttft_ms.mean:,.0f}",
            p.reason,
        )
        for p in b.prefill
    ]
    return html_table(
        ("depth (tokens)", "status", "prefill tok/s", "TTFT ms", "reason"), rows, {2, 3}, label
    )


def load_section(report: Report, label: str | None = None) -> str | None:
    """The sweep's charts and a row per load point; None without load points."""
    b = report.bench
    if b is None or not b.load_points:
        return None
    parts = [
        sweep.throughput_chart(report),
        sweep.latency_chart(report),
        sweep.pareto_chart(report),
    ]
    gpus = sweep.gpu_count(report)

    def f(v: float | None, d: int = 1) -> str:
        return "-" if v is None else f"{v:,.{d}f}"

    table = html_table(
        (
            "point",
            "done",
            "out tok/s",
            "per GPU",
            "TTFT p50/p99 ms",
            "TPOT p50/p99 ms",
            "ITL p50/p99 ms",
            "tok/s per user",
            "stop",
        ),
        (
            (
                p.label,
                f"{p.completed}/{p.requests}",
                f(p.output_tps),
                f(None if p.output_tps is None else p.output_tps / gpus),
                f"{f(p.ttft_ms.p50, 0)} / {f(p.ttft_ms.p99, 0)}",
                f"{f(p.tpot_ms.p50)} / {f(p.tpot_ms.p99)}",
                f"{f(p.itl_ms.p50)} / {f(p.itl_ms.p99)}",
                f(1000 / p.tpot_ms.p50 if p.tpot_ms.p50 else None),
                p.stop_reason,
            )
            for p in sorted(b.load_points, key=lambda p: p.level)
        ),
        numeric={2, 3, 4, 5, 6, 7},
        label=label,
    )
    caption = (
        '<p class="muted">Each point is one load level (output tokens/s over the point\'s '
        "window); percentiles are over its completed requests. Interactivity is tokens/s per "
        "user, 1000 / TPOT p50; the Pareto front joins the points no other point beats on both "
        f"throughput per GPU ({gpus} GPU{'s' * (gpus != 1)}) and interactivity.</p>"
    )
    body = "".join(s for s in parts if s) + caption + table
    return section("load", "Load sweep", body, label)


def client_section(report: Report, label: str | None = None) -> str | None:
    """kit's load client's CPU at each load point, in percent of one core, flagged at
    :data:`kit.report.validity.CLIENT_BUSY_PCT` or more; None without load points."""
    b = report.bench
    if b is None or not b.load_points:
        return None

    def busy(pct: float | None) -> str:
        if pct is None:
            return NOT_MEASURED
        return "client may have set the pace" if pct >= CLIENT_BUSY_PCT else "no"

    table = html_table(
        ("point", "client CPU (% of one core)", "saturated"),
        (
            (
                p.label,
                NOT_MEASURED if p.client_cpu_pct is None else f"{p.client_cpu_pct:.1f}",
                busy(p.client_cpu_pct),
            )
            for p in sorted(b.load_points, key=lambda p: p.level)
        ),
        numeric={1},
        label=label,
    )
    caption = (
        "<p class=\"muted\">kit's own CPU time over each point's wall time. At "
        f"{CLIENT_BUSY_PCT:g} % of a core or more the client, not the server, may have set the "
        "pace (raise bench.load.processes).</p>"
    )
    return section("client", "Load client CPU", caption + table, label)
