"""The reproduction verdict: did a re-run of a report come out as the report says?

One of three, for an original report A and a new run B (``kit reproduce REPORT.json`` writes it
into B, signed; ``kit report compare A B`` prints it for any two reports):

- **NOT COMPARABLE**: the model, the quantization or the protocol differ
  (:mod:`kit.report.comparability`), or the two share no headline figure;
- **REPRODUCED**: every headline figure of A is in B and within its noise band;
- **DIFFERENT**: some are not (or B is incomplete): which, by how much, and the likely causes
  kit can see: every other aspect in which the reports differ (GPUs, power limits, PCIe link,
  interconnect, CPU, engine, kernels, serving settings, patches), the OS kernel, a host that
  was not quiet while measuring, a run that is not valid.

Headline figures are each prompt's decode tokens/s, the prefill tokens/s at each depth, and
each load point's output tokens/s (one figure per point, so its band is the floor).
The band of a figure is the larger of

    runs:  2 x sqrt(sa²/na + sb²/nb)   (twice the standard error of the difference of the means,
                                        about a 95 % interval; kit.report.compare.noise_band)
    floor: FLOOR_PCT % of A            (what differs between two sessions of the same rig that
                                        the runs of one session cannot show: boot, clocks, heat)

and each band is stated with the figure.
"""

from __future__ import annotations

from kit.metrics import Stats, summarize
from kit.report.comparability import comparability
from kit.report.compare import noise_band
from kit.report.schema import Report
from kit.report.verdict import FigureCheck, Reproduction, Verdict, num

__all__ = ["FLOOR_PCT", "FigureCheck", "Reproduction", "Verdict", "judge", "likely_causes"]

FLOOR_PCT = 3.0
# another process's share of the machine's CPU while measuring, above which a host is not quiet
QUIET_OTHER_CPU_PCT = 10.0


def _figure(metric: str, a: Stats | None, b: Stats | None) -> FigureCheck | None:
    if a is None or not a.mean:
        return None
    floor = abs(a.mean) * FLOOR_PCT / 100
    runs = noise_band(a, b)
    band, source = (runs, "runs") if runs is not None and runs > floor else (floor, "floor")
    new = b.mean if b is not None else None
    delta = new - a.mean if new is not None else None
    return FigureCheck(
        metric=metric,
        unit="tok/s",
        original=a.mean,
        new=new,
        delta_pct=delta / a.mean * 100 if delta is not None else None,
        band_pct=band / abs(a.mean) * 100,
        band_from=source,
        within=delta is not None and abs(delta) <= band,
    )


def headline_figures(a: Report, b: Report) -> list[FigureCheck]:
    """A's headline figures, each against B's (None in B where B did not measure it)."""
    out: list[FigureCheck] = []
    pb = {p.prompt: p for p in b.bench.prompts} if b.bench else {}
    for p in a.bench.prompts if a.bench else []:
        other = pb.get(p.prompt)
        fig = _figure(f"{p.prompt} decode TPS", p.decode_tps, other.decode_tps if other else None)
        if fig is not None:
            out.append(fig)
    fb = {f.depth: f for f in b.bench.prefill if f.status == "measured"} if b.bench else {}
    for f in a.bench.prefill if a.bench else []:
        if f.status != "measured":
            continue
        depth = fb.get(f.depth)
        fig = _figure(f"prefill {f.depth}", f.prefill_tps, depth.prefill_tps if depth else None)
        if fig is not None:
            out.append(fig)
    lb = {pt.label: pt for pt in b.bench.load_points} if b.bench else {}
    for pt in a.bench.load_points if a.bench else []:
        if pt.output_tps is None:
            continue
        seen = lb.get(pt.label)
        again = summarize([seen.output_tps]) if seen and seen.output_tps is not None else None
        fig = _figure(f"{pt.label} output TPS", summarize([pt.output_tps]), again)
        if fig is not None:
            out.append(fig)
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


def judge(
    original: Report,
    new: Report,
    *,
    original_sha256: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> Reproduction:
    """The verdict on ``new`` as a re-run of ``original``."""
    refusing = [f"{d.aspect}: {d.detail}" for d in comparability(original, new) if d.refuses]
    figures = headline_figures(original, new)
    common = {
        "original_run_id": original.run_id,
        "original_sha256": original_sha256,
        "original_recipe": original.recipe_name,
        "variation": bool(overrides),
        "overrides": list(overrides),
        "figures": figures,
    }
    if not figures and not refusing:
        refusing = [
            "the original has no headline figure (no measured prompt, prefill depth or load point)"
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
    differing = [
        f"{f.metric}: {num(f.original)} -> {num(f.new)} {f.unit} ({f.delta_pct:+.1f} %, band "
        f"±{f.band_pct:.1f} %)"
        if f.new is not None and f.delta_pct is not None
        else f"{f.metric}: not measured by the re-run"
        for f in figures
        if not f.within
    ]
    if new.status != "complete":
        differing.append(f"the re-run is incomplete: {new.incomplete_reason}")
    if not differing:
        widest = max(f.band_pct for f in figures)
        return Reproduction(
            verdict="REPRODUCED",
            summary=f"REPRODUCED: all {len(figures)} headline figures within their noise bands "
            f"(at most ±{widest:.1f} %)",
            differing=[],
            causes=[],
            not_comparable=[],
            **common,
        )
    causes = likely_causes(original, new) or [
        "none that kit can see: the reports show the same hardware, engine, patches and "
        "settings, and quiet hosts"
    ]
    n = len([f for f in figures if not f.within])
    return Reproduction(
        verdict="DIFFERENT",
        summary=f"DIFFERENT: {n} of {len(figures)} headline figures outside their noise bands"
        if n
        else "DIFFERENT: the re-run is incomplete",
        differing=differing,
        causes=causes,
        not_comparable=[],
        **common,
    )
