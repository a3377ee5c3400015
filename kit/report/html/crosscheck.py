"""The peer tool's cross-check: vLLM's own ``vllm bench serve`` against the same server, its
figures beside kit's, whether they agree and within what tolerance (:mod:`kit.vllm_bench`)."""

from __future__ import annotations

from kit.figures import AGREEMENT_PCT
from kit.report.html.layout import (
    NOT_MEASURED,
    bullets,
    html_table,
    not_measured,
    paragraph,
    section,
)
from kit.report.schema import Report
from kit.vllm_bench import TTFT_TOLERANCE_MS, VllmBench
from kit.vllm_bench.points import AGREEMENT, PointFigure

TITLE = "Cross-check: vllm bench serve"


def agree_text(agree: bool | None) -> str:
    """``agree: true``, ``agree: false``, or not comparable (None)."""
    if agree is None:
        return "not comparable"
    return f"agree: {str(agree).lower()}"


def tolerance_text(vb: VllmBench) -> str:
    """The rule the ``agree`` verdicts apply, per prompt or per load point."""
    if vb.points:
        return f"{', '.join(AGREEMENT)} each within ±{AGREEMENT_PCT:g} % of vLLM's"
    return (
        f"decode tok/s within ±{AGREEMENT_PCT:g} % of vLLM's comparable figure and mean "
        f"TTFT within ±{TTFT_TOLERANCE_MS:g} ms"
    )


def _f(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return NOT_MEASURED
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


def _prompt_table(vb: VllmBench, label: str | None) -> str:
    return html_table(
        (
            "prompt",
            "verdict",
            "kit decode tok/s",
            "vLLM decode tok/s",
            "Δ %",
            "kit TTFT ms",
            "vLLM TTFT ms",
            "Δ ms",
            "error",
        ),
        (
            (
                p.prompt,
                agree_text(p.agree),
                _f(p.kit_decode_tps),
                _f(p.decode_tps),
                _f(p.decode_delta_pct, sign=True),
                _f(p.kit_ttft_ms),
                _f(p.mean_ttft_ms),
                _f(p.ttft_delta_ms, sign=True),
                p.error,
            )
            for p in vb.prompts
        ),
        numeric={2, 3, 4, 5, 6, 7},
        label=label,
    )


def figure_text(f: PointFigure) -> str:
    """A load point's figure as 'kit / vLLM (Δ %)'."""
    delta = "" if f.delta_pct is None else f" ({f.delta_pct:+.2f} %)"
    return f"{_f(f.kit)} / {_f(f.vllm)}{delta}"


def _point_table(vb: VllmBench, label: str | None) -> str:
    names = list(dict.fromkeys(f.figure for p in vb.points for f in p.figures))
    rows = []
    for p in vb.points:
        by = {f.figure: f for f in p.figures}
        cells = [figure_text(by[n]) if n in by else NOT_MEASURED for n in names]
        rows.append((p.label, agree_text(p.agree), *cells, p.error))
    head = ("point", "verdict", *(f"{n}: kit / vLLM (Δ %)" for n in names), "error")
    return html_table(head, rows, label=label)


def crosscheck_section(report: Report, label: str | None = None) -> str | None:
    """Whether kit and ``vllm bench serve`` agree, with both figures and the tolerance; "not
    measured" when the recipe asked for the cross-check and the report holds none (with the
    report's reason when it has one); None when it was not asked for."""
    vb = report.vllm_bench
    if vb is None:
        asked = (report.recipe.get("bench") or {}).get("vllm_bench") is not None
        why = next((n for n in report.notes if "vllm bench serve failed" in n), None)
        if why is None and not asked:
            return None
        if why is None:
            why = "the recipe asked for it and the report holds no result"
            if report.status == "incomplete":
                why += f" (the run is incomplete: {report.incomplete_reason or 'no reason'})"
        return section("crosscheck", TITLE, not_measured(why), label)
    verdict = agree_text(vb.agree)
    cls = "ok" if vb.agree else ("bad" if vb.agree is False else "warnb")
    body = (
        f'<div class="banner {cls}" id="crosscheck-agree">{verdict}</div>'
        + paragraph(f"Tolerance: {tolerance_text(vb)}.")
        + (_point_table(vb, label) if vb.points else _prompt_table(vb, label))
        + bullets(vb.notes)
        + paragraph(f"{vb.tool}. Definitions: {vb.definitions}.", "muted")
    )
    return section("crosscheck", TITLE, body, label)
