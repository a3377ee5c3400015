"""A report against the published figures in its recipe's ``reference`` section."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from kit.errors import BadInputError
from kit.recipe import Reference, load_recipe, shown_recipe_sha256
from kit.report.comparability import (
    REFUSING,
    SERVING_IGNORED,
    Difference,
    engine_key,
    recipe_diff,
    refuse_or_keep,
    section_diff,
)
from kit.report.compare import Comparison, MetricDelta, delta, label
from kit.report.describe import rig
from kit.report.figures import PEAK_VRAM, Figure, figures
from kit.report.plausible import reference_plausibility
from kit.report.points import compare_points
from kit.report.schema import Report


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

    Published figures carry no standard deviations: the prompts' and prefill's bands are
    unknown; the load points (``reference.points``) are judged label by label against the
    run's own intervals (:mod:`kit.report.points`). The hardware is the published rig's, which
    kit cannot check: the comparison always says so.
    """
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
        details = recipe_diff(aspect, recipe, mine)
        if details:
            diffs.append(Difference(aspect=aspect, refuses=True, detail="; ".join(details)))
    serving = section_diff(recipe.get("server"), mine.get("server"), "server", SERVING_IGNORED)
    serving += section_diff(recipe.get("speculative"), mine.get("speculative"), "speculative")
    if serving:
        diffs.append(Difference(aspect="serving", refuses=False, detail="; ".join(serving)))
    refuse_or_keep(diffs, force, f"the report and the reference in {recipe_path}")
    run_rig = rig(report.host)
    warnings = [
        f"hardware: the reference was measured on the published rig ({ref.rig or 'not stated'}); "
        f"this run: {run_rig.cell if run_rig else 'unknown (no host probe)'}",
        f"engine: the reference used {ref.engine or 'an engine not stated'}; "
        f"this run: {engine_key(report)}",
        "noise bands are unknown: published figures carry no standard deviations"
        + (" (the load points: this run's intervals, see below)" if ref.points else ""),
    ]
    if shown_recipe_sha256(loaded.recipe) == report.recipe_sha256:
        warnings.append("this run used this recipe exactly (same sha256)")
    if not report.validity.valid:
        warnings.append("this run is not valid (see its validity verdict)")
    metrics = _reference_deltas(ref, figures(report))
    return Comparison(
        a=f"reference: {ref.source}" + (f" ({ref.date})" if ref.date else ""),
        b=label(report),
        reference=True,
        forced=force and any(d.refuses for d in diffs),
        differences=diffs,
        warnings=warnings,
        metrics=metrics,
        points=compare_points(report, ref) if ref.points else None,
        plausibility=reference_plausibility(ref, recipe, [report]),
    )


def _reference_deltas(ref: Reference, figs: list[Figure]) -> list[MetricDelta]:
    """The reference's published figures against the run's (kit.report.figures), mean for
    mean: published figures are the Club-3090 means."""
    run = {f.name: f.mean for f in figs}

    def against(name: str, unit: str, published: float | None, up: bool = True) -> MetricDelta:
        return delta(name, unit, published, run.get(name), up)

    out: list[MetricDelta] = []
    for name, fig in ref.prompts.items():
        out.append(against(f"{name} decode TPS", "tok/s", fig.decode_tps))
        out.append(against(f"{name} wall TPS", "tok/s", fig.wall_tps))
        out.append(against(f"{name} TTFT", "ms", fig.ttft_ms, False))
    for depth, tps in sorted(ref.prefill_tps.items()):
        out.append(against(f"prefill {depth}", "tok/s", tps))
    if ref.acceptance is not None:
        acc = ref.acceptance
        out.append(
            against(
                "acceptance rate", "%", acc.accepted / acc.drafted * 100 if acc.drafted else None
            )
        )
        out.append(
            against(
                "acceptance length", "tokens", 1 + acc.accepted / acc.drafts if acc.drafts else None
            )
        )
    if ref.peak_vram_mib is not None:
        cards = [f.mean for f in figs if f.name.startswith(PEAK_VRAM) and f.mean is not None]
        out.append(
            delta(
                "peak VRAM (highest card)",
                "MiB",
                ref.peak_vram_mib,
                max(cards, default=None),
                False,
            )
        )
    return out
