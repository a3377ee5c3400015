"""A report against the published figures in its recipe's ``reference`` section."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from kit.errors import BadInputError
from kit.figures import Reading, kind
from kit.metrics import SpecDecode
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
from kit.report.deltas import figure_delta
from kit.report.describe import rig
from kit.report.figures import Figure, acceptance_figures, figures
from kit.report.plausible import reference_plausibility
from kit.report.points import compare_points, rounding
from kit.report.reproduction import Reproduction, figure_check
from kit.report.schema import Report
from kit.report.verdict import num, unjudgeable


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
    pins = ref.open_pins
    for aspect in REFUSING:
        details = unpinned(_SECTION.get(aspect, aspect), recipe_diff(aspect, recipe, mine), pins)
        if details:
            diffs.append(Difference(aspect=aspect, refuses=True, detail="; ".join(details)))
    serving = section_diff(recipe.get("server"), mine.get("server"), "server", SERVING_IGNORED)
    serving += section_diff(recipe.get("speculative"), mine.get("speculative"), "speculative")
    serving = unpinned("server", unpinned("speculative", serving, pins), pins)
    if serving:
        diffs.append(Difference(aspect="serving", refuses=False, detail="; ".join(serving)))
    refuse_or_keep(diffs, force, f"the report and the reference in {recipe_path}")
    run_rig = rig(report.host)
    warnings = [
        f"hardware: the reference was measured on the published rig ({ref.rig or 'not stated'}); "
        f"this run: {run_rig.cell if run_rig else 'unknown (no host probe)'}",
        f"engine: the reference used {ref.engine or 'an engine not stated'}; "
        f"this run: {engine_key(report)}",
        "a published figure carries no interval: its band is this run's, plus its rounding (the "
        "rule of its kind, docs/figures.md)",
    ]
    if pins:
        warnings.append(
            "open pins, not compared (the source does not state them; the recipe's values stand "
            "in): " + "; ".join(f"{k}: {v}" for k, v in pins.items())
        )
    if shown_recipe_sha256(loaded.recipe) == report.recipe_sha256:
        warnings.append("this run used this recipe exactly (same sha256)")
    if not report.validity.valid:
        warnings.append("this run is not valid (see its validity verdict)")
    metrics = reference_rows(ref, report)
    source = f"reference: {ref.source}" + (f" ({ref.date})" if ref.date else "")
    return Comparison(
        a=source,
        b=label(report),
        reference=True,
        forced=force and any(d.refuses for d in diffs),
        differences=diffs,
        warnings=warnings,
        metrics=metrics,
        # a reference of load points alone is judged by them (points)
        verdict=reference_verdict(metrics, report, source) if metrics else None,
        points=compare_points(report, ref) if ref.points else None,
        plausibility=reference_plausibility(ref, recipe, [report]),
    )


# the recipe section each refusing aspect compares
_SECTION = {"model": "model", "quantization": "quantization", "protocol": "bench",
            "acceptance": "speculative"}  # fmt: skip


def unpinned(section: str, details: list[str], pins: dict[str, str]) -> list[str]:
    """``details`` (one aspect's differences, each "path a vs b" or, where the kind differs,
    in words) without what the reference leaves open: none at all where the section's kind
    itself is an open pin (its method or source), else those under an open pin's path."""
    mine = [k for k in pins if k == section or k.startswith(section + ".")]
    if not mine:
        return details
    if any(k in (section, f"{section}.method", f"{section}.source") for k in mine):
        return []
    return [d for d in details if not any(d.startswith(k) for k in mine)]


def _published(
    key: str, value: float | None, label: str = "", se: float | None = None
) -> tuple[Figure, Reading] | None:
    """A published figure: its row, and its reading (its rounding, no interval)."""
    if value is None:
        return None
    figure = Figure(kind(key), label, value)
    return figure, Reading(value, se=se, rounding=rounding(value))


def _acceptance(ref: Reference, run: dict[str, Figure]) -> list[tuple[Figure, Reading] | None]:
    """The published counters' figures: with the per-position counts their own standard error,
    else the run's (a published total alone says nothing of its spread)."""
    acc = ref.acceptance
    if acc is None or not acc.drafts or not acc.drafted:
        return []
    counts = SpecDecode.model_validate(
        {
            "drafts": acc.drafts,
            "draft_tokens": acc.drafted,
            "accepted_tokens": acc.accepted,
            "acceptance_rate": acc.accepted / acc.drafted,
            "acceptance_length": 1 + acc.accepted / acc.drafts,
            "accepted_per_draft": acc.accepted / acc.drafts,
            "per_position_rate": [],
            "per_position_accepted": list(acc.accepted_per_position or []),
        }
    )
    out: list[tuple[Figure, Reading] | None] = []
    for f in acceptance_figures(counts):
        mine = run.get(f.name)
        se = f.se if f.se is not None else (mine.se if mine is not None else None)
        out.append((f, Reading(f.value, se=se)))
    return out


def _soak_limit(report: Report) -> float | None:
    return report.soak.settings.max_memory_growth_mib if report.soak is not None else None


