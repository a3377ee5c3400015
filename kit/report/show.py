"""Reports for people: the terminal summary after a run, ``kit report show`` (a table, or a row
of a Club-3090-style Markdown table), and the text of comparisons.

The kernels the engine chose (read from its server log) follow the engine: a row of their own in
the terminal table, a few words after the engine in the Markdown row's engine cell.

A run whose signature was not checked because its key is neither given nor trusted
(``--allow-untrusted``) is labelled UNTRUSTED, and an unsigned one (``--allow-unsigned``)
UNSIGNED (:func:`trust_label`), on every line that shows one of its figures: each line of its
table, its Markdown row, and compare's A:/B: lines, metric rows and verdict lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kit.metrics import Stats
from kit.probe import Unavailable
from kit.report.describe import (
    checkpoint_text,
    engine_text,
    headline_text,
    kernels_text,
    model_text,
    num,
    rig,
    spec_text,
)
from kit.report.figures import prompt_headline
from kit.report.schema import Report
from kit.signing import SignatureCheck

if TYPE_CHECKING:
    from kit.bench.load import LoadPoint
    from kit.report.compare import Comparison, MetricDelta

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
        parts.append("-" if s is None or s.mean is None else f"{s.mean:.0f}")
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
        notes.append(f"{report.energy_per_token_j:.3f} J/token")
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


UNTRUSTED = "UNTRUSTED"
UNSIGNED = "UNSIGNED"
UNVERIFIED = "UNVERIFIED"


def trust_label(check: SignatureCheck | None) -> str | None:
    """The label every figure of a run carries: UNSIGNED, UNTRUSTED (signed by a key neither
    given nor trusted, so not checked), UNVERIFIED (any other signature that is not valid);
    None for a valid signature, or a report not read through a check (``None``)."""
    if check is None or check.valid:
        return None
    if not check.signed:
        return UNSIGNED
    return UNTRUSTED if check.untrusted else UNVERIFIED


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


def signer_text(check: SignatureCheck | None) -> str:
    if check is None:
        return "not checked"
    if not check.signed:
        return "UNSIGNED: nothing shows who wrote it or that it is unaltered"
    if check.valid:
        return f"{check.keyid} (signature verified)"
    if check.untrusted:
        return f"{UNTRUSTED}: {check.reason}"
    if check.valid is None:
        return f"{check.keyid} (claimed; not checked without --key)"
    return f"INVALID: {check.reason}"


def show_table(report: Report, check: SignatureCheck | None = None) -> str:
    """The report for a terminal: who, what, where, then the figures."""
    v = report.validity
    errors = sum(1 for f in v.reasons if f.severity == "error")
    warnings = len(v.reasons) - errors
    validity = "valid" if v.valid else f"INVALID ({errors} error{'s' * (errors != 1)})"
    if warnings:
        validity += f", {warnings} warning{'s' * (warnings != 1)}"
    overrides = f", --set {' '.join(report.recipe_overrides)}" if report.recipe_overrides else ""
    status = report.status + (f": {report.incomplete_reason}" if report.incomplete_reason else "")
    lines = [
        f"recipe    {report.recipe_name} ({report.recipe_file or 'no file'}{overrides}), "
        f"sha256 {report.recipe_sha256[:16]}",
        f"run       {report.run_id}, written {report.created_at} by kit {report.kit_version}",
        f"status    {status}{'' if report.canonical else ' (not canonical)'}",
        f"validity  {validity}",
        f"signer    {signer_text(check)}",
        f"engine    {engine_text(report)}",
    ]
    kernels = kernels_text(report)
    if kernels is not None:
        lines.append(f"kernels   {kernels}")
    lines.append(f"model     {model_text(report)}; spec {spec_text(report)}")
    checkpoint = checkpoint_text(report)
    if checkpoint is not None:
        lines.append(f"checkpoint {checkpoint}")
    lines += _host_lines(report)
    lines += ["", summary_table(report)]
    lines += _sampling_lines(report)
    text = "\n".join(lines)
    label = trust_label(check)
    if label is not None:
        text = "\n".join(f"{label}  {line}" if line else line for line in text.splitlines())
    return text


def _host_lines(report: Report) -> list[str]:
    host = report.host
    r = rig(host)
    if host is None or r is None:
        return ["host      unknown (no host probe in the report)"]
    out = [f"rig       {r.cell}", f"cpu       {r.cpu}"]
    if not host.gpus and host.nvml_error:
        out.append(f"gpus      none: {host.nvml_error}")
    for g in host.gpus:
        p = g.power
        links = [link for link in g.nvlinks if link.active] if isinstance(g.nvlinks, list) else []
        nvlink = f", NVLink {len(links)} active" if links else ""
        out.append(
            f"gpu {g.index}     {num(g.name)}, "
            f"{num(g.memory_total_mib)} MiB, power {num(p.enforced_limit_w, '.0f')} W "
            f"(default {num(p.default_limit_w, '.0f')}, max {num(p.max_limit_w, '.0f')}), "
            f"PCIe Gen{num(g.pcie.gen_max)} x{num(g.pcie.width_max)} "
            f"(GPU max Gen{num(g.pcie.gen_gpu_max)}){nvlink}"
        )
    if isinstance(host.driver.driver_version, str):
        out.append(
            f"driver    {host.driver.driver_version}, CUDA {num(host.driver.cuda_driver_version)}"
        )
    return out


def _sampling_lines(report: Report) -> list[str]:
    s = report.gpu_sampling
    if s is None:
        return []
    if s.unavailable is not None or not s.summaries:
        return [f"  GPUs not sampled: {s.unavailable or 'no readings in the measured window'}"]
    out = ["  VRAM (MiB)  idle     peak     post  growth   PCIe under load   max W  max °C"]
    for g in s.summaries:
        m = g.vram
        out.append(
            f"  GPU {g.gpu:<6} {num(m.idle_mib):>6} {num(m.peak_mib):>8} {num(m.post_mib):>8} "
            f"{num(m.growth_mib):>7}   Gen{num(g.pcie_gen_min_under_load)} "
            f"x{num(g.pcie_width_min_under_load):<10} {num(g.power_max_w, '.0f'):>7} "
            f"{num(g.temperature_max_c):>7}"
        )
    if not isinstance(s.energy_j, Unavailable):
        out.append(f"  GPU energy over the measured window: {s.energy_j:.0f} J")
    return out


# ---------------------------------------------------------------------------------------------
# the summary printed after a run
def _stat(s: Stats | None, digits: int = 2, cv: bool = False) -> str:
    if s is None or s.mean is None:
        return "-"
    text = f"{s.mean:.{digits}f}"
    if cv and s.cv_pct is not None:
        text += f" ({s.cv_pct:.1f}%)"
    return text


def _p(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _load_lines(points: list[LoadPoint]) -> list[str]:
    """One line per load point: throughput, then latency percentiles (p50 / p99, ms)."""
    head = (
        f"  {'point':<16} {'done':>7} {'req/s':>6} {'out tok/s':>9} {'TTFT p50/p99':>13} "
        f"{'TPOT p50/p99':>13} {'ITL p99':>7} {'goodput':>8} {'client CPU':>10}"
    )
    out = [head, "  " + "-" * (len(head) - 2)]
    for pt in points:
        cpu = "-" if pt.client_cpu_pct is None else f"{pt.client_cpu_pct:.0f}%"
        out.append(
            f"  {pt.label:<16} {pt.completed:>3}/{pt.requests:<3} "
            f"{_p(pt.request_throughput, 2):>6} {_p(pt.output_tps, 1):>9} "
            f"{_p(pt.ttft_ms.p50) + '/' + _p(pt.ttft_ms.p99):>13} "
            f"{_p(pt.tpot_ms.p50, 1) + '/' + _p(pt.tpot_ms.p99, 1):>13} {_p(pt.itl_ms.p99, 1):>7} "
            f"{_p(pt.goodput_rps, 2):>8} {cpu:>10}"
        )
    return out


def summary_table(report: Report) -> str:
    """A short table like the reference's, for the terminal."""
    lines = [
        f"kit report {report.run_id}  recipe {report.recipe_name}  "
        f"status {report.status}{'' if report.canonical else '  (not canonical)'}"
    ]
    if report.incomplete_reason:
        lines.append(f"  incomplete: {report.incomplete_reason}")
    b = report.bench
    if b is not None and b.load_points:
        lines += _load_lines(b.load_points)
    if b is not None and b.prompts:
        head = (
            f"  {'prompt':<10} {'runs':>5} {'decode TPS [95% CI]':>26} {'mean (CV)':>18} "
            f"{'wall TPS':>9} {'TTFT ms':>8} {'tokens':>7}"
        )
        lines += [head, "  " + "-" * (len(head) - 2)]
        for p in b.prompts:
            h = prompt_headline(report, p.prompt)
            used = f"{len(h.runs_used)}/{p.measured}" if h else f"{p.usable}/{p.measured}"
            lead = "-"
            if h is not None and h.value is not None:
                lead = f"{h.value:.2f}"
                if h.low is not None and h.high is not None:
                    lead += f" [{h.low:.1f}-{h.high:.1f}]"
            lines.append(
                f"  {p.prompt:<10} {used:>5} {lead:>26} {_stat(p.decode_tps, cv=True):>18} "
                f"{_stat(p.wall_tps):>9} {_stat(p.ttft_ms, 0):>8} "
                f"{_stat(p.completion_tokens, 0):>7}"
            )
        lines.append(
            "  decode TPS: the median of the runs used (held streams left out), with its "
            "bootstrap 95 % interval; mean (CV): all usable runs, as Club-3090 reports them"
        )
    if b is not None:
        for pf in b.prefill:
            if pf.status == "measured":
                lines.append(
                    f"  prefill {pf.depth:>6} tok: {_stat(pf.prefill_tps, 0)} tok/s "
                    f"(TTFT {_stat(pf.ttft_ms, 0)} ms)"
                )
            else:
                lines.append(f"  prefill {pf.depth:>6} tok: {pf.status} ({pf.reason})")
        s = b.spec_decode
        if s is not None:
            rate = f"{s.acceptance_rate * 100:.1f}%" if s.acceptance_rate is not None else "-"
            lines.append(
                f"  spec decode: {s.accepted_tokens}/{s.draft_tokens} draft tokens accepted "
                f"({rate}) in {s.drafts} steps; acceptance length "
                f"{_number(s.acceptance_length)} (1+accepted/drafts), "
                f"{_number(s.accepted_per_draft)} (accepted/drafts)"
            )
    v = report.validity
    lines.append(f"  validity: {'valid' if v.valid else 'INVALID'}")
    lines += [f"    {f.severity}: {f.message}" for f in v.reasons]
    if report.energy_per_token_j is not None:
        lines.append(f"  energy: {report.energy_per_token_j:.3f} J per generated token")
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# comparisons


