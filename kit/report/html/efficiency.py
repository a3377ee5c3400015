"""How close decode came to what the hardware allows and what it cost: the roofline (decode
against the memory-bandwidth bound) and the GPU energy per generated token."""

from __future__ import annotations

from kit.probe import Unavailable
from kit.report.html.layout import (
    NOT_MEASURED,
    bullets,
    html_table,
    not_measured,
    paragraph,
    section,
)
from kit.report.html.windows import measured_windows, window_joules
from kit.report.schema import Report
from kit.roofline import Roofline


def _f(value: float | None, digits: int = 1) -> str:
    return NOT_MEASURED if value is None else f"{value:,.{digits}f}"


def _why(report: Report, prefix: str) -> str | None:
    """The report's note saying why a stage failed (``roofline failed: ...``), if any."""
    return next((n for n in report.notes if n.startswith(prefix)), None)


def _bandwidth(roof: Roofline) -> str:
    bw = roof.bandwidth
    sheet = f"; datasheet {bw.datasheet_gbps:,.0f} GB/s" if bw.datasheet_gbps else ""
    text = f"Bandwidth: {bw.used_gbps:,.0f} GB/s per GPU ({bw.used_source}{sheet})"
    if bw.measure_error:
        text += f"; measured bandwidth {NOT_MEASURED}: {bw.measure_error}"
    spec = "" if roof.spec_method == "none" else f", speculative {roof.spec_method}"
    return text + f"; tensor parallel {roof.tensor_parallel_size}{spec}."


def roofline_section(report: Report, label: str | None = None) -> str | None:
    """Per prompt: the measured decode tok/s, the memory-bandwidth bound and the fraction of it
    achieved, with and without the draft's passes. "not measured" with the report's reason
    when the roofline failed; None when the report has neither."""
    roof = report.roofline
    if roof is None:
        why = _why(report, "roofline failed")
        return None if why is None else section("roofline", "Roofline", not_measured(why), label)
    table = html_table(
        (
            "prompt",
            "measured decode tok/s",
            "bound tok/s",
            "achieved % of bound",
            "bound without draft tok/s",
            "achieved % without draft",
            "context tokens",
            "step bound ms",
        ),
        (
            (
                p.prompt,
                _f(p.measured_decode_tps),
                _f(p.bound_tps),
                _f(p.efficiency_pct),
                _f(p.plain_bound_tps),
                _f(p.plain_efficiency_pct),
                f"{p.context_tokens:,.0f}",
                f"{p.step_bound_ms:.3f}",
            )
            for p in roof.prompts
        ),
        numeric={1, 2, 3, 4, 5, 6, 7},
        label=label,
    )
    body = (
        paragraph(_bandwidth(roof))
        + table
        + paragraph(f"Formula: {roof.formula}", "muted mono")
        + bullets(roof.notes)
    )
    return section("roofline", "Roofline: decode against the memory-bandwidth bound", body, label)


def _window_rows(report: Report) -> list[tuple[str, str, str, str, str]]:
    """Per measured window: its name, seconds, joules, tokens and J/token (see
    :func:`energy_section` for the formula)."""
    s = report.gpu_sampling
    if s is None:
        return []
    rows = []
    for w in measured_windows(report):
        joules = window_joules(s, w)
        if isinstance(joules, Unavailable):
            energy, per = f"{NOT_MEASURED}: {joules.reason}", NOT_MEASURED
        else:
            energy = f"{joules:,.0f}"
            per = f"{joules / w.tokens:.3f}" if w.tokens else NOT_MEASURED
        tokens = f"{w.tokens:,}" if w.tokens is not None else NOT_MEASURED
        rows.append((w.name, f"{w.end_s - w.start_s:.1f}", energy, tokens, per))
    return rows


def energy_section(report: Report, label: str | None = None) -> str | None:
    """GPU energy per generated token: the report's own figure when it has one, and one per
    measured window computed here from the sampler's readings.

    For a window ``w`` (a prompt's measured runs, or one load point) and the sampled GPUs ``g``:
    ``J/token(w) = sum_g E_g(w) / tokens(w)``, where ``E_g(w)`` is GPU ``g``'s energy counter
    delta between its first and last reading inside ``w`` (or, without the counter, the
    trapezoid rule over its power readings: ``sum (P_i + P_i+1) / 2 * (t_i+1 - t_i)``) and
    ``tokens(w)`` the tokens generated in it (a load point's output tokens; a prompt's measured
    runs' completion tokens). The report's own figure (``energy_per_token_j``) spans from the
    first measured request to the last, warm-ups between prompts included, so it differs a
    little from these. Without GPU sampling there is no section; where the sampler read no
    energy, "not measured" with its reason.
    """
    s = report.gpu_sampling
    if s is None:
        return None
    parts = []
    if report.energy_per_token_j is not None:
        parts.append(
            paragraph(
                f"{report.energy_per_token_j:.3f} J per generated token over the measured span "
                "(the report's figure: GPU energy from the first measured request to the end of "
                "the last, over the tokens generated in that span)."
            )
        )
    rows = _window_rows(report)
    if rows and any(r[4] != NOT_MEASURED for r in rows):
        parts.append(
            html_table(
                ("measured window", "seconds", "GPU energy J", "tokens", "J/token"),
                rows,
                numeric={1, 2, 3, 4},
                label=label,
            )
        )
        parts.append(
            paragraph(
                "Per window: the energy of every sampled GPU between its first and last reading "
                "in the window (energy counter, else power over time) over the tokens "
                "generated in it; computed from the report's readings.",
                "muted",
            )
        )
    if not parts:
        why = s.energy_j.reason if isinstance(s.energy_j, Unavailable) else s.unavailable
        parts.append(not_measured(why))
    return section("energy", "Energy per token", "".join(parts), label)