def reference_rows(ref: Reference, report: Report) -> list[MetricDelta]:
    """A row for every figure the reference states: judged against the run's by the rule of its
    kind (a published figure's band is the run's, plus its rounding), or why not: not measured
    by this run, or not comparable."""
    figs = figures(report)
    run = {f.name: f for f in figs}
    published: list[tuple[Figure, Reading] | None] = []
    for name, fig in ref.prompts.items():
        published.append(_published("decode_tps", fig.decode_tps, name))
        published.append(_published("wall_tps", fig.wall_tps, name))
        published.append(_published("ttft_ms", fig.ttft_ms, name))
    for depth, tps in sorted(ref.prefill_tps.items()):
        published.append(_published("prefill_tps", tps, str(depth)))
    published += _acceptance(ref, run)
    published.append(_published("kv_cache_tokens", ref.kv_cache_tokens))
    published.append(_published("draft_memory_mib", ref.draft_memory_mib))
    published.append(_published("context_max_tokens", ref.max_context_tokens))
    growth = _published("soak_memory_growth_mib", ref.vram_growth_mib)
    if growth is not None:
        g, r = growth
        growth = g, Reading(r.value, limit=_soak_limit(report))
    published.append(growth)
    out: list[MetricDelta] = []
    for item in published:
        if item is None:
            continue
        theirs, reading = item
        out.append(_row(theirs, reading, run.get(theirs.name), report))
    if ref.peak_vram_mib is not None:
        cards = [f for f in figs if f.kind.key == "peak_vram_mib" and f.value is not None]
        top = max(cards, key=lambda f: f.value or 0.0, default=None)
        theirs = Figure(kind("peak_vram_mib"), "", ref.peak_vram_mib)
        pub = Reading(ref.peak_vram_mib, rounding=rounding(ref.peak_vram_mib))
        row = _row(theirs, pub, top, report)
        out.append(row.model_copy(update={"metric": "peak VRAM (highest card)"}))
    return out


def _row(theirs: Figure, published: Reading, mine: Figure | None, report: Report) -> MetricDelta:
    why = not_comparable(theirs, report)
    if why is not None:
        base = delta(theirs.name, theirs.unit, published.value, None, theirs.higher_is_better)
        return base.model_copy(update={"key": theirs.kind.key, "note": f"not comparable: {why}"})
    if mine is None:
        base = delta(theirs.name, theirs.unit, published.value, None, theirs.higher_is_better)
        note = "not measured by this run"
        return base.model_copy(update={"key": theirs.kind.key, "note": note, "headline": True})
    reading = mine.reading(of_mean=theirs.kind.source in ("prompt", "prefill"))
    if reading.limit is None and published.limit is not None:
        reading = Reading(reading.value, reading.half_width_pct, reading.se, limit=published.limit)
    return figure_delta(theirs, mine, published, reading)


def not_comparable(theirs: Figure, report: Report) -> str | None:
    """Why a published figure cannot be set against this run (None: it can)."""
    key = theirs.kind.key
    served = report.recipe.get("server", {}).get("max_model_len")
    if (
        key == "context_max_tokens"
        and isinstance(served, int)
        and theirs.value
        and served < theirs.value
    ):
        return (
            f"this run serves {served} tokens (server.max_model_len), the reference "
            f"{theirs.value:.0f}"
        )
    draft = (report.recipe.get("speculative") or {}).get("draft") or {}
    if key == "draft_memory_mib" and draft.get("source") != "hub":
        return "this run's draft is not the reference's checkpoint"
    return None


def reference_verdict(rows: list[MetricDelta], report: Report, source: str) -> Reproduction:
    """This run against the reference's published figures: REPRODUCED when every judged figure
    the reference states is within its band, DIFFERENT naming each outside or not measured,
    INCONCLUSIVE where none is outside but some cannot be judged, NOT COMPARABLE without any."""
    void = unjudgeable(report, "this run")
    judged = [
        m
        for m in rows
        if m.headline and (m.note is None or (m.b is None and "not measured" in m.note))
    ]
    checks = [figure_check(m, bool(void)) for m in judged]
    common = {
        "original_run_id": "reference",
        "original_sha256": None,
        "original_recipe": source,
        "variation": False,
        "overrides": [],
        "figures": checks,
        "notes": [f"{m.metric}: {m.note}" for m in rows if m.note and m not in judged],
    }
    if not checks:
        none = "the reference states no figure this run can be judged on"
        return Reproduction(
            verdict="NOT COMPARABLE",
            summary=f"NOT COMPARABLE: {none}",
            differing=[],
            causes=[],
            not_comparable=[none],
            **common,
        )
    outside = [c for c in checks if c.status == "outside"]
    missing = [c for c in checks if c.new is None]
    unsure = [c for c in checks if c.status == "inconclusive"]
    if outside or missing:
        named = ", ".join(c.metric for c in outside + missing)
        return Reproduction(
            verdict="DIFFERENT",
            summary=f"DIFFERENT from the reference: {len(outside) + len(missing)} of "
            f"{len(checks)} judged figures outside their bands or not measured ({named})",
            differing=[
                f"{c.metric}: {num(c.original)} -> {num(c.new)} {c.unit} ({c.direction}, "
                f"{'better' if c.better else 'worse'}; {c.band_text()})"
                for c in outside
            ]
            + [f"{c.metric}: not measured by this run" for c in missing],
            causes=["the reference's rig and engine are its own: see the warnings above"],
            not_comparable=[],
            inconclusive=void,
            **common,
        )
    if unsure or void:
        why = void + [f"{c.metric}: cannot be judged" for c in unsure]
        return Reproduction(
            verdict="INCONCLUSIVE",
            summary="INCONCLUSIVE against the reference: " + "; ".join(why),
            differing=[],
            causes=[],
            not_comparable=[],
            inconclusive=why,
            **common,
        )
    return Reproduction(
        verdict="REPRODUCED",
        summary=f"REPRODUCED the reference: all {len(checks)} judged figures within their bands",
        differing=[],
        causes=[],
        not_comparable=[],
        **common,
    )
