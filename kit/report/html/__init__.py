"""``kit report html``: one self-contained HTML file per report, readable offline: its CSS
inline, its charts as inline SVG drawn by matplotlib, no JavaScript (:func:`render_html`).
"""

from __future__ import annotations

from pathlib import Path

from kit.report.html.figure import PlottingUnavailable, pyplot
from kit.report.html.page import page
from kit.report.schema import Report
from kit.signing import SignatureCheck

__all__ = ["PlottingUnavailable", "html_path", "render_html", "write_html"]


def html_path(report_path: Path) -> Path:
    """The page's default path: beside the report, named after it, so reports sharing a folder
    never share a page (``NAME.json`` -> ``NAME.html``, ``NAME.report.json`` ->
    ``NAME.report.html``, ``report.json`` -> ``report.html``; any other name gets ``.html``
    added)."""
    if report_path.suffix == ".json":
        return report_path.with_suffix(".html")
    return report_path.with_name(report_path.name + ".html")


def render_html(report: Report, check: SignatureCheck) -> str:
    """The page for a report read with its signature check.

    The page holds its CSS inline and its charts as inline SVG drawn by matplotlib (the
    ``html`` extra, imported lazily on the Agg backend): no JavaScript, no fonts, images or
    requests, so nothing can fail in a browser console and the file opens from a mail
    attachment. matplotlib rather than plotly (about 3.5 MB of JavaScript inlined into every
    file, or a CDN request) or vega-lite (its JavaScript runtime inlined as well); vector SVG
    keeps every figure exact and the files small. The output is deterministic (fixed SVG hash
    salt, no date in the metadata).

    The report is read exactly as ``kit report show`` reads it
    (:func:`kit.report.files.read_report`), and the page states the verification result at
    render time: signed by which key fingerprint, valid, untrusted or unsigned."""
    pyplot()  # fail early, before any work, when matplotlib is missing
    return page(report, check)


def write_html(report: Report, check: SignatureCheck, out: Path) -> Path:
    """Write the page to ``out`` (its folder created) and return the path."""
    text = render_html(report, check)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
