"""A report's figures, once: what compare tabulates and the reproduction verdict judges.

Each :class:`Figure` has its value (a headline's median where the figure has runs), the
half-width of its interval (kit.noise) and whether it is a **headline** figure, one the
reproduction verdict judges: each prompt's decode tokens/s, each prefill depth's tokens/s and
each load point's output tokens/s. A report written before headlines gets them computed from
its records, the same way. Where a figure has runs it also carries their mean, the Club-3090
statistic published figures use (``kit report compare --reference`` compares means).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kit.bench.plausible import left_out
from kit.bench.stream import RequestRecord
from kit.bench.summary import decode_headline
from kit.metrics import Stats
from kit.noise import Headline, headline
from kit.probe import Unavailable
from kit.report.schema import Report

PEAK_VRAM = "peak VRAM GPU"  # one figure per sampled GPU: "peak VRAM GPU 0", ...


@dataclass(frozen=True)
class Figure:
    """One figure of one report."""

    name: str
    unit: str
    higher_is_better: bool
    value: float | None
    half_width_pct: float | None  # None: a single reading or a counter
    headline: bool  # judged by the reproduction verdict
    mean: float | None = None  # the runs' mean (published figures are means); else the value


def _of(
    h: Headline, name: str, unit: str, up: bool, judged: bool, mean: float | None = None
) -> Figure:
    return Figure(name, unit, up, h.value, h.half_width_pct, judged, mean)


def prompt_headline(report: Report, prompt: str) -> Headline | None:
    """A prompt's decode headline: as stored, or computed from the records."""
    b = report.bench
    if b is None:
        return None
    for p in b.prompts:
        if p.prompt == prompt and p.headline is not None:
            return p.headline
    return decode_headline(prompt, b.records)


def _runs(records: list[RequestRecord], prompt: str, phase: str) -> list[RequestRecord]:
    return [r for r in records if r.prompt == prompt and r.phase == phase]


def _records_headline(
    records: list[RequestRecord], figure: str, value: Callable[[RequestRecord], float | None]
) -> Headline:
    """A headline of ``records``, those that are not plausible measurements left out."""
    runs = {r.index: v for r in records if (v := value(r)) is not None}
    return headline(figure, runs, left_out(records))


def _prompt_figures(report: Report) -> list[Figure]:
    b = report.bench
    out: list[Figure] = []
    for p in b.prompts if b else []:
        decode = prompt_headline(report, p.prompt)
        if decode is not None:
            out.append(
                _of(decode, f"{p.prompt} decode TPS", "tok/s", True, True, _mean(p.decode_tps))
            )
        used = [r for r in _runs(b.records, p.prompt, "measured") if r.usable] if b else []
        wall = _records_headline(used, "wall_tps", lambda r: r.wall_tps)
        ttft = _records_headline(
            used, "ttft_ms", lambda r: r.ttft_s * 1000 if r.ttft_s is not None else None
        )
        out.append(_of(wall, f"{p.prompt} wall TPS", "tok/s", True, False, _mean(p.wall_tps)))
        out.append(_of(ttft, f"{p.prompt} TTFT", "ms", False, False, _mean(p.ttft_ms)))
    return out


def _prefill(r: RequestRecord) -> float | None:
    return r.prompt_tokens / r.ttft_s if r.ttft_s and r.prompt_tokens else None


def _prefill_figures(report: Report) -> list[Figure]:
    b = report.bench
    out: list[Figure] = []
    for pf in b.prefill if b else []:
        if pf.status != "measured":
            continue
        h = pf.headline
        if h is None and b is not None:
            runs = _runs(b.records, f"prefill-{pf.depth}", "prefill")
            h = _records_headline([r for r in runs if r.error is None], "prefill_tps", _prefill)
        if h is not None:
            out.append(_of(h, f"prefill {pf.depth}", "tok/s", True, True, _mean(pf.prefill_tps)))
    return out


def _single(name: str, unit: str, value: float | None, up: bool, judged: bool = False) -> Figure:
    return Figure(name, unit, up, value, None, judged, value)


def _mean(s: Stats | None) -> float | None:
    return s.mean if s is not None else None


def _load_figures(report: Report) -> list[Figure]:
    out: list[Figure] = []
    for pt in report.bench.load_points if report.bench else []:
        out.append(_single(f"{pt.label} output TPS", "tok/s", pt.output_tps, True, True))
        out.append(_single(f"{pt.label} TTFT p50", "ms", pt.ttft_ms.p50, False))
        out.append(_single(f"{pt.label} TPOT p50", "ms", pt.tpot_ms.p50, False))
        out.append(_single(f"{pt.label} E2E p99", "ms", pt.e2e_ms.p99, False))
    return out


def peaks(report: Report) -> dict[int, float]:
    """Each sampled GPU's peak memory in use over the measured window, MiB."""
    s = report.gpu_sampling
    if s is None:
        return {}
    return {
        g.gpu: float(g.vram.peak_mib)
        for g in s.summaries
        if not isinstance(g.vram.peak_mib, Unavailable)
    }


def _other_figures(report: Report) -> list[Figure]:
    out: list[Figure] = []
    s = report.bench.spec_decode if report.bench else None
    if s is not None:
        rate = s.acceptance_rate * 100 if s.acceptance_rate is not None else None
        out.append(_single("acceptance rate", "%", rate, True))
        out.append(_single("acceptance length", "tokens", s.acceptance_length, True))
    for gpu, mib in peaks(report).items():
        out.append(_single(f"{PEAK_VRAM} {gpu}", "MiB", mib, False))
    if report.energy_per_token_j is not None:
        out.append(_single("energy", "J/token", report.energy_per_token_j, False))
    return out


def figures(report: Report) -> list[Figure]:
    """Every figure of a report, in the order compare shows them."""
    return [
        *_prompt_figures(report),
        *_prefill_figures(report),
        *_load_figures(report),
        *_other_figures(report),
    ]
