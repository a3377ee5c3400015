"""The task harness (``bench.quality.harness``, :mod:`kit.quality.harness`): lm-eval's figures
per task, or why there are none."""

from __future__ import annotations

from kit.report.html.layout import html_table, not_measured, paragraph, section
from kit.report.schema import Report

TITLE = "Task harness (lm-eval)"


def harness_section(report: Report, label: str | None = None) -> str | None:
    """One row per task and metric; "not measured" with the reason when lm-eval gave no
    scores; None when the recipe ran no harness."""
    run = report.harness
    if run is None:
        return None
    if run.error is not None:
        return section("harness", TITLE, not_measured(run.error), label)
    rows = [
        (
            t.task,
            m.metric if m.filter == "none" else f"{m.metric} ({m.filter})",
            f"{m.value:.4g}",
            "-" if m.stderr is None else f"{m.stderr:.2g}",
            "-" if t.docs is None else f"{t.docs} of {t.docs_total}",
            t.n_shot,
        )
        for t in run.tasks
        for m in t.metrics
    ]
    head = ("task", "metric", "value", "stderr", "documents", "shots")
    note = (
        f"lm-eval {run.tool_version or '?'} ({run.settings.model}) against the served "
        f"endpoint after the bench, {run.duration_s:.0f} s; its results file: "
        f"{run.results_file}."
    )
    return section(
        "harness", TITLE, html_table(head, rows, (2, 3, 5), label) + paragraph(note, "muted"), label
    )
