"""Where and when warnings hit during the run: kernels the engine compiled while serving (JIT),
and GPU clocks-event reasons read inside a measured window, each with the time and the prompt or
load point where the report records them, and "not recorded" where it does not."""

from __future__ import annotations

from kit.report.html.layout import html_table, paragraph, section
from kit.report.html.windows import ClockEvent, clock_events
from kit.report.jit import place_jit
from kit.report.schema import Report

NOT_RECORDED = "not recorded in the report"


def _jit_rows(report: Report) -> list[tuple[str, str, str, str]]:
    choices = report.server.engine_choices if report.server is not None else None
    if choices is None:
        return []
    placed = place_jit(choices, report.bench.records if report.bench else [])
    rows = [
        (
            "engine JIT compile while serving",
            p.event.kernel,
            f"{p.event.logged_at} (server log)",
            p.request or "outside every measured request",
        )
        for p in [*placed.inside, *placed.outside]
    ]
    when = f"{NOT_RECORDED} (the server log, {choices.source}, has the time)"
    rows += [
        ("engine JIT compile while serving", kernel, when, NOT_RECORDED)
        for kernel in placed.unplaced
    ]
    return rows


def clock_when(e: ClockEvent) -> str:
    """When a clock event was read: seconds since sampling started, and into its first window."""
    span = f"{e.first_s:.1f} s" if e.first_s == e.last_s else f"{e.first_s:.1f}-{e.last_s:.1f} s"
    into = e.first_s - e.first_window.start_s
    return (
        f"{span} after sampling started, first {into:.1f} s into {e.first_window.name} "
        f"({e.readings} reading{'s' * (e.readings != 1)})"
    )


def _clock_rows(report: Report) -> list[tuple[str, str, str, str]]:
    return [
        ("GPU clocks event", f"GPU {e.gpu} {e.reason}", clock_when(e), ", ".join(e.windows))
        for e in clock_events(report)
    ]


def events_section(report: Report, label: str | None = None) -> str | None:
    """A row per warning with a place in the run; None when there is none."""
    jit, clocks = _jit_rows(report), _clock_rows(report)
    rows = [*jit, *clocks]
    if not rows:
        return None
    notes = []
    if clocks and report.gpu_sampling is not None:
        notes.append(
            f"Times are on the GPU sampler's clock (started {report.gpu_sampling.started_at})."
        )
    if any(row[2].startswith(NOT_RECORDED) for row in jit):
        notes.append(
            "For a report written before kit recorded when the engine compiled, or a server "
            "kit did not start, only the kernels' names are known."
        )
    caption = paragraph(" ".join(notes), "muted") if notes else ""
    table = html_table(("warning", "what", "when", "where (prompt or load point)"), rows, (), label)
    return section("events", "Where warnings hit", table + caption, label)
