"""Every figure a report can carry, once: the table compare, the reproduction verdict,
``--reference``, the peers, vLLM's bench agreement, show, the page and ``report table`` read.

Each row is a :class:`Kind`, read of a report by :mod:`kit.report.figures`. docs/figures.md is
generated from :data:`KINDS` (:func:`markdown`); docs/noise.md derives the rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from kit.noise import FLOOR_PCT, MAX_BAND_PCT, Direction, Status, direction

Source = Literal["prompt", "prefill", "point", "speculative", "memory", "energy", "context", "soak"]
Statistic = Literal[
    "median", "mean", "p50", "p90", "p99", "counter", "peak", "single", "largest", "per run"
]
BandFrom = Literal["intervals", "floor", "standard errors", "tolerance", "threshold", "exact"]

ACCEPTANCE_Z = 4.0  # standard errors a counter figure may move (kit.report.causes uses the same)
ACCEPTANCE_EPSILON = 0.005


@dataclass(frozen=True)
class Reading:
    """One side's value of a figure and what bounds it: the half-width of its 95 % interval in
    percent of the value (runs or requests), the standard error of a counter figure, the
    rounding of a published figure (half a unit of its last digit) and the limit a threshold
    figure is held to (the recipe's)."""

    value: float | None
    half_width_pct: float | None = None
    se: float | None = None
    rounding: float = 0.0
    limit: float | None = None


@dataclass(frozen=True)
class Judgement:
    """One figure on both sides: the band, where it came from, within or outside."""

    band_pct: float | None
    band_from: BandFrom | None
    status: Status | None
    too_wide: bool = False


def _pct(part: float, whole: float | None) -> float:
    """``part`` in percent of ``whole``; inf where the whole is zero or beyond a double."""
    if not whole:
        return math.inf
    value = abs(part) / abs(whole) * 100
    return value if math.isfinite(value) else math.inf


def delta_pct(a: float | None, b: float | None) -> float | None:
    """(b - a) / a in percent; None without both or with a of 0 (finite, or None)."""
    if a is None or b is None or not a:
        return None
    value = (b - a) / a * 100
    return value if math.isfinite(value) else None


def _status(d: float | None, band_pct: float, too_wide: bool) -> Status:
    if d is None or too_wide:
        return "inconclusive"
    return "within" if abs(d) <= band_pct else "outside"


class Rule:
    """How far two readings of a figure may lie apart and still agree."""

    name = "rule"

    def text(self) -> str:
        raise NotImplementedError

    def judge(self, a: Reading, b: Reading) -> Judgement:
        raise NotImplementedError


@dataclass(frozen=True)
class Relative(Rule):
    """Throughput: ``max(floor, sqrt(ha² + hb²))`` in percent, a published side adding its
    rounding; a band over ``max_pct`` from the intervals leaves the figure inconclusive."""

    floor_pct: float = FLOOR_PCT
    max_pct: float = MAX_BAND_PCT
    name = "relative"

    def text(self) -> str:
        return (
            f"max({self.floor_pct:g} %, √(ha² + hb²)), ha and hb the half-widths of the two "
            f"95 % intervals; over ±{self.max_pct:g} % from the intervals: inconclusive"
        )

    def _parts(self, a: Reading, b: Reading) -> tuple[float, float]:
        halves = [h for h in (a.half_width_pct, b.half_width_pct) if h is not None]
        spread = math.sqrt(sum(h * h for h in halves)) if halves else 0.0
        if not math.isfinite(spread):
            spread = math.inf
        rounding = _pct(a.rounding, a.value) + _pct(b.rounding, a.value) if a.value else 0.0
        return spread, rounding if math.isfinite(rounding) else math.inf

    def judge(self, a: Reading, b: Reading) -> Judgement:
        spread, rounding = self._parts(a, b)
        pct = max(self.floor_pct, spread) + rounding
        source: BandFrom = "intervals" if spread > self.floor_pct else "floor"
        too_wide = spread > self.max_pct
        return Judgement(pct, source, _status(delta_pct(a.value, b.value), pct, too_wide), too_wide)


@dataclass(frozen=True)
class Latency(Relative):
    """A latency: the relative rule with an absolute floor, so that a small latency is not
    judged on the clock's jitter. The floor widens the band but never makes it too wide: it is
    the resolution of the measurement, not its noise. A latency's runs spread wider than a
    throughput's (a median of 5 TTFTs: ±26-33 % on the H200 re-run of 2026-12-01, where its
    decode figures were within ±6.5 %), so its intervals may reach ``max_pct`` = 35 % before
    the figure is inconclusive; a threefold TTFT is far outside that."""

    floor_ms: float = 2.0
    max_pct: float = 35.0
    name = "latency"

    def text(self) -> str:
        return f"{super().text()}; at least ±{self.floor_ms:g} ms"

    def judge(self, a: Reading, b: Reading) -> Judgement:
        spread, rounding = self._parts(a, b)
        absolute = _pct(self.floor_ms, a.value)
        pct = max(self.floor_pct, spread, absolute) + rounding
        source: BandFrom = "intervals" if spread >= max(self.floor_pct, absolute) else "floor"
        too_wide = spread > self.max_pct
        return Judgement(pct, source, _status(delta_pct(a.value, b.value), pct, too_wide), too_wide)


@dataclass(frozen=True)
class Counters(Rule):
    """A figure counted by the engine (acceptance): ``z`` standard errors of the difference
    plus a small epsilon, the standard errors from each side's counts."""

    z: float = ACCEPTANCE_Z
    epsilon: float = ACCEPTANCE_EPSILON
    name = "counters"

    def text(self) -> str:
        return f"{self.z:g} standard errors of the difference (from the counts) + {self.epsilon:g}"

    def judge(self, a: Reading, b: Reading) -> Judgement:
        if a.value is None or b.value is None:
            return Judgement(None, None, None)
        ses = [s for s in (a.se, b.se) if s is not None]
        rounding = a.rounding + b.rounding
        absolute = self.z * math.sqrt(sum(s * s for s in ses)) + self.epsilon + rounding
        pct = _pct(absolute, a.value)
        within = abs(b.value - a.value) <= absolute
        return Judgement(pct, "standard errors", "within" if within else "outside")


@dataclass(frozen=True)
class Tolerance(Rule):
    """A figure read once a run (memory, energy): a stated absolute plus relative tolerance,
    set from repeated runs of one rig (docs/figures.md says which)."""

    absolute: float
    relative_pct: float
    unit: str
    name = "tolerance"

    def text(self) -> str:
        return f"±({self.absolute:g} {self.unit} + {self.relative_pct:g} %)"

    def judge(self, a: Reading, b: Reading) -> Judgement:
        if a.value is None or b.value is None:
            return Judgement(None, None, None)
        allowed = self.absolute + abs(a.value) * self.relative_pct / 100 + a.rounding + b.rounding
        within = abs(b.value - a.value) <= allowed
        return Judgement(_pct(allowed, a.value), "tolerance", "within" if within else "outside")


@dataclass(frozen=True)
class Exact(Rule):
    """A figure that is a step of a ladder (the largest context depth served): the same step."""

    name = "exact"

    def text(self) -> str:
        return "the same value (a rung of the same ladder)"

    def judge(self, a: Reading, b: Reading) -> Judgement:
        if a.value is None or b.value is None:
            return Judgement(None, None, None)
        return Judgement(0.0, "exact", "within" if a.value == b.value else "outside")


@dataclass(frozen=True)
class Threshold(Rule):
    """A pass/fail claim (no leak, TPS held, no empty turn): within when the new reading
    keeps to the limit the original was held to, or misses it no worse than the original did."""

    at_most: bool  # the value must be <= limit (else >=)
    name = "threshold"

    def text(self) -> str:
        return f"kept {'at or under' if self.at_most else 'at or over'} the recipe's limit"

    def judge(self, a: Reading, b: Reading) -> Judgement:
        if a.value is None or b.value is None or a.limit is None:
            return Judgement(None, None, None)

        def keeps(v: float) -> bool:
            return v <= a.limit if self.at_most else v >= a.limit  # type: ignore[operator]

        worse = b.value > a.value if self.at_most else b.value < a.value
        within = keeps(b.value) or (not keeps(a.value) and not worse)
        return Judgement(None, "threshold", "within" if within else "outside")


THROUGHPUT = Relative()
ACCEPTANCE = Counters()


@dataclass(frozen=True)
class Kind:
    """One row of the table: a figure a report may carry, with its key, title, unit, which way
    is better, the statistic, where it comes from (:data:`Source`), the rule of its band
    (:class:`Rule`) and whether the reproduction verdict judges it."""

    key: str
    title: str
    unit: str
    higher_is_better: bool
    statistic: Statistic
    source: Source
    rule: Rule
    judged: bool
    why_not_judged: str = ""
    # a load point's figures: the LoadPoint field it is read from and the Percentiles field
    point_field: str | None = None
    point_stat: str | None = None
    # a load point's figures set beside another tool's at the same point (the peers' table,
    # vLLM's bench agreement): the output rate and the median and p99 of TTFT, TPOT and ITL
    tools: bool = False

    def direction(self, a: float | None, b: float | None) -> Direction | None:
        return direction(delta_pct(a, b))

    # the names the tools' side-by-side tables read a point figure by
    @property
    def figure(self) -> str:
        """The LoadPoint field a point figure is read from ('' for another figure)."""
        return self.point_field or ""

    @property
    def stat(self) -> str | None:
        """The statistic of a point latency (Percentiles' field); None for a throughput."""
        return self.point_stat

    @property
    def headline(self) -> bool:
        """Judged (the reproduction verdict), and deciding a tool's agreement."""
        return self.judged


def _point_latencies() -> list[Kind]:
    out = []
    tails = "a tail over the point's requests: shown, not judged (too wide to rest a verdict on)"
    floors = {
        "ttft_ms": ("TTFT", 2.0),
        "tpot_ms": ("TPOT", 0.2),
        "itl_ms": ("ITL", 0.2),
        "e2e_ms": ("E2E", 5.0),
    }
    for fld, (title, floor) in floors.items():
        rule = Latency(floor_ms=floor)
        for stat, label in (("mean", "mean"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99")):
            judged = stat == "p50"
            why = (
                ""
                if judged
                else (
                    tails if stat != "mean" else "a mean over requests: shown, the median is judged"
                )
            )
            out.append(
                Kind(
                    f"{fld.removesuffix('_ms')}_{label}",
                    f"{title} {label}",
                    "ms",
                    False,
                    stat,  # type: ignore[arg-type]
                    "point",
                    rule,
                    judged,
                    why,
                    point_field=fld,
                    point_stat=stat,
                    tools=stat in ("p50", "p99") and fld != "e2e_ms",
                )
            )
    return out


POINT_KINDS: tuple[Kind, ...] = (
    Kind("output_tps", "output tok/s", "tok/s", True, "single", "point", THROUGHPUT, True,
         point_field="output_tps", tools=True),
    Kind("request_throughput", "req/s", "req/s", True, "single", "point", THROUGHPUT, True,
         point_field="request_throughput"),
    Kind("total_tps", "total tok/s", "tok/s", True, "single", "point", THROUGHPUT, False,
         "prompt plus output tokens: output tok/s and req/s judge the point",
         point_field="total_tps"),
    *_point_latencies(),
)  # fmt: skip

KINDS: tuple[Kind, ...] = (
    Kind("decode_tps", "decode TPS", "tok/s", True, "median", "prompt", THROUGHPUT, True),
    Kind("wall_tps", "wall TPS", "tok/s", True, "median", "prompt", THROUGHPUT, True),
    Kind("ttft_ms", "TTFT", "ms", False, "median", "prompt", Latency(floor_ms=2.0), True),
    Kind("prefill_tps", "prefill", "tok/s", True, "median", "prefill", THROUGHPUT, True),
    *POINT_KINDS,
    Kind("acceptance_rate", "acceptance rate", "%", True, "counter", "speculative",
         Counters(z=ACCEPTANCE_Z, epsilon=ACCEPTANCE_EPSILON * 100), True),
    Kind("acceptance_length", "acceptance length", "tokens", True, "counter", "speculative",
         ACCEPTANCE, True),
    Kind("accepted_per_draft", "accepted per draft", "tokens", True, "counter", "speculative",
         ACCEPTANCE, True),
    Kind("peak_vram_mib", "peak VRAM", "MiB", False, "peak", "memory",
         Tolerance(256.0, 0.5, "MiB"), True),
    Kind("kv_cache_tokens", "KV cache", "tokens", True, "single", "memory",
         Tolerance(0.0, 1.0, "tokens"), True),
    Kind("draft_memory_mib", "draft memory", "MiB", False, "single", "memory",
         Tolerance(64.0, 2.0, "MiB"), True),
    Kind("energy_j_per_token", "energy", "J/token", False, "single", "energy",
         Tolerance(0.0, 12.0, "J/token"), True),
    Kind("context_max_tokens", "largest context served", "tokens", True, "largest", "context",
         Exact(), True),
    Kind("context_ttft_ms", "TTFT at depth", "ms", False, "single", "context",
         Latency(floor_ms=5.0), False, "one request a depth: shown, the largest depth is judged"),
    Kind("context_prefill_tps", "prefill at depth", "tok/s", True, "single", "context",
         THROUGHPUT, False, "one request a depth: shown, the largest depth is judged"),
    Kind("context_decode_tps", "decode at depth", "tok/s", True, "single", "context",
         THROUGHPUT, False, "one request a depth: shown, the largest depth is judged"),
    Kind("soak_memory_growth_mib", "memory growth", "MiB", False, "single", "soak",
         Threshold(at_most=True), True),
    Kind("soak_tps_retention_pct", "TPS retention", "%", True, "single", "soak",
         Threshold(at_most=False), True),
    Kind("soak_empty_turns", "empty turns", "turns", False, "single", "soak",
         Threshold(at_most=True), True),
    Kind("soak_errors", "errors", "turns", False, "single", "soak", Threshold(at_most=True), True),
)  # fmt: skip

BY_KEY: dict[str, Kind] = {k.key: k for k in KINDS}
TOOL_KINDS: tuple[Kind, ...] = tuple(k for k in POINT_KINDS if k.tools)
# how far kit's figure may lie from another tool's on the same server, run just before or after
# it (vLLM's bench per prompt or point, the peers): one session, so not the 3 % floor of two
AGREEMENT_PCT = 2.0


def kind(key: str) -> Kind:
    """The row of ``key``."""
    return BY_KEY[key]


def read_point(point: object, k: Kind) -> float | None:
    """A load point's value of a point figure (its field, then the statistic of its
    percentiles); None where the point lacks it (written before kit kept it)."""
    if k.point_field is None:
        return None
    value = getattr(point, k.point_field, None)
    if k.point_stat is not None:
        value = getattr(value, k.point_stat, None)
    return float(value) if isinstance(value, (int, float)) else None


SOURCES: dict[Source, str] = {
    "prompt": "each prompt of the sequential protocol (narrative, code)",
    "prefill": "each prefill depth of the prefill probe",
    "point": "each load point (concurrency-N, rate-R)",
    "speculative": "the engine's spec-decode counters over the measured windows",
    "memory": "NVML per card, the engine's log at boot, the draft's checkpoint",
    "energy": "NVML energy over the measured windows",
    "context": "the context ladder (bench.context)",
    "soak": "the multi-turn soak (bench.soak)",
}


def markdown() -> str:
    """docs/figures.md: the table, generated (``kit schema --out schemas`` writes it beside the
    schemas; a test checks it)."""
    lines = [
        "# Figures",
        "",
        "<!-- generated from kit/figures.py by `kit schema` (make schema); do not edit -->",
        "",
        "Every figure a report can carry, with the rule of its band and whether the reproduction "
        "verdict judges it. `kit report compare`, `kit reproduce REPORT.json`, "
        "`--reference RECIPE`, the peers' table, vLLM's bench agreement, `kit report show`, the "
        "page and `kit report table` all read this one table (kit/figures.py). A figure not "
        "judged is shown with the reason. docs/noise.md derives the rules.",
        "",
        "| key | figure | unit | better | statistic | from | band | judged |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k in KINDS:
        judged = "yes" if k.judged else f"no: {k.why_not_judged}"
        better = "higher" if k.higher_is_better else "lower"
        lines.append(
            f"| `{k.key}` | {k.title} | {k.unit} | {better} | {k.statistic} | {k.source} | "
            f"{k.rule.text()} | {judged} |"
        )
    lines += ["", "Where each figure comes from:", ""]
    lines += [f"- **{s}**: {text}" for s, text in SOURCES.items()]
    return "\n".join(lines) + "\n"
