"""The page: sections in a fixed order, each only when the report has its data, as one HTML
string with its CSS inline and its charts as inline SVG; how an untrusted or synthetic run is
labelled: :func:`page`."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from kit.report.describe import synthetic_label
from kit.report.html import charts
from kit.report.html.about import provenance_section, rig_section, verdict_section
from kit.report.html.crosscheck import crosscheck_section
from kit.report.html.efficiency import energy_section, roofline_section
from kit.report.html.events import events_section
from kit.report.html.harness import harness_section
from kit.report.html.layout import CSS, paragraph
from kit.report.html.peers import peers_section
from kit.report.html.results import (
    chart_section,
    client_section,
    load_section,
    prefill_extra,
    stats_rows,
    timeline_section,
)
from kit.report.schema import Report
from kit.report.show import trust_label
from kit.signing import SignatureCheck


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
            stats_rows(report, label),
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
        lambda: roofline_section(report, label),
        lambda: crosscheck_section(report, label),
        lambda: peers_section(report, label),
        lambda: harness_section(report, label),
        lambda: timeline_section(report, label),
        lambda: energy_section(report, label),
        lambda: events_section(report, label),
        lambda: load_section(report, label),
        lambda: client_section(report, label),
        lambda: provenance_section(report, check),
    ]
    return [s for s in (step() for step in steps) if s is not None]


def synthetic_banner(report: Report) -> str:
    """The banner of a run at a synthetic acceptance (empty for a real-acceptance run)."""
    synthetic = synthetic_label(report)
    if synthetic is None:
        return ""
    return f'<div class="banner warnb" id="synthetic">{escape(synthetic)}</div>' + paragraph(
        "vLLM accepted draft tokens at the stated rates, whatever the tokens were: the speed is "
        "a real measurement at that acceptance, the text generated is not the model's "
        "(docs/synthetic-acceptance.md).",
        "muted",
    )


def page(report: Report, check: SignatureCheck) -> str:
    """The whole page for a report read with its signature check. An UNTRUSTED or UNSIGNED run
    (:func:`kit.report.show.trust_label`) carries its label in the title, in the heading of
    every section with figures and in the first cell of every row of their tables. A run at a
    synthetic acceptance (:func:`kit.report.describe.synthetic_label`) carries its label in a
    banner under the title (:func:`synthetic_banner`)."""
    label = trust_label(check)
    title = f"{label + ': ' if label else ''}kit report: {report.recipe_name} ({report.run_id})"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
        f"<h1>{escape(title)}</h1>"
        + synthetic_banner(report)
        + f'<p class="muted">Written {escape(report.created_at)} by kit '
        f"{escape(report.kit_version)}; rendered offline by kit report html.</p>\n"
        + "\n".join(sections(report, check))
        + "\n</main></body></html>\n"
    )
