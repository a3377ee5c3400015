"""The reproduction verdict: did a re-run of a report come out as the report says?

:func:`judge` gives it for an original report A and a new run B (``kit reproduce REPORT.json``
writes it into B, signed; ``kit report compare A B`` prints it for any two reports).
"""

from __future__ import annotations

from kit.noise import FLOOR_PCT, MAX_BAND_PCT
from kit.report.comparability import checkpoint_match, comparability
from kit.report.cputime import between_runs as cpu_between_runs
from kit.report.deltas import MetricDelta, figure_delta
from kit.report.figures import figures
from kit.report.plausible import of_recipe
from kit.report.schema import Report
from kit.report.speed import between_runs
from kit.report.verdict import FigureCheck, Reproduction, Verdict, num, unjudgeable

__all__ = ["FLOOR_PCT", "FigureCheck", "Reproduction", "Verdict", "judge", "likely_causes"]

# another process's share of the machine's CPU while measuring, above which a host is not quiet
QUIET_OTHER_CPU_PCT = 10.0


def figure_check(m: MetricDelta, void: bool) -> FigureCheck:
    """A judged figure's delta as the verdict records it; ``void``: a side cannot be judged."""
    both = m.a is not None and m.b is not None
    status = "inconclusive" if void and both else m.status
    band_from = m.band_from or "floor"
    return FigureCheck(
        metric=m.metric,
        unit=m.unit,
        original=m.a,
        new=m.b,
        delta_pct=m.delta_pct,
        band_pct=m.band_pct if m.band_pct is not None or band_from == "threshold" else FLOOR_PCT,
        band_from=band_from,
        within=status == "within",
        status=status,
        direction=m.direction,
        better=m.better if status == "outside" else None,
        key=m.key,
    )


def only_new(a: Report, b: Report) -> list[str]:
    """The judged figures the re-run has and the original does not: shown, never blocking."""
    mine = {f.name for f in figures(a) if f.value is not None}
    return [f.name for f in figures(b) if f.headline and f.value is not None and f.name not in mine]


def judged_figures(a: Report, b: Report, void: bool = False) -> list[FigureCheck]:
    """A's judged figures, each against B's (None in B where B did not measure it).

    They are every figure of the original that the figure table marks judged (:mod:`kit.figures`,
    docs/figures.md): each prompt's decode and wall TPS and TTFT, each prefill depth, each load
    point's throughputs and median latencies, the acceptance counters, peak memory per card,
    KV-cache capacity, the draft's memory, J/token, the largest context served and the soak's
    claims. Each is judged by the rule of its kind (throughput: ``max(3 %, sqrt(ha² + hb²))``;
    latency: the same with an absolute floor; counters: their standard errors; memory and
    energy: a stated tolerance; the context: the same step; the soak: the recipe's thresholds),
    the same ``kit report compare`` tabulates. A figure only the re-run has is shown ("not in
    the original", :func:`only_new`) and does not block the verdict; one the re-run lacks is
    DIFFERENT.
    """
    theirs = {f.name: f for f in figures(b)}
    out: list[FigureCheck] = []
    for x in figures(a):
        if not x.headline or x.value is None:
            continue
        y = theirs.get(x.name)
        m = figure_delta(x, y) if y is not None else figure_delta(x, x)
        if y is None:
            m = m.model_copy(update={"b": None, "delta": None, "delta_pct": None, "status": None})
        out.append(figure_check(m, void))
    return out


def _quiet(report: Report, side: str) -> list[str]:
    load = report.host_load
    if load is None:
        return []
    out = []
    if load.other_cpu_pct is not None and load.other_cpu_pct > QUIET_OTHER_CPU_PCT:
        top = ", ".join(p.comm for p in load.top_other[:3])
        out.append(
            f"the {side} host was not quiet: other processes used {load.other_cpu_pct:.0f} % of "
            f"its CPU while measuring" + (f" (most: {top})" if top else "")
        )
    if load.foreign_gpu_processes:
        out.append(
            f"the {side} host had {load.foreign_gpu_processes} other process(es) on its GPUs"
        )
    return out


