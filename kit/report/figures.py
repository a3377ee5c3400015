"""A report's figures, once: each a row of kit.figures' table with its value in this report and
what bounds it (a 95 % interval, a counter's standard error, a threshold's limit). Compare
tabulates every one; the reproduction verdict judges those the table marks judged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from kit.bench.load.summary import completed, latencies_ms
from kit.bench.plausible import left_out
from kit.bench.stream import RequestRecord
from kit.bench.summary import decode_headline
from kit.figures import KINDS, POINT_KINDS, Kind, Reading, kind, read_point
from kit.metrics import SpecDecode, Stats
from kit.noise import Headline, headline, mean_interval, quantile_interval
from kit.probe import Unavailable
from kit.report.schema import Report

PEAK_VRAM = "peak VRAM GPU"  # one figure per sampled GPU: "peak VRAM GPU 0", ...
MIB = 1024 * 1024
_QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


@dataclass(frozen=True)
class Figure:
    """One figure of one report: its row of the table, where in the report (``label``: a
    prompt, a prefill depth, a load point, a card, a depth; empty for a figure a report has
    once), its value and what bounds it."""

    kind: Kind
    label: str
    value: float | None
    half_width_pct: float | None = None  # a 95 % interval's half-width, % of the value
    se: float | None = None  # a counter figure's standard error
    mean: float | None = None  # the runs' mean (published figures are means); else the value
    mean_half_width_pct: float | None = None
    limit: float | None = None  # a threshold figure's limit (the recipe's)

    @property
    def name(self) -> str:
        """'narrative decode TPS', 'prefill 10000', 'concurrency-4 TTFT p50', 'peak VRAM GPU 0',
        'acceptance rate', 'TTFT at depth 1024', 'soak memory growth'."""
        k = self.kind
        if k.source == "prefill":
            return f"prefill {self.label}"
        if k.key == "peak_vram_mib":
            return f"{PEAK_VRAM} {self.label}"
        if k.source == "soak":
            return f"soak {k.title}"
        if k.source == "context" and self.label:
            return f"{k.title} {self.label}"
        return f"{self.label} {k.title}" if self.label else k.title

    @property
    def unit(self) -> str:
        return self.kind.unit

    @property
    def higher_is_better(self) -> bool:
        return self.kind.higher_is_better

    @property
    def headline(self) -> bool:
        """Judged by the reproduction verdict (the table's ``judged``)."""
        return self.kind.judged

    def reading(self, *, of_mean: bool = False) -> Reading:
        """This figure's reading for a band; ``of_mean``: its mean, against a published mean."""
        if of_mean:
            return Reading(self.mean, self.mean_half_width_pct, self.se, limit=self.limit)
        return Reading(self.value, self.half_width_pct, self.se, limit=self.limit)


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


def _half_pct(interval: tuple[float, float] | None, value: float | None) -> float | None:
    if interval is None or not value:
        return None
    half = (interval[1] - interval[0]) / 2 / abs(value) * 100
    return half if math.isfinite(half) else math.inf


def _mean_half(s: Stats | None) -> float | None:
    if s is None or s.mean is None:
        return None
    return _half_pct(mean_interval(s.mean, s.std, s.n), s.mean)


def _from(k: Kind, label: str, h: Headline, s: Stats | None) -> Figure:
    mean = s.mean if s is not None else None
    return Figure(k, label, h.value, h.half_width_pct, None, mean, _mean_half(s))


def _prompt_figures(report: Report) -> list[Figure]:
    b = report.bench
    out: list[Figure] = []
    for p in b.prompts if b else []:
        decode = prompt_headline(report, p.prompt)
        if decode is not None:
            out.append(_from(kind("decode_tps"), p.prompt, decode, p.decode_tps))
        used = [r for r in _runs(b.records, p.prompt, "measured") if r.usable] if b else []
        wall = _records_headline(used, "wall_tps", lambda r: r.wall_tps)
        ttft = _records_headline(
            used, "ttft_ms", lambda r: r.ttft_s * 1000 if r.ttft_s is not None else None
        )
        out.append(_from(kind("wall_tps"), p.prompt, wall, p.wall_tps))
        out.append(_from(kind("ttft_ms"), p.prompt, ttft, p.ttft_ms))
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
            out.append(_from(kind("prefill_tps"), str(pf.depth), h, pf.prefill_tps))
    return out


def point_interval_pct(
    k: Kind, value: float | None, values: list[float], std: float | None, n: int
) -> float | None:
    """The half-width of a load point figure's 95 % interval, in percent of its value: a
    percentile's distribution-free order-statistic interval over the point's requests (its ITL
    over every gap), a mean's 1.96 standard errors; None for a throughput (one reading a point)
    and where too few requests bound it."""
    if k.point_stat is None or value is None:
        return None
    if k.point_stat == "mean":
        return _half_pct(mean_interval(value, std, n), value)
    q = _QUANTILES.get(k.point_stat)
    return _half_pct(quantile_interval(sorted(values), q), value) if q is not None else None


def _load_figures(report: Report) -> list[Figure]:
    b = report.bench
    out: list[Figure] = []
    for pt in b.load_points if b else []:
        values = latencies_ms(completed(b.records, pt.label)) if b else {}
        for k in POINT_KINDS:
            value = read_point(pt, k)
            if value is None and k.point_stat is not None:
                continue  # a latency the point does not keep (written before kit kept it)
            pct = getattr(pt, k.point_field or "", None) if k.point_stat else None
            std = getattr(pct, "std", None)
            n = getattr(pct, "n", 0) or 0
            half = point_interval_pct(k, value, values.get(k.point_field or "", []), std, n)
            out.append(Figure(k, pt.label, value, half))
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


def step_sd(sd: SpecDecode) -> float | None:
    """The standard deviation of a step's accepted tokens from the per-position counts (the
    events 'the first i accepted' nest: E[A²] = Σ (2i - 1) p_i)."""
    if not sd.drafts or not sd.per_position_accepted:
        return None
    rates = [a / sd.drafts for a in sd.per_position_accepted]
    first = sum(rates)
    second = sum((2 * i - 1) * p for i, p in enumerate(rates, start=1))
    return math.sqrt(max(second - first * first, 0.0))


def acceptance_figures(sd: SpecDecode) -> list[Figure]:
    """The counters' figures, each with its standard error over the steps counted."""
    sdev = step_sd(sd)
    se = sdev / math.sqrt(sd.drafts) if sdev is not None and sd.drafts else None
    k = len(sd.per_position_accepted) or None
    rate = sd.acceptance_rate * 100 if sd.acceptance_rate is not None else None
    rate_se = se / k * 100 if se is not None and k else None
    return [
        Figure(kind("acceptance_rate"), "", rate, se=rate_se, mean=rate),
        Figure(
            kind("acceptance_length"), "", sd.acceptance_length, se=se, mean=sd.acceptance_length
        ),
        Figure(
            kind("accepted_per_draft"), "", sd.accepted_per_draft, se=se, mean=sd.accepted_per_draft
        ),
    ]


def _single(key: str, value: float | None, label: str = "", limit: float | None = None) -> Figure:
    return Figure(kind(key), label, value, mean=value, limit=limit)


def _memory_figures(report: Report) -> list[Figure]:
    out = [_single("peak_vram_mib", mib, str(gpu)) for gpu, mib in peaks(report).items()]
    ctx = report.context
    choices = report.server.engine_choices if report.server else None
    kv = ctx.kv_cache_tokens if ctx is not None else None
    if kv is None and choices is not None:
        kv = choices.kv_cache_tokens
    if kv is not None:
        out.append(_single("kv_cache_tokens", float(kv)))
    if ctx is not None and ctx.draft_weights_bytes is not None:
        out.append(_single("draft_memory_mib", ctx.draft_weights_bytes / MIB))
    return out


def context_served(report: Report) -> float | None:
    """The largest context served: the served context (max_model_len) when the ladder's top
    depth came back, else the largest depth that did."""
    ctx = report.context
    if ctx is None or ctx.largest_depth_served is None:
        return None
    top = max((r.depth for r in ctx.rungs), default=None)
    return float(ctx.max_model_len if ctx.largest_depth_served == top else ctx.largest_depth_served)


def _context_figures(report: Report) -> list[Figure]:
    ctx = report.context
    if ctx is None:
        return []
    out = [_single("context_max_tokens", context_served(report))]
    for r in ctx.rungs:
        if r.status != "served":
            continue
        out.append(_single("context_ttft_ms", r.ttft_ms, str(r.depth)))
        out.append(_single("context_prefill_tps", r.prefill_tps, str(r.depth)))
        out.append(_single("context_decode_tps", r.decode_tps, str(r.depth)))
    return out


def _soak_figures(report: Report) -> list[Figure]:
    soak = report.soak
    if soak is None:
        return []
    s = soak.settings
    return [
        _single("soak_memory_growth_mib", soak.memory_growth_mib, limit=s.max_memory_growth_mib),
        _single("soak_tps_retention_pct", soak.tps_retention_pct, limit=s.min_tps_retention_pct),
        _single("soak_empty_turns", float(soak.empty_turns), limit=float(s.max_empty_turns)),
        _single("soak_errors", float(soak.errors), limit=float(s.max_errors)),
    ]


def _other_figures(report: Report) -> list[Figure]:
    out: list[Figure] = []
    sd = report.bench.spec_decode if report.bench else None
    if sd is not None:
        out += acceptance_figures(sd)
    out += _memory_figures(report)
    if report.energy_per_token_j is not None:
        out.append(_single("energy_j_per_token", report.energy_per_token_j))
    return out + _context_figures(report) + _soak_figures(report)


def figures(report: Report) -> list[Figure]:
    """Every figure of a report, in the order compare shows them (the table's). A prompt's
    figures are the medians of its measured runs (the mean beside them: published Club-3090
    figures are means); a load point's are read from the point; the rest once a run. A report
    written before headlines gets them computed from its records, the same way."""
    found = [
        *_prompt_figures(report),
        *_prefill_figures(report),
        *_load_figures(report),
        *_other_figures(report),
    ]
    order = {k.key: i for i, k in enumerate(KINDS)}
    sources = ["prompt", "prefill", "point"]
    return sorted(
        found,
        key=lambda f: (
            sources.index(f.kind.source) if f.kind.source in sources else len(sources),
            0 if f.kind.source in sources else order[f.kind.key],
        ),
    )
