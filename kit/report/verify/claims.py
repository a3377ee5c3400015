"""The ``summaries`` item's part for the context ladder and the soak: every figure recomputed
from their raw exchanges and memory readings (kit.bench.claims ``settle_ladder``,
``settle_soak``), and what was asked checked against the embedded recipe."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kit.bench.claims import (
    NOT_JUDGED,
    ContextLadder,
    Soak,
    planned_depths,
    settle_ladder,
    settle_soak,
    target_tokens,
)
from kit.bench.claims.context import placement
from kit.recipe import Bench
from kit.report.schema import Report
from kit.report.verify.checklist import differences, dump


def claims_problems(report: Report, done: list[str]) -> list[str]:
    """What differs between the stored context ladder and soak and those recomputed; each
    section recomputed is named in ``done``."""
    problems: list[str] = []
    bench = _bench(report.recipe)
    if report.context is not None:
        problems += _context_problems(report, report.context, bench)
        done.append(f"context ladder ({len(report.context.rungs)} depths)")
    if report.soak is not None:
        problems += _soak_problems(report.soak, bench)
        soak = report.soak
        done.append(f"soak ({len(soak.sessions)} x {soak.settings.turns} turns)")
    return problems


def _bench(recipe: dict[str, Any]) -> Bench | None:
    try:
        return Bench.model_validate(recipe.get("bench", {}))
    except ValidationError:
        return None  # the recipe item says why


def _max_len(recipe: dict[str, Any]) -> Any:
    server = recipe.get("server")
    return server.get("max_model_len", 4096) if isinstance(server, dict) else None


def _context_problems(report: Report, ladder: ContextLadder, bench: Bench | None) -> list[str]:
    problems = differences(dump(ladder), dump(settle_ladder(ladder)), "context")
    if bench is not None:
        if bench.context is None:
            problems.append("context: the embedded recipe has no bench.context")
        else:
            problems += differences(dump(ladder.settings), dump(bench.context), "context.settings")
    plan = planned_depths(ladder.settings, ladder.max_model_len)
    asked = [(r.depth, r.fraction) for r in ladder.rungs]
    if asked != plan:
        problems.append(f"context.rungs: depths {asked}, the settings give {plan}")
    for i, rung in enumerate(ladder.rungs):
        if (rung.key, rung.position) != placement(ladder.settings.seed, i):
            problems.append(f"context.rungs[{i}]: key and position are not the seed's")
    recipe_len = _max_len(report.recipe)
    if ladder.max_model_len_from == "recipe" and ladder.max_model_len != recipe_len:
        problems.append(
            f"context.max_model_len {ladder.max_model_len}: the recipe's is {recipe_len}"
        )
    model = report.recipe.get("model")
    synthetic = isinstance(model, dict) and model.get("source") == "synthetic"
    if ladder.recall_judged == synthetic:
        problems.append(
            f"context.recall_judged is {ladder.recall_judged}, but the weights are "
            f"{'synthetic' if synthetic else 'not synthetic'}"
        )
    if ladder.recall_note != (None if ladder.recall_judged else NOT_JUDGED):
        problems.append("context.recall_note does not say why recall is not judged")
    choices = report.server.engine_choices if report.server is not None else None
    logged = choices.kv_cache_tokens if choices is not None else None
    if None not in (logged, ladder.kv_cache_tokens) and logged != ladder.kv_cache_tokens:
        problems.append(
            f"context.kv_cache_tokens {ladder.kv_cache_tokens}: the server log says {logged}"
        )
    return problems


def _soak_problems(soak: Soak, bench: Bench | None) -> list[str]:
    problems = differences(dump(soak), dump(settle_soak(soak)), "soak")
    if bench is not None:
        if bench.soak is None:
            problems.append("soak: the embedded recipe has no bench.soak")
        else:
            problems += differences(dump(soak.settings), dump(bench.soak), "soak.settings")
    s = soak.settings
    if soak.target_tokens != target_tokens(s, soak.max_model_len):
        problems.append(
            f"soak.target_tokens {soak.target_tokens}: the settings give "
            f"{target_tokens(s, soak.max_model_len)}"
        )
    if [x.index for x in soak.sessions] != list(range(s.sessions)):
        problems.append(f"soak.sessions: not the {s.sessions} sessions of the settings, in order")
    for x in soak.sessions:
        where = [(t.session, t.turn) for t in x.turns]
        if where != [(x.index, t) for t in range(s.turns)]:
            problems.append(f"soak.sessions[{x.index}]: not its {s.turns} turns, in order")
    return problems