def likely_causes(a: Report, b: Report) -> list[str]:
    """What kit can see that differs between the two runs, besides the figures."""
    causes = [f"{d.aspect}: {d.detail}" for d in comparability(a, b) if not d.refuses]
    ka = a.host.os.kernel if a.host else None
    kb = b.host.os.kernel if b.host else None
    if ka and kb and ka != kb:
        causes.append(f"OS kernel {ka} vs {kb}")
    causes += _quiet(a, "original") + _quiet(b, "new")
    for side, r in (("original", a), ("new", b)):
        if not r.validity.valid:
            first = next((f.message for f in r.validity.reasons if f.severity == "error"), "")
            causes.append(f"the {side} run is not valid" + (f": {first}" if first else ""))
    return causes


def reference_notes(original: Report, new: Report) -> list[str]:
    """Where the original's recipe has published decode figures: the roofline bound on the
    reference's rig and the fraction of it each implies (kit.roofline.plausible), in words."""
    check = of_recipe(original.recipe, [new, original])
    return check.notes() if check is not None else []


def _ways(checks: list[FigureCheck]) -> str:
    """'all higher (better)', 'lower (worse) and higher (better)', ..."""
    ways = dict.fromkeys(
        f"{c.direction} ({'better' if c.better else 'worse'})" for c in checks if c.direction
    )
    if not ways:
        return ""
    return (", all " if len(checks) > 1 and len(ways) == 1 else ", ") + " and ".join(ways)


def _unjudged(f: FigureCheck) -> str:
    """Why a figure both runs have is neither within nor outside its band."""
    if f.delta_pct is None and f.band_from in ("intervals", "floor"):
        return f"{num(f.original)} -> {num(f.new)} {f.unit} is no percentage of the original"
    if f.band_pct is not None and f.band_pct > MAX_BAND_PCT:
        return f"band ±{num(f.band_pct, '.1f')} % is wider than ±{MAX_BAND_PCT:g} %"
    return "an interval beyond any percentage of its value: no band"


def _pct(f: FigureCheck) -> str:
    return f"{num(f.delta_pct, '+.1f')} %, " if f.delta_pct is not None else ""


