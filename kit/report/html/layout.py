"""The page's building blocks: its CSS, tables, a section with its heading, the signature check in
words. Every page kit writes (report, compare, table) shares them."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from html import escape

from kit.probe import Unavailable
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

NOT_MEASURED = "not measured"


def cell(value: object) -> str:
    """A value as escaped cell text: ``-`` for None, ``?`` for an unavailable reading."""
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
            f'<td class="n">{cell(c)}</td>' if i in numeric else f"<td>{cell(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def pairs(rows: Iterable[tuple[str, object]]) -> str:
    """A two-column table of facts, each name in a header cell."""
    body = "".join(f"<tr><th>{escape(k)}</th><td>{cell(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def section(sid: str, title: str, body: str, label: str | None = None) -> str:
    """A section with its heading; ``label`` (UNTRUSTED, UNSIGNED) goes beside the title."""
    tag = f' <span class="trust">{escape(label)}</span>' if label else ""
    return f'<section id="{sid}"><h2>{escape(title)}{tag}</h2>\n{body}\n</section>'


def paragraph(text: str, cls: str | None = None) -> str:
    """One escaped paragraph, with a CSS class when given."""
    attr = f' class="{cls}"' if cls else ""
    return f"<p{attr}>{escape(text)}</p>"


def not_measured(why: str | None) -> str:
    """The plain statement that a figure was not measured, with the report's reason if any."""
    return f'<p class="not-measured">{escape(NOT_MEASURED + (f": {why}" if why else ""))}</p>'


def bullets(items: Iterable[str]) -> str:
    """An escaped list; empty when there is nothing to list."""
    lis = "".join(f"<li>{escape(i)}</li>" for i in items)
    return f"<ul>{lis}</ul>" if lis else ""


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
