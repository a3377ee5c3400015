"""The page: sections in a fixed order, each only when the report has its data, as one HTML
string with its CSS inline and its charts as inline SVG. An UNTRUSTED or UNSIGNED run
(:func:`kit.report.show.trust_label`) carries its label in the title, in the heading of every
section with figures and in the first cell of every row of their tables."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from html import escape

from kit.metrics import Stats
from kit.probe import Unavailable
from kit.report.describe import engine_text, kernels_text, model_text, num, rig, spec_text
from kit.report.figures import prompt_headline
from kit.report.html import charts, sweep
from kit.report.schema import Report
from kit.report.show import signer_text, trust_label
from kit.signing import SignatureCheck

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 color:#1b1b1b;background:#fafafa;margin:0}
main{max-width:1100px;margin:0 auto;padding:1.2em 1.5em 3em}
h1{font-size:1.5em;margin:.2em 0 .4em}h2{font-size:1.2em;margin:1.6em 0 .5em;
 border-bottom:1px solid #ddd;padding-bottom:.2em}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:.4em 1.2em 1em;
 margin:1em 0}
table{border-collapse:collapse;margin:.5em 0;font-size:.93em}
th,td{text-align:left;padding:.25em .8em .25em 0;vertical-align:top;border-bottom:1px solid #eee}
th{font-weight:600;color:#444}td.n{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.9em;
 overflow-wrap:anywhere}
.banner{font-size:1.35em;font-weight:700;padding:.4em .7em;border-radius:5px;margin:.5em 0}
.ok{background:#e3f4e5;color:#14532d;border:1px solid #9bd3a4}
.bad{background:#fde2e1;color:#7f1d1d;border:1px solid #f1a19c}
.warnb{background:#fff4d6;color:#6b4a00;border:1px solid #f0cf73}
ul.reasons{list-style:none;padding:0}ul.reasons li{padding:.35em .6em;margin:.3em 0;
 border-radius:4px;border-left:6px solid}
ul.reasons li.error{background:#fde2e1;border-color:#c62828}li.error b{color:#a11}
ul.reasons li.warning{background:#fff8e1;border-color:#e0a800}li.warning b{color:#7a5a00}
svg.chart{width:100%;height:auto;display:block;margin:.6em 0}
.muted{color:#666}
.trust{background:#fff4d6;color:#6b4a00;font-weight:700;border:1px solid #f0cf73;
 border-radius:3px;padding:0 .3em}td.trust{border-radius:0}
"""


def _e(value: object) -> str:
    if isinstance(value, Unavailable):
        return "?"
    return escape(str(value)) if value is not None else "-"


