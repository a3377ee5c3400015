"""``kit report compare A B --html FILE``: the two runs side by side as one offline page.

The page has the report page's style and no script; what it shows: :func:`compare_page`.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from kit.report.compare import Comparison, MetricDelta
from kit.report.describe import engine_text, model_text, rig, spec_text
from kit.report.html.layout import html_table, verification
from kit.report.html.table import head
from kit.report.schema import Report
from kit.report.show import side_labels, sides_label, trust_label
from kit.signing import SignatureCheck

Side = tuple[Report, SignatureCheck] | None

COMPARE_CSS = """
td.worse{background:#fde2e1;color:#7f1d1d;font-weight:600}
td.better{background:#e3f4e5;color:#14532d;font-weight:600}
td.within{color:#14532d}td.unknown{color:#666}
table.sides{table-layout:fixed;width:100%}table.sides th:first-child{width:7em}
table.sides td{overflow-wrap:anywhere}
"""


def _num(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


def _side_rows(label: str, side: Side) -> list[str]:
    if side is None:
        return [label, "the recipe's published reference", "-", "-", "-", "-", "-", "-"]
    report, check = side
    r = rig(report.host)
    words, _ = verification(check)
    v = report.validity
    trust = trust_label(check)
    return [
        label,
        f"{trust + ' ' if trust else ''}{report.run_id} ({report.recipe_name}, "
        f"{report.created_at})",
        r.cell if r else "unknown (no host probe)",
        engine_text(report),
        model_text(report),
        spec_text(report),
        "valid" if v.valid else "INVALID",
        words,
    ]


def _sides(comparison: Comparison, sides: Sequence[Side]) -> str:
    heads = ("", "run", "rig", "engine", "model", "spec", "verdict", "signature")
    cols = [_side_rows(n, s) for n, s in zip(("A", "B"), sides, strict=True)]
    body = "".join(
        f"<tr><th>{escape(h)}</th>" + "".join(f"<td>{escape(c[i])}</td>" for c in cols) + "</tr>"
        for i, h in enumerate(heads)
        if i
    )
    top = "<tr><th></th><th>A</th><th>B</th></tr>"
    return f'<table class="sides">{top}{body}</table>'


def _value(value: float | None, label: str | None) -> str:
    """A figure's cell, led by its side's trust label when it has one."""
    tag = f'<span class="trust">{escape(label)}</span> ' if label and value is not None else ""
    return f'<td class="n">{tag}{_num(value)}</td>'


def _flag(m: MetricDelta) -> tuple[str, str]:
    if m.note is not None:  # a published figure not judged: not measured, not comparable
        return (m.note.upper() if m.note.startswith("not measured") else m.note), "unknown"
    if m.delta is None:
        return "one side only", "unknown"
    if m.status is None:
        return "band unknown", "unknown"
    if m.status == "within":
        return "within", "within"
    if m.status == "inconclusive":
        return "INCONCLUSIVE (band too wide)", "unknown"
    way = "better" if m.better else "worse"
    return f"OUTSIDE ({m.direction}, {way})", way


def _metrics(comparison: Comparison, labels: dict[str, str]) -> str:
    head_cells = ("figure", "unit", "A", "B", "B - A", "delta %", "band ±%", "")
    tag = sides_label(labels)
    rows: list[str] = []
    for m in comparison.metrics:
        flag, cls = _flag(m)
        flag += f"; {tag}" if tag else ""
        cells = [
            f"<td>{escape(m.metric)}{' *' if m.headline else ''}</td>",
            f"<td>{escape(m.unit)}</td>",
            _value(m.a, labels.get("A")),
            _value(m.b, labels.get("B")),
            f'<td class="n">{_num(m.delta, sign=True)}</td>',
            f'<td class="n">{_num(m.delta_pct, 1, sign=True)}</td>',
            f'<td class="n">{_num(m.band_pct, 1)}</td>',
            f'<td class="{cls}">{escape(flag)}</td>',
        ]
        rows.append(f'<tr id="m-{len(rows)}">' + "".join(cells) + "</tr>")
    th = "".join(f"<th>{escape(h)}</th>" for h in head_cells)
    return f'<table id="figures"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def compare_page(comparison: Comparison, sides: Sequence[Side]) -> str:
    """The page for a comparison; ``sides`` are A and B as read (None: a published reference).

    Who each side is (run, rig, engine, model, verdict, signature check), the differences and
    warnings comparability found, then every figure of the comparison with A, B, the delta, the
    delta in percent and its band (the rule of its kind, :mod:`kit.figures`), flagged outside
    (with direction) or within, or inconclusive, and the re-run verdict. A side read UNTRUSTED
    or UNSIGNED (:func:`kit.report.show.trust_label`) has its label in the title, in its column
    of the two runs and beside each of its figures.
    """
    labels = side_labels([s[1] if s is not None else None for s in sides])
    tag = sides_label(labels)
    title = f"{tag + ': ' if tag else ''}kit report compare: " + " vs ".join(
        s[0].run_id if s else "published reference" for s in sides
    )
    notes = [
        f"<li><b>{'forced' if d.refuses else 'warning'}</b>: {escape(d.aspect)} differs: "
        f"{escape(d.detail)}</li>"
        for d in comparison.differences
    ]
    notes += [f"<li><b>warning</b>: {escape(w)}</li>" for w in comparison.warnings]
    parts = [
        head(title, COMPARE_CSS),
        "<main>",
        f"<h1>{escape(title)}</h1>",
        '<p class="muted">Rendered offline by kit report compare --html. Delta = B - A of the '
        "headlines (medians of the runs, held streams left out; * marks the figures the verdict "
        "judges); the noise band is max(3 %, sqrt(ha² + hb²)) from both 95 % intervals, the one "
        "rule of kit report compare and the reproduction verdict; wider than 10 % it is "
        "inconclusive.</p>",
        '<section id="sides"><h2>The two runs</h2>' + _sides(comparison, sides) + "</section>",
    ]
    if notes:
        parts.append(
            '<section id="differences"><h2>Differences and warnings</h2><ul>'
            + "".join(notes)
            + "</ul></section>"
        )
    trust = f' <span class="trust">{escape(tag)}</span>' if tag else ""
    parts.append(
        f'<section id="metrics"><h2>Figures{trust}</h2>'
        + _metrics(comparison, labels)
        + "</section>"
    )
    if comparison.verdict is not None:
        v = comparison.verdict
        cls = "ok" if v.verdict == "REPRODUCED" else "bad"
        figures = html_table(
            ("figure", "A", "B", "delta %", "band %", "from", ""),
            (
                (
                    f.metric,
                    _num(f.original),
                    _num(f.new),
                    _num(f.delta_pct, 1, sign=True),
                    _num(f.band_pct, 1),
                    f.band_from,
                    "within" if f.within else "OUTSIDE",
                )
                for f in v.figures
            ),
            numeric={1, 2, 3, 4},
            label=tag or None,
        )
        causes = "".join(f"<li>{escape(c)}</li>" for c in [*v.causes, *v.not_comparable])
        parts.append(
            f'<section id="verdict"><h2>B as a re-run of A{trust}</h2>'
            f'<div class="banner {cls}" id="verdict-text">verdict: {escape(v.summary)}</div>'
            + figures
            + (f"<ul>{causes}</ul>" if causes else "")
            + "</section>"
        )
    parts.append("</main></body></html>\n")
    return "\n".join(parts)


def write_compare_page(comparison: Comparison, sides: Sequence[Side], out: Path) -> Path:
    """Write the page to ``out`` (its folder created) and return the path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(compare_page(comparison, sides), encoding="utf-8")
    return out
