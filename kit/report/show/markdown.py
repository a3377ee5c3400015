"""A run as one row of a Club-3090-style Markdown table (``kit report show --markdown``): the
kernels the engine chose follow the engine in its cell, a few words long."""

from __future__ import annotations

from kit.metrics import Stats
from kit.quality.harness import describe
from kit.report.describe import (
    engine_text,
    headline_text,
    kernels_text,
    model_text,
    rig,
    spec_text,
)
from kit.report.schema import Report
from kit.report.show.trust import trust_label
from kit.report.verdict import num as figure_text
from kit.signing import SignatureCheck

MARKDOWN_COLUMNS = (
    "rig",
    "engine",
    "model / quant",
    "spec",
    "narrative decode TPS",
    "code decode TPS",
    "TTFT (narr / code)",
    "notes",
)


def _decode(report: Report, prompt: str) -> str:
    return headline_text(report, prompt)[0]


def _prompt_stats(report: Report, prompt: str, field: str = "decode_tps") -> Stats | None:
    for p in report.bench.prompts if report.bench else []:
        if p.prompt == prompt:
            stats: Stats = getattr(p, field)
            return stats
    return None


def _ttft(report: Report) -> str:
    parts = []
    for prompt in ("narrative", "code"):
        s = _prompt_stats(report, prompt, "ttft_ms")
        parts.append("-" if s is None or s.mean is None else figure_text(s.mean, ".0f"))
    return " / ".join(parts) + " ms"


def _notes(report: Report) -> str:
    notes = []
    if report.status != "complete":
        notes.append("INCOMPLETE")
    if not report.validity.valid:
        codes = dict.fromkeys(f.code for f in report.validity.reasons if f.severity == "error")
        notes.append(f"INVALID ({', '.join(codes)})")
    if not report.canonical:
        notes.append("not canonical")
    if report.energy_per_token_j is not None:
        notes.append(f"{figure_text(report.energy_per_token_j, '.3f')} J/token")
    if report.harness is not None:
        run = report.harness
        said = "failed" if run.error else ", ".join(describe(t) for t in run.tasks)
        notes.append(f"lm-eval: {said}")
    notes.append(f"kit {report.kit_version}, run {report.run_id}")
    return "; ".join(notes)


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_header() -> str:
    """The header and rule of the Markdown table ``markdown_row`` fills."""
    return (
        "| "
        + " | ".join(MARKDOWN_COLUMNS)
        + " |\n|"
        + "|".join("---" for _ in MARKDOWN_COLUMNS)
        + "|"
    )


def markdown_row(
    report: Report, check: SignatureCheck | None = None, *, header: bool = False
) -> str:
    """One row in the style of Club-3090's BENCHMARKS.md; with ``header``, the header first.
    An untrusted run's row starts with UNTRUSTED and the signer's keyid, an unsigned one's with
    UNSIGNED."""
    r = rig(report.host)
    kernels = kernels_text(report, short=True)
    cell = r.cell if r is not None else "unknown (no host probe)"
    label = trust_label(check)
    if label is not None and check is not None and check.signed:
        cell = f"{label} (signed by {check.keyid}): {cell}"
    elif label is not None:
        cell = f"{label}: {cell}"
    cells = [
        cell,
        engine_text(report) + (f"; {kernels}" if kernels else ""),
        model_text(report),
        spec_text(report),
        _decode(report, "narrative"),
        _decode(report, "code"),
        _ttft(report),
        _notes(report),
    ]
    row = "| " + " | ".join(_md(c) for c in cells) + " |"
    return f"{markdown_header()}\n{row}" if header else row