def html_table(
    head: Iterable[str],
    rows: Iterable[Iterable[object]],
    numeric: Collection[int] = (),
    label: str | None = None,
) -> str:
    """A table; with ``label`` (UNTRUSTED, UNSIGNED) a first column carries it on every row."""
    th = "".join(f"<th>{escape(h)}</th>" for h in ((["signature"] if label else []) + [*head]))
    lead = f'<td class="trust">{escape(label)}</td>' if label else ""
    body = "".join(
        "<tr>"
        + lead
        + "".join(
            f'<td class="n">{_e(c)}</td>' if i in numeric else f"<td>{_e(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _pairs(rows: Iterable[tuple[str, object]]) -> str:
    body = "".join(f"<tr><th>{escape(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _section(sid: str, title: str, body: str, label: str | None = None) -> str:
    tag = f' <span class="trust">{escape(label)}</span>' if label else ""
    return f'<section id="{sid}"><h2>{escape(title)}{tag}</h2>\n{body}\n</section>'


def verification(check: SignatureCheck) -> tuple[str, str]:
    """The verification result in a few words and its CSS class."""
    if not check.signed:
        return "UNSIGNED: nothing shows who wrote it or that it is unaltered", "bad"
    if check.valid:
        who = f" (trusted as {check.signer})" if check.signer else ""
        return f"signed by key {check.keyid}{who}: signature VALID", "ok"
    if check.untrusted:
        return f"signed by key {check.keyid}: UNTRUSTED, signature not checked", "warnb"
    return f"signed by key {check.keyid}: verification FAILED ({check.reason})", "bad"


def verdict_section(report: Report, check: SignatureCheck) -> str:
    v = report.validity
    errors = [f for f in v.reasons if f.severity == "error"]
    warnings = [f for f in v.reasons if f.severity != "error"]
    head = "VALID" if v.valid else f"INVALID ({len(errors)} error{'s' * (len(errors) != 1)})"
    if warnings:
        head += f", {len(warnings)} warning{'s' * (len(warnings) != 1)}"
    words, cls = verification(check)
    items = "".join(
        f'<li class="{escape(f.severity)}"><b>{escape(f.severity.upper())}</b> '
        f"<code>{escape(f.code)}</code>: {escape(f.message)}</li>"
        for f in [*errors, *warnings]
    )
    status = report.status + (f": {report.incomplete_reason}" if report.incomplete_reason else "")
    body = (
        f'<div class="banner {"ok" if v.valid else "bad"}" id="verdict-text">Verdict: {head}</div>'
        f'<div class="banner {cls}" id="verification">Verification at render time: '
        f"{escape(words)}</div>"
        + (f'<ul class="reasons">{items}</ul>' if items else "<p>No reasons recorded.</p>")
        + _pairs(
            [
                ("status", status + ("" if report.canonical else " (not canonical)")),
                ("engine", engine_text(report)),
                ("model", model_text(report)),
                ("speculative decoding", spec_text(report)),
                ("kernels", kernels_text(report)),
            ]
        )
    )
    return _section("verdict", "Verdict", body, trust_label(check))


def rig_section(report: Report) -> str | None:
    host = report.host
    r = rig(host)
    if host is None or r is None:
        return None
    rows = []
    for g in host.gpus:
        p = g.power
        links = [x for x in g.nvlinks if x.active] if isinstance(g.nvlinks, list) else []
        rows.append(
            (
                g.index,
                g.name,
                f"{num(g.memory_total_mib)} MiB",
                f"{num(p.enforced_limit_w, '.0f')} W (default {num(p.default_limit_w, '.0f')}, "
                f"max {num(p.max_limit_w, '.0f')})",
                f"Gen{num(g.pcie.gen_max)} x{num(g.pcie.width_max)} "
                f"(GPU max Gen{num(g.pcie.gen_gpu_max)})",
                f"{len(links)} active" if isinstance(g.nvlinks, list) else "not supported",
            )
        )
    gpus = (
        html_table(("GPU", "model", "memory", "power limit", "PCIe", "NVLink"), rows)
        if rows
        else f"<p>No GPU: {_e(host.nvml_error or 'none found')}</p>"
    )
    p2p = ""
    if host.p2p:
        p2p = "<h3>P2P</h3>" + html_table(
            ("from", "to", "read", "write", "NVLink", "atomics"),
            ((x.gpu_a, x.gpu_b, x.read, x.write, x.nvlink, x.atomics) for x in host.p2p),
        )
    if host.topology:
        p2p += "<h3>PCIe topology</h3>" + html_table(
            ("GPU", "GPU", "common ancestor"),
            ((t.gpu_a, t.gpu_b, t.common_ancestor) for t in host.topology),
        )
    isa = ", ".join(host.cpu.isa) if host.cpu.isa else None
    facts = _pairs(
        [
            ("rig", r.cell),
            ("interconnect", r.interconnect or ("single GPU" if r.gpu_count == 1 else None)),
            (
                "driver",
                f"{_e(host.driver.driver_version)}, CUDA {_e(host.driver.cuda_driver_version)}",
            ),
            ("CPU", r.cpu),
            ("ISA", isa),
            ("RAM", f"{num(host.cpu.ram_total_mib)} MiB"),
            ("host", f"{_e(host.hostname)}" + (" (redacted)" if host.redacted else "")),
            ("OS", f"{_e(host.os.name)}, kernel {host.os.kernel}, {host.os.arch}"),
            ("container", host.container.runtime if host.container.detected else "none detected"),
            ("facts from", host.facts_from),
        ]
    )
    return _section("rig", "Rig", gpus + facts + p2p)


def _stats_rows(report: Report, label: str | None = None) -> str:
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
        ci = f" [{h.low:,.1f}-{h.high:,.1f}]" if h.low is not None and h.high is not None else ""
        held = f" ({len(h.runs_excluded)} held left out)" if h.runs_excluded else ""
        return f"{h.value:,.2f}{ci}{held}"

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
    "timeline": "Every reading of the GPU sampler; the measured windows come from its marks, "
    "the prefill probe's span from the records' send times.",
}


def chart_section(
    sid: str, title: str, svg: str | None, extra: str = "", label: str | None = None
) -> str | None:
    if svg is None:
        return None
    caption = f'<p class="muted">{escape(CAPTIONS[sid])}</p>' if sid in CAPTIONS else ""
    return _section(sid, title, svg + caption + extra, label)


def prefill_extra(report: Report, label: str | None = None) -> str:
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
    return _section("load", "Load sweep", body, label)


def provenance_section(report: Report, check: SignatureCheck) -> str:
    words, _ = verification(check)
    rows: list[tuple[str, object]] = [
        ("recipe", f"{report.recipe_name} ({report.recipe_file or 'no file'})"),
        ("recipe sha256", report.recipe_sha256),
        ("--set overrides", " ".join(report.recipe_overrides) or None),
        ("run id", report.run_id),
        ("written", f"{report.created_at} by kit {report.kit_version}"),
        ("signature key fingerprint", check.keyid or "none (unsigned)"),
        ("verification", words),
        ("signer", signer_text(check)),
    ]
    for m in (report.model, report.draft):
        if m is not None:
            rev = m.resolved_revision or m.revision
            name = f"{m.repo_id}@{rev or 'unpinned'}" if m.repo_id else m.source
            arch = f" ({m.architecture})" if m.architecture else ""
            rows.append((f"{m.role} model", f"{name}{arch}; content identity {m.identity}"))
    rows += [(f"pin {p.field}", f"{p.value} ({p.source})") for p in report.pins]
    rows += [(f"version {k}", v) for k, v in sorted(report.versions.items())]
    if report.engine is not None:
        rows.append(
            ("engine", f"{report.engine.name} {report.engine.version} ({report.engine.kind})")
        )
        if report.engine.image:
            rows.append(("engine image", f"{report.engine.image} {report.engine.image_id or ''}"))
    body = _pairs(rows)
    if report.patches is not None:
        body += f"<h3>Patches: {escape(report.patches.series)}</h3>" + html_table(
            ("file", "title", "state", "sha256"),
            ((p.file, p.title, p.state, p.sha256) for p in report.patches.patches),
        )
    if report.notes:
        body += "<h3>Notes</h3><ul>" + "".join(f"<li>{escape(n)}</li>" for n in report.notes)
        body += "</ul>"
    return _section("provenance", "Provenance", body)


def sections(report: Report, check: SignatureCheck) -> list[str]:
    """The page's sections in order, those without data left out; each with figures carries
    the run's trust label (UNTRUSTED, UNSIGNED), if any."""
    label = trust_label(check)
    steps: list[Callable[[], str | None]] = [
        lambda: verdict_section(report, check),
        lambda: rig_section(report),
        lambda: chart_section(
            "decode",
            "Decode throughput",
            charts.per_run_chart(report, "decode"),
            _stats_rows(report, label),
            label,
        ),
        lambda: chart_section(
            "ttft", "Time to first token", charts.per_run_chart(report, "ttft"), label=label
        ),
        lambda: chart_section(
            "prefill",
            "Prefill probe",
            charts.prefill_chart(report),
            prefill_extra(report, label),
            label,
        ),
        lambda: chart_section(
            "spec", "Speculative decoding", charts.spec_chart(report), label=label
        ),
        lambda: chart_section(
            "timeline", "GPU timeline", charts.timeline_chart(report), label=label
        ),
        lambda: load_section(report, label),
        lambda: provenance_section(report, check),
    ]
    return [s for s in (step() for step in steps) if s is not None]


def page(report: Report, check: SignatureCheck) -> str:
    label = trust_label(check)
    title = f"{label + ': ' if label else ''}kit report: {report.recipe_name} ({report.run_id})"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
        f"<h1>{escape(title)}</h1>"
        f'<p class="muted">Written {escape(report.created_at)} by kit '
        f"{escape(report.kit_version)}; rendered offline by kit report html.</p>\n"
        + "\n".join(sections(report, check))
        + "\n</main></body></html>\n"
    )
