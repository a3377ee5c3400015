"""Compare stage: two reports, or a report and its recipe's published reference, metric by metric.

Before any figure, comparability: each aspect that differs is named. Model, quantization and
protocol differences refuse the comparison (``VerificationFailed``, exit 1) unless forced;
hardware, engine, kernels, serving settings and patch differences are warnings listed in the
result. Kernels are the engine's choices read from the server log (linear kernels, the CPU W4A16
path and kernel build, the attention backend); a side that did not record them (a report written
before kit read them) or did not log one of them differs in nothing there.

Deltas are ``B - A`` (in reference mode ``this run - reference``), in percent of A. The noise band
of a difference of two means is ``2 * sqrt(sa²/na + sb²/nb)`` from the sample standard deviations
(twice the standard error of the difference: about a 95 % interval for roughly normal runs); a
delta larger than the band is flagged as outside noise. Where a side has no standard deviation
(fewer than two runs, counter-based figures, single readings, published figures) the band is
unknown and nothing is flagged.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kit.errors import BadInputError, VerificationFailed
from kit.metrics import Stats
from kit.probe import Unavailable
from kit.report import Report
from kit.show import engine_text, model_name, quant_name, rig

Aspect = Literal[
    "model", "quantization", "protocol", "hardware", "engine", "kernels", "serving", "patches"
]
REFUSING: tuple[Aspect, ...] = ("model", "quantization", "protocol")
# bench keys that do not change what is measured
_PROTOCOL_IGNORED = frozenset({"request_timeout_s", "stall_timeout_s"})
# server keys compared as "serving" (engine and patches have aspects of their own)
_SERVING_IGNORED = frozenset({"engine", "patches", "health_timeout_s", "served_model_name"})
MAX_LISTED = 8  # differing paths named per aspect


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Difference(_Model):
    """One way the two sides differ."""

    aspect: Aspect = Field(description="What differs.")
    refuses: bool = Field(description="The aspect refuses a comparison unless forced.")
    detail: str = Field(description="What differs, A first.")


class MetricDelta(_Model):
    """One figure on both sides."""

    metric: str = Field(description="e.g. 'narrative decode TPS', 'prefill 512 tok/s'.")
    unit: str = Field(description="tok/s, ms, %, MiB, J/token, tokens.")
    higher_is_better: bool = Field(description="Whether a positive delta is an improvement.")
    a: float | None = Field(description="A's value (the reference in reference mode).")
    b: float | None = Field(description="B's value (this run in reference mode).")
    delta: float | None = Field(description="b - a.")
    delta_pct: float | None = Field(description="(b - a) / a in percent.")
    band: float | None = Field(description="Noise band of the delta; None when unknown.")
    outside_noise: bool | None = Field(description="|delta| > band; None when the band is unknown.")


class Comparison(_Model):
    """Two reports (or a report and a reference) side by side."""

    a: str = Field(description="Label of A (run id, or the reference's source).")
    b: str = Field(description="Label of B.")
    reference: bool = Field(description="A is a recipe's published reference.")
    forced: bool = Field(description="Refusing differences were overridden.")
    differences: list[Difference] = Field(description="Every aspect that differs.")
    warnings: list[str] = Field(description="What a reader must keep in mind.")
    metrics: list[MetricDelta] = Field(description="Figures, per prompt, depth and GPU.")

    def render(self) -> str:
        lines = [f"A: {self.a}", f"B: {self.b}"]
        for d in self.differences:
            tag = "forced" if d.refuses else "warning"
            lines.append(f"{tag}: {_differ(d.aspect)}: {d.detail}")
        lines += [f"warning: {w}" for w in self.warnings]
        head = f"{'metric':<32} {'A':>10} {'B':>10} {'delta':>10} {'delta %':>8} {'noise ±':>9}"
        lines += ["", head, "-" * len(head)]
        for m in self.metrics:
            flag = {True: "outside noise", False: "within noise", None: "band unknown"}[
                m.outside_noise
            ]
            if m.delta is None:
                flag = "one side only"
            lines.append(
                f"{m.metric + ' (' + m.unit + ')':<32} {_f(m.a):>10} {_f(m.b):>10} "
                f"{_f(m.delta, sign=True):>10} {_f(m.delta_pct, 1, sign=True):>8} "
                f"{_f(m.band):>9}  {flag}"
            )
        lines.append("")
        lines.append("delta = B - A; noise band = 2 * sqrt(sa²/na + sb²/nb) from the run stds")
        return "\n".join(lines)


def _differ(aspect: str) -> str:
    return f"{aspect} {'differ' if aspect.endswith('s') else 'differs'}"


def _f(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


# ---------------------------------------------------------------------------------------------
# figures


def noise_band(a: Stats | None, b: Stats | None) -> float | None:
    """``2 * sqrt(sa²/na + sb²/nb)``; None when a side has no standard deviation."""
    if a is None or b is None or a.std is None or b.std is None or not a.n or not b.n:
        return None
    return 2.0 * math.sqrt(a.std**2 / a.n + b.std**2 / b.n)


def _delta(
    metric: str,
    unit: str,
    a: float | None,
    b: float | None,
    band: float | None = None,
    higher_is_better: bool = True,
) -> MetricDelta:
    delta = b - a if a is not None and b is not None else None
    pct = delta / a * 100.0 if delta is not None and a else None
    outside = abs(delta) > band if delta is not None and band is not None else None
    return MetricDelta(
        metric=metric,
        unit=unit,
        higher_is_better=higher_is_better,
        a=a,
        b=b,
        delta=delta,
        delta_pct=pct,
        band=band,
        outside_noise=outside,
    )


def _mean(s: Stats | None) -> float | None:
    return s.mean if s is not None else None


def _stat_delta(metric: str, unit: str, a: Stats | None, b: Stats | None, up: bool) -> MetricDelta:
    return _delta(metric, unit, _mean(a), _mean(b), noise_band(a, b), up)


def _peaks(report: Report) -> dict[int, float]:
    s = report.gpu_sampling
    if s is None:
        return {}
    return {
        g.gpu: float(g.vram.peak_mib)
        for g in s.summaries
        if not isinstance(g.vram.peak_mib, Unavailable)
    }


def _report_metrics(a: Report, b: Report) -> tuple[list[MetricDelta], list[str]]:
    out: list[MetricDelta] = []
    notes: list[str] = []
    pa = {p.prompt: p for p in a.bench.prompts} if a.bench else {}
    pb = {p.prompt: p for p in b.bench.prompts} if b.bench else {}
    for name in dict.fromkeys([*pa, *pb]):
        if name not in pa or name not in pb:
            notes.append(f"prompt {name!r} is measured in {'A' if name in pa else 'B'} only")
            continue
        x, y = pa[name], pb[name]
        out.append(_stat_delta(f"{name} decode TPS", "tok/s", x.decode_tps, y.decode_tps, True))
        out.append(_stat_delta(f"{name} wall TPS", "tok/s", x.wall_tps, y.wall_tps, True))
        out.append(_stat_delta(f"{name} TTFT", "ms", x.ttft_ms, y.ttft_ms, False))
    fa = {p.depth: p for p in a.bench.prefill if p.status == "measured"} if a.bench else {}
    fb = {p.depth: p for p in b.bench.prefill if p.status == "measured"} if b.bench else {}
    for depth in sorted(set(fa) | set(fb)):
        if depth in fa and depth in fb:
            out.append(
                _stat_delta(
                    f"prefill {depth}", "tok/s", fa[depth].prefill_tps, fb[depth].prefill_tps, True
                )
            )
        else:
            notes.append(
                f"prefill at {depth} tokens is measured in {'A' if depth in fa else 'B'} only"
            )
    sa = a.bench.spec_decode if a.bench else None
    sb = b.bench.spec_decode if b.bench else None
    if sa is not None or sb is not None:
        rate = [
            s.acceptance_rate * 100 if s and s.acceptance_rate is not None else None
            for s in (sa, sb)
        ]
        length = [s.acceptance_length if s else None for s in (sa, sb)]
        out.append(_delta("acceptance rate", "%", rate[0], rate[1]))
        out.append(_delta("acceptance length", "tokens", length[0], length[1]))
    peaks_a, peaks_b = _peaks(a), _peaks(b)
    for gpu in sorted(set(peaks_a) | set(peaks_b)):
        out.append(
            _delta(f"peak VRAM GPU {gpu}", "MiB", peaks_a.get(gpu), peaks_b.get(gpu), None, False)
        )
    if a.energy_per_token_j is not None or b.energy_per_token_j is not None:
        out.append(
            _delta("energy", "J/token", a.energy_per_token_j, b.energy_per_token_j, None, False)
        )
    return out, notes


# ---------------------------------------------------------------------------------------------
# comparability


def _flat(value: Any, path: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _flat(v, f"{path}[{i}]", out)
        if not value:
            out[path] = []
    else:
        out[path] = value
    return out


def _section_diff(a: Any, b: Any, prefix: str, ignore: frozenset[str] = frozenset()) -> list[str]:
    """Dotted paths where two recipe sections differ, with both values."""
    fa, fb = _flat(a, prefix, {}), _flat(b, prefix, {})
    out = []
    for key in dict.fromkeys([*fa, *fb]):
        top = key[len(prefix) + 1 :].split(".", 1)[0].split("[", 1)[0] if prefix else key
        if top in ignore:
            continue
        va, vb = fa.get(key, "(absent)"), fb.get(key, "(absent)")
        if (va is None and vb == "(absent)") or (va == "(absent)" and vb is None):
            continue  # an optional field one kit version writes and another did not know
        if va != vb or isinstance(va, bool) is not isinstance(vb, bool):
            out.append(f"{key} {_short(va)} vs {_short(vb)}")
    if len(out) > MAX_LISTED:
        out[MAX_LISTED:] = [f"{len(out) - MAX_LISTED} more"]
    return out


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _section(report: Report, name: str) -> Any:
    return report.recipe.get(name)


def _model_key(report: Report) -> tuple[str, str]:
    """(identity to compare, description)."""
    name = model_name(report.recipe)
    if report.model is not None:
        return report.model.identity, f"{name} [{report.model.identity[:12]}]"
    return "recipe:" + repr(_section(report, "model")), f"{name} [no manifest]"


def _quant_key(report: Report) -> tuple[str, str]:
    name = quant_name(report.recipe)
    if report.quantization is not None:
        return report.quantization.key, f"{name} [{report.quantization.key[:12]}]"
    return "recipe:" + repr(_section(report, "quantization")), f"{name} [no manifest]"


def _recipe_diff(aspect: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """How two recipes differ in one aspect: in words when the kind differs, else by path."""
    if aspect == "model" and (a.get("model") or {}).get("source") != (b.get("model") or {}).get(
        "source"
    ):
        return [f"{model_name(a)} vs {model_name(b)}"]
    if aspect == "quantization":
        qa, qb = a.get("quantization") or {}, b.get("quantization") or {}
        if qa.get("method") != qb.get("method"):
            return [f"{quant_name(a)} vs {quant_name(b)}"]
    section = {"model": "model", "quantization": "quantization", "protocol": "bench"}[aspect]
    ignore = _PROTOCOL_IGNORED if aspect == "protocol" else frozenset()
    return _section_diff(a.get(section), b.get(section), section, ignore)


def _engine_key(report: Report) -> str:
    return engine_text(report).split(" + ", 1)[0]


def _patch_key(report: Report) -> tuple[Any, str]:
    p = report.patches
    if p is None:
        return None, "none"
    key = (
        p.series,
        [(x.file, x.sha256) for x in p.patches],
        [(x.path, x.sha256) for x in p.files],
    )
    n = len(p.patches)
    return key, f"{p.series} ({n} patch{'es' * (n != 1)})"


def _hardware_diffs(a: Report, b: Report) -> list[str]:
    ra, rb = rig(a.host), rig(b.host)
    if ra is None or rb is None:
        missing = " and ".join(x for x, r in (("A", ra), ("B", rb)) if r is None)
        return [f"unknown for {missing} (no host probe)"]
    out = []
    for label, x, y in (
        ("GPUs", ra.gpus, rb.gpus),
        ("PCIe", ra.pcie, rb.pcie),
        ("power caps", ra.power, rb.power),
        ("interconnect", ra.interconnect, rb.interconnect),
    ):
        if x != y:
            out.append(f"{label} {x or 'none'} vs {y or 'none'}")
    if ra.gpu_count == 0 and rb.gpu_count == 0 and ra.cpu != rb.cpu:
        out.append(f"CPU {ra.cpu} vs {rb.cpu}")
    return out


def _kernel_diffs(a: Report, b: Report) -> list[str]:
    """How the kernels the engines chose differ; nothing where a side recorded no choice."""
    ca = a.server.engine_choices if a.server else None
    cb = b.server.engine_choices if b.server else None
    if ca is None or cb is None:
        return []
    out = []
    for label, x, y in (
        ("linear kernels", ", ".join(ca.linear_kernels), ", ".join(cb.linear_kernels)),
        ("w4a16 path", ca.w4a16_path, cb.w4a16_path),
        ("CPU kernel build", ca.cpu_kernel_build, cb.cpu_kernel_build),
        ("attention backend", ca.attention_backend, cb.attention_backend),
    ):
        if x and y and x != y:
            out.append(f"{label} {x} vs {y}")
    return out


def comparability(a: Report, b: Report) -> list[Difference]:
    """Every aspect in which two reports differ, each with what differs."""
    out: list[Difference] = []

    def add(aspect: Aspect, details: list[str]) -> None:
        if details:
            out.append(
                Difference(aspect=aspect, refuses=aspect in REFUSING, detail="; ".join(details))
            )

    (ka, da), (kb, db) = _model_key(a), _model_key(b)
    add("model", [f"{da} vs {db}"] if ka != kb else [])
    (ka, da), (kb, db) = _quant_key(a), _quant_key(b)
    if ka != kb:
        details = _recipe_diff("quantization", a.recipe, b.recipe)
        if a.quantization is not None and b.quantization is not None:
            details += _section_diff(
                {k: v for k, v in a.quantization.inputs.items() if k != "model_identity"},
                {k: v for k, v in b.quantization.inputs.items() if k != "model_identity"},
                "inputs",
            )
        add("quantization", details or [f"{da} vs {db}"])
    protocol = _recipe_diff("protocol", a.recipe, b.recipe)
    if a.canonical != b.canonical:
        protocol.insert(0, f"canonical {a.canonical} vs {b.canonical}")
    add("protocol", protocol)
    add("hardware", _hardware_diffs(a, b))
    ea, eb = _engine_key(a), _engine_key(b)
    add("engine", [f"{ea} vs {eb}"] if ea != eb else [])
    add("kernels", _kernel_diffs(a, b))
    serving = _section_diff(
        _section(a, "server"), _section(b, "server"), "server", _SERVING_IGNORED
    )
    serving += _section_diff(_section(a, "speculative"), _section(b, "speculative"), "speculative")
    draft_a = a.draft.identity if a.draft else None
    draft_b = b.draft.identity if b.draft else None
    if draft_a != draft_b and not any(s.startswith("speculative.draft") for s in serving):
        serving.append(f"draft model {(draft_a or 'none')[:12]} vs {(draft_b or 'none')[:12]}")
    add("serving", serving)
    (pa, ta), (pb, tb) = _patch_key(a), _patch_key(b)
    add("patches", [f"{ta} vs {tb}" + (" (other sha256s)" if ta == tb else "")] if pa != pb else [])
    return out


def _refuse_or_keep(diffs: list[Difference], force: bool, what: str) -> None:
    refusing = [d for d in diffs if d.refuses]
    if refusing and not force:
        aspects = ", ".join(d.aspect for d in refusing)
        verb = "differs" if len(refusing) == 1 else "differ"
        raise VerificationFailed(
            f"{what} are not comparable: {aspects} {verb}"
            + "".join(f"\n{d.aspect}: {d.detail}" for d in refusing),
            hint="pass --force to compare anyway (the deltas then mix these differences)",
        )


# ---------------------------------------------------------------------------------------------
# the two modes


def _label(report: Report) -> str:
    return f"{report.run_id} ({report.recipe_name}, {report.created_at})"


def compare_reports(a: Report, b: Report, *, force: bool = False) -> Comparison:
    """B against A. Refuses (``VerificationFailed``) when model, quantization or protocol
    differ, unless ``force``; hardware, engine, kernel, serving and patch differences are
    warnings."""
    diffs = comparability(a, b)
    _refuse_or_keep(diffs, force, "the reports")
    metrics, notes = _report_metrics(a, b)
    warnings = list(notes)
    for side, r in (("A", a), ("B", b)):
        if not r.validity.valid:
            warnings.append(f"{side} is not a valid run (see its validity verdict)")
        if r.status != "complete":
            warnings.append(f"{side} is incomplete: {r.incomplete_reason}")
    return Comparison(
        a=_label(a),
        b=_label(b),
        reference=False,
        forced=force and any(d.refuses for d in diffs),
        differences=diffs,
        warnings=warnings,
        metrics=metrics,
    )


def _pins_from(recipe: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The recipe with the hub revisions it leaves open (null) taken from the run's recipe:
    a recipe that is not yet pinned is run with ``--set model.revision=<sha>``."""
    out = copy.deepcopy(recipe)
    for path in (("model",), ("speculative", "draft")):
        mine: Any = out
        theirs: Any = run
        for key in path:
            mine = mine.get(key) if isinstance(mine, dict) else None
            theirs = theirs.get(key) if isinstance(theirs, dict) else None
        if (
            isinstance(mine, dict)
            and isinstance(theirs, dict)
            and mine.get("source") == "hub"
            and theirs.get("source") == "hub"
            and mine.get("revision") is None
        ):
            mine["revision"] = theirs.get("revision")
    return out