def _differ(aspect: str) -> str:
    return f"{aspect} {'differ' if aspect.endswith('s') else 'differs'}"


def _number(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _delta_flag(m: MetricDelta) -> str:
    """within / OUTSIDE (higher, better) / INCONCLUSIVE / band unknown / one side only."""
    if m.delta is None:
        return "one side only"
    if m.status is None:
        return "band unknown"
    if m.status == "within":
        return "within noise"
    if m.status == "inconclusive":
        return "INCONCLUSIVE (band too wide)"
    way = f"{m.direction}, {'better' if m.better else 'worse'}"
    return f"OUTSIDE noise ({way})"


def side_labels(checks: Sequence[SignatureCheck | None]) -> dict[str, str]:
    """Sides A and B's trust labels (:func:`trust_label`), given their checks in that order
    (None: a published reference, or not read through a check); those without one left out."""
    out = {}
    for side, check in zip(("A", "B"), checks, strict=True):
        label = trust_label(check)
        if label is not None:
            out[side] = label
    return out


def sides_label(labels: Mapping[str, str]) -> str:
    """The sides' labels as one tag, "UNTRUSTED (A+B)" or "UNTRUSTED (A), UNSIGNED (B)"; ""
    when neither side has one."""
    by_label: dict[str, list[str]] = {}
    for side in ("A", "B"):
        if side in labels:
            by_label.setdefault(labels[side], []).append(side)
    return ", ".join(f"{label} ({'+'.join(sides)})" for label, sides in by_label.items())


def comparison_text(c: Comparison, labels: Mapping[str, str] | None = None) -> str:
    """A comparison as text: the differences and warnings, then one row per figure, then the
    verdict. ``labels`` gives a side ("A", "B") its trust label (:func:`trust_label`): its A:/B:
    line, every metric row and every line of the verdict carry it."""
    labels = labels or {}
    tag = sides_label(labels)
    trust = f"  {tag}" if tag else ""
    lines = [
        f"A: {labels['A'] + ' ' if 'A' in labels else ''}{c.a}",
        f"B: {labels['B'] + ' ' if 'B' in labels else ''}{c.b}",
    ]
    for d in c.differences:
        kind = "forced" if d.refuses else "warning"
        lines.append(f"{kind}: {_differ(d.aspect)}: {d.detail}")
    lines += [f"warning: {w}" for w in c.warnings]
    head = f"{'metric':<32} {'A':>10} {'B':>10} {'delta':>10} {'delta %':>8} {'band ±%':>8}"
    lines += ["", head, "-" * len(head)]
    for m in c.metrics:
        mark = "*" if m.headline else " "
        lines.append(
            f"{mark}{m.metric + ' (' + m.unit + ')':<31} {_number(m.a):>10} {_number(m.b):>10} "
            f"{_number(m.delta, sign=True):>10} {_number(m.delta_pct, 1, sign=True):>8} "
            f"{_number(m.band_pct, 1):>8}  {_delta_flag(m)}{trust}"
        )
    lines.append("")
    if c.reference:
        lines.append("delta = this run - reference; published figures carry no interval")
    else:
        lines.append(
            "delta = B - A of the headlines (medians; * judged by the verdict); band = max(3 %, "
            "sqrt(ha² + hb²)) from both 95 % intervals, wider than 10 % inconclusive (kit.noise)"
        )
    if c.verdict is not None:
        lines += ["", f"B as a re-run of A (kit.report.reproduction):{trust}"]
        lines += [f"{line}{trust}" if line else line for line in c.verdict.text().splitlines()]
    if c.points is not None:  # a published reference's load points (kit.report.points)
        shown = c.points.text().splitlines()
        lines += ["", *(f"{line}{trust}" if line else line for line in shown)]
    if c.plausibility is not None:  # the bound on the reference's rig (kit.roofline.plausible)
        lines += ["", *c.plausibility.lines()]
    return "\n".join(lines)