def _named(checks: list[FigureCheck], most: int = 4) -> str:
    """The figures outside, by name: 'narrative TTFT, code TTFT and 2 more'."""
    names = [c.metric for c in checks]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def judge(
    original: Report,
    new: Report,
    *,
    original_sha256: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> Reproduction:
    """The verdict on ``new`` as a re-run of ``original``, one of four:

    - **NOT COMPARABLE**: the model, the quantization, the protocol or the acceptance differ, or
      the quality probe's figures differ beyond their band (:mod:`kit.report.comparability`), or
      the two share no headline figure;
    - **INCONCLUSIVE**: no verdict can rest on the figures: a side is INVALID or the re-run is
      incomplete, or a figure's band is wider than ``kit.noise.MAX_BAND_PCT``, and none is
      clearly outside its band;
    - **REPRODUCED**: every headline figure of A is in B and within its noise band;
    - **DIFFERENT**: some are not: which, which way (higher or lower, better or worse), by how
      much, and the likely causes kit can see: every other aspect in which the reports differ
      (GPUs, power limits, PCIe link, interconnect, CPU, engine, kernels, serving settings,
      patches), the OS kernel, a host that was not quiet while measuring, and a host that ran
      slower or faster on the fixed workload timed before each measured run (``host-speed``,
      :mod:`kit.report.speed`; or, where it did not move, that it is not the cause).

    The verdict also says whether B served A's quantized checkpoint (its content digest,
    recorded by :mod:`kit.quantize`): the same, or another, with the files that differ and what
    kit records that may explain it (seed, iters, device, library versions, the CPU and its
    vector flags, threads). Another checkpoint does not make the runs NOT COMPARABLE: it is
    named on the verdict line ("REPRODUCED: ...; on another checkpoint: sha256 X vs Y") and
    listed first among the likely causes of a DIFFERENT or INCONCLUSIVE verdict
    (docs/checkpoint.md says why).
    """
    refusing = [f"{d.aspect}: {d.detail}" for d in comparability(original, new) if d.refuses]
    void = unjudgeable(original, "the original", complete=False) + unjudgeable(new, "the re-run")
    figures_ = judged_figures(original, new, void=bool(void))
    extra = [f"{name}: not in the original (shown, not judged)" for name in only_new(original, new)]
    checkpoint = checkpoint_match(original, new)
    common = {
        "original_run_id": original.run_id,
        "original_sha256": original_sha256,
        "original_recipe": original.recipe_name,
        "variation": bool(overrides),
        "overrides": list(overrides),
        "figures": figures_,
        "checkpoint": checkpoint,
        "notes": reference_notes(original, new) + extra,
    }
    # another checkpoint is named on the verdict line, whatever the verdict
    other = (
        f"; on another checkpoint: sha256 {checkpoint.original[:12]} vs {checkpoint.new[:12]}"
        if checkpoint is not None and not checkpoint.same
        else ""
    )
    if not figures_ and not refusing:
        refusing = [
            "the original has no judged figure (no measured prompt, prefill depth or load point)"
        ]
    if refusing:
        return Reproduction(
            verdict="NOT COMPARABLE",
            summary="NOT COMPARABLE: "
            + "; ".join(r.split(":", 1)[0] for r in refusing)
            + " differ"
            + ("s" if len(refusing) == 1 else ""),
            differing=[],
            causes=[],
            not_comparable=refusing,
            **common,
        )
    outside = [f for f in figures_ if f.status == "outside"]
    missing = [f for f in figures_ if f.new is None]
    wide = [f for f in figures_ if f.status == "inconclusive" and not void]
    inconclusive = void + [f"{f.metric}: {_unjudged(f)}" for f in wide]
    differing = [
        f"{f.metric}: {num(f.original)} -> {num(f.new)} {f.unit} ({_pct(f)}{f.direction}, "
        f"{'better' if f.better else 'worse'}; {f.band_text()})"
        for f in outside
    ] + [f"{f.metric}: not measured by the re-run" for f in missing]
    if differing:
        speed = between_runs(original, new, outside)
        cpu = cpu_between_runs(original, new, outside)
        seen = speed.causes + cpu.causes + likely_causes(original, new) or [
            "none that kit can see: the reports show the same hardware, engine, patches and "
            "settings, and quiet hosts"
        ]
        causes = seen + speed.checked + cpu.checked
        return Reproduction(
            verdict="DIFFERENT",
            summary=f"DIFFERENT: {len(outside) + len(missing)} of {len(figures_)} judged figures "
            f"outside their bands ({_named(outside + missing)}){_ways(outside)}"
            f"{speed.summary or cpu.summary}{other}",
            differing=differing,
            causes=causes,
            not_comparable=[],
            inconclusive=inconclusive,
            **common,
        )
    if inconclusive:
        return Reproduction(
            verdict="INCONCLUSIVE",
            summary="INCONCLUSIVE: " + "; ".join(inconclusive) + other,
            differing=[],
            causes=likely_causes(original, new),
            not_comparable=[],
            inconclusive=inconclusive,
            **common,
        )
    widest = max(
        (
            f.band_pct
            for f in figures_
            if f.band_pct is not None and f.band_from in ("intervals", "floor", "runs")
        ),
        default=0.0,
    )
    return Reproduction(
        verdict="REPRODUCED",
        summary=f"REPRODUCED: all {len(figures_)} judged figures within their bands "
        f"(relative bands at most ±{widest:.1f} %){other}",
        differing=[],
        causes=[],
        not_comparable=[],
        **common,
    )