def compare_with_reference(
    report: Report, recipe_path: str | Path, *, force: bool = False
) -> Comparison:
    """The report against the published figures in a recipe's ``reference`` section.

    Published figures carry no standard deviations: every band is unknown. The hardware is the
    published rig's, which kit cannot check: the comparison always says so.
    """
    from kit.recipe import load_recipe

    loaded = load_recipe(recipe_path)
    ref = loaded.recipe.reference
    if ref is None:
        raise BadInputError(
            f"{recipe_path}: the recipe has no reference section",
            hint="add reference: with the published figures, or compare two reports",
        )
    recipe = _pins_from(loaded.recipe.to_json_dict(), report.recipe)
    diffs: list[Difference] = []
    mine = report.recipe
    for aspect in REFUSING:
        details = _recipe_diff(aspect, recipe, mine)
        if details:
            diffs.append(Difference(aspect=aspect, refuses=True, detail="; ".join(details)))
    serving = _section_diff(recipe.get("server"), mine.get("server"), "server", _SERVING_IGNORED)
    serving += _section_diff(recipe.get("speculative"), mine.get("speculative"), "speculative")
    if serving:
        diffs.append(Difference(aspect="serving", refuses=False, detail="; ".join(serving)))
    _refuse_or_keep(diffs, force, f"the report and the reference in {recipe_path}")
    run_rig = rig(report.host)
    warnings = [
        f"hardware: the reference was measured on the published rig ({ref.rig or 'not stated'}); "
        f"this run: {run_rig.cell if run_rig else 'unknown (no host probe)'}",
        f"engine: the reference used {ref.engine or 'an engine not stated'}; "
        f"this run: {_engine_key(report)}",
        "noise bands are unknown: published figures carry no standard deviations",
    ]
    if loaded.recipe.sha256() == report.recipe_sha256:
        warnings.append("this run used this recipe exactly (same sha256)")
    if not report.validity.valid:
        warnings.append("this run is not valid (see its validity verdict)")
    metrics: list[MetricDelta] = []
    prompts = {p.prompt: p for p in report.bench.prompts} if report.bench else {}
    for name, fig in ref.prompts.items():
        p = prompts.get(name)
        decode, wall, ttft = (p.decode_tps, p.wall_tps, p.ttft_ms) if p else (None, None, None)
        metrics.append(_delta(f"{name} decode TPS", "tok/s", fig.decode_tps, _mean(decode)))
        metrics.append(_delta(f"{name} wall TPS", "tok/s", fig.wall_tps, _mean(wall)))
        metrics.append(_delta(f"{name} TTFT", "ms", fig.ttft_ms, _mean(ttft), None, False))
    measured = (
        {p.depth: p for p in report.bench.prefill if p.status == "measured"} if report.bench else {}
    )
    for depth, tps in sorted(ref.prefill_tps.items()):
        pf = measured.get(depth)
        metrics.append(
            _delta(f"prefill {depth}", "tok/s", tps, _mean(pf.prefill_tps if pf else None))
        )
    if ref.acceptance is not None:
        acc = ref.acceptance
        sd = report.bench.spec_decode if report.bench else None
        rate = sd.acceptance_rate * 100 if sd and sd.acceptance_rate is not None else None
        metrics.append(
            _delta(
                "acceptance rate",
                "%",
                acc.accepted / acc.drafted * 100 if acc.drafted else None,
                rate,
            )
        )
        metrics.append(
            _delta(
                "acceptance length",
                "tokens",
                1 + acc.accepted / acc.drafts if acc.drafts else None,
                sd.acceptance_length if sd else None,
            )
        )
    if ref.peak_vram_mib is not None:
        peaks = _peaks(report)
        metrics.append(
            _delta(
                "peak VRAM (highest card)",
                "MiB",
                ref.peak_vram_mib,
                max(peaks.values()) if peaks else None,
                None,
                False,
            )
        )
    return Comparison(
        a=f"reference: {ref.source}" + (f" ({ref.date})" if ref.date else ""),
        b=_label(report),
        reference=True,
        forced=force and any(d.refuses for d in diffs),
        differences=diffs,
        warnings=warnings,
        metrics=metrics,
    )
