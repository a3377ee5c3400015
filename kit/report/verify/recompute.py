"""Verify items recomputed from the raw records: ``summaries`` (per-prompt and prefill
statistics, spec-decode figures, GPU sampling summaries, energy per token, the quality probe's
figures from its per-token scores, with kit's own functions) and ``records`` (each request's
internal consistency, order, counts, run status)."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from typing import Any

from pydantic import ValidationError

from kit.bench import request_body, summarize_prefill, summarize_prompt
from kit.bench.load import summarize_point
from kit.bench.plausible import implausible, plausible
from kit.errors import BadInputError
from kit.metrics import add_spec, decode_tps, is_usable, spec_decode_from_counts, wall_tps
from kit.probe import Readings, build_sampling
from kit.quality import summarize
from kit.quality.measures import score_problems
from kit.recipe import Bench, Prompt
from kit.report.assemble import energy_of
from kit.report.causes import synthetic_check
from kit.report.files import cut
from kit.report.schema import Report
from kit.report.verify.checklist import REL_TOL, CheckItem, check_item, differences, dump
from kit.report.verify.claims import claims_problems


# a table of recomputations, one per part of the report
def summaries_item(report: Report) -> CheckItem:
    problems: list[str] = []
    done: list[str] = []
    b = report.bench
    if b is not None:
        bench = _bench_of(report)
        prompts = {p.name: p for p in bench.prompts} if bench is not None else {}
        for s in b.prompts:
            prompt = prompts.get(s.prompt)
            if prompt is None:
                problems.append(f"{s.prompt}: summarised, but not a prompt of the recipe")
                prompt = Prompt(name=s.prompt, text="-", max_tokens=s.max_tokens)
            skip = {"spec_decode", "server"}
            stored = s.model_dump(mode="json", exclude=skip)
            fresh = summarize_prompt(prompt, b.records)
            problems += differences(stored, fresh.model_dump(mode="json", exclude=skip), s.prompt)
            problems += _spec_problems(s.spec_decode, f"{s.prompt}.spec_decode")
        summarised = {s.prompt for s in b.prompts}
        for name in dict.fromkeys(r.prompt for r in b.records if r.phase == "measured"):
            if name not in summarised:
                problems.append(f"{name}: measured runs without a summary")
        done.append(f"{len(b.prompts)} prompt(s)")
        depths = set(bench.prefill.depths) if bench is not None and bench.prefill else set()
        for pf in b.prefill:
            if pf.depth not in depths:
                problems.append(f"prefill {pf.depth}: not a depth of the recipe")
            if pf.status == "measured":
                fresh_pf = summarize_prefill(pf.depth, b.records)
                problems += differences(dump(pf), dump(fresh_pf), f"prefill {pf.depth}")
            elif any(x is not None for x in (pf.prompt_tokens, pf.ttft_ms, pf.prefill_tps)):
                problems.append(f"prefill {pf.depth}: {pf.status}, yet it carries statistics")
        if b.prefill:
            done.append(f"{len(b.prefill)} prefill depth(s)")
        problems += _load_point_problems(b, bench)
        if b.load_points:
            done.append(f"{len(b.load_points)} load point(s)")
        windows = [s.spec_decode for s in b.prompts if s.spec_decode is not None]
        windows += [pt.spec_decode for pt in b.load_points if pt.spec_decode is not None]
        problems += differences(
            dump(b.spec_decode),
            dump(add_spec(windows)),
            "spec_decode (the prompts' and load points' windows)",
        )
        if windows:
            done.append("spec decode")
    sampling = report.gpu_sampling
    if sampling is not None:
        again_s = build_sampling(
            Readings(
                started_at=sampling.started_at,
                interval_s=sampling.interval_s,
                duration_s=sampling.duration_s,
                unavailable=sampling.unavailable,
                gpus=sampling.gpus,
                marks=sampling.marks,
                samples=sampling.samples,
            )
        )
        problems += differences(dump(sampling), dump(again_s), "gpu_sampling")
        done.append(f"GPU sampling summaries ({len(sampling.samples)} readings)")
    energy = energy_of(sampling, b)
    problems += differences(report.energy_per_token_j, energy, "energy_per_token_j")
    if energy is not None:
        done.append("energy per token")
    problems += (
        _synthetic_problems(report, done)
        + _quality_problems(report, done)
        + claims_problems(report, done)  # bench.context, bench.soak (kit.bench.claims)
    )
    records, left = _records_used(report)
    return check_item(
        "summaries",
        problems,
        f"{', '.join(done) or 'nothing to recompute'}: recomputed from {records} raw records"
        + left,
        "stored figures differ from those recomputed from the raw records" + left,
    )


def _records_used(report: Report, most: int = 5) -> tuple[int, str]:
    """How many raw records there are, and ' (record 3, record 18 left out: ...)': those every
    summary leaves out, the first ``most`` named (kit.bench.plausible), or ''."""
    records = report.bench.records if report.bench is not None else []
    out = [f"record {i}" for i, r in enumerate(records) if not plausible(r)]
    if not out:
        return len(records), ""
    more = f" and {len(out) - most} more" if len(out) > most else ""
    return len(records), f" ({', '.join(out[:most])}{more} left out: not a plausible measurement)"


def _synthetic_problems(report: Report, done: list[str]) -> list[str]:
    """The stored synthetic-acceptance check against the one recomputed from the embedded
    recipe and the counters (kit.report.causes)."""
    try:
        fresh = synthetic_check(report)
    except BadInputError as exc:
        return [f"synthetic_acceptance: {exc.message}"]
    if fresh is not None:
        done.append("synthetic acceptance")
    return differences(dump(report.synthetic_acceptance), dump(fresh), "synthetic_acceptance")


def _quality_problems(report: Report, done: list[str]) -> list[str]:
    """The quality probe: its settings are the embedded recipe's, its per-token scores agree
    with themselves, and its summary is the one recomputed from them (kit.quality)."""
    q = report.quality
    if q is None:
        return []
    out: list[str] = []
    bench = _bench_of(report)
    if bench is not None and dump(bench.quality) != dump(q.settings):
        out.append("quality.settings: not the embedded recipe's bench.quality")
    out += score_problems(q.served, q.token_ids, q.settings.top_k, "quality.served")
    ref = q.reference
    if ref is not None:
        out += score_problems(ref.scores, ref.token_ids, ref.top_k, "quality.reference")
        if ref.text_sha256 != q.text_sha256:
            out.append("quality.reference: scored another text than the probe")
    if (ref is None) == (q.no_reference is None):
        out.append("quality: says why there is no reference exactly when there is none")
    try:
        fresh = summarize(q.token_ids, q.served, ref)
    except ValueError as exc:
        return [*out, f"quality: {exc}"]
    done.append(f"quality probe ({fresh.positions} positions)")
    return out + differences(dump(q.summary), dump(fresh), "quality.summary")


def _spec_problems(sd: Any, where: str) -> list[str]:
    """A window's spec-decode figures recomputed from its counters."""
    if sd is None:
        return []
    again = spec_decode_from_counts(
        sd.drafts, sd.draft_tokens, sd.accepted_tokens, list(sd.per_position_accepted)
    )
    return differences(dump(sd), dump(again), where)


def _load_point_problems(b: Any, bench: Any) -> list[str]:
    """Each load point against the recipe's pattern, and its figures recomputed from the
    records (spec decode from its own counters; server counters and client CPU are readings,
    not derived)."""
    load = bench.load if bench is not None else None
    labels = {load.label(v): v for v in load.planned_levels()} if load is not None else {}
    out: list[str] = []
    unrecomputed = {"spec_decode", "server", "client_cpu_pct", "stop_reason"}  # see below
    for pt in b.load_points:
        if pt.label not in labels:
            out.append(f"{pt.label}: a load point, but not a level of the recipe's bench.load")
        fresh = summarize_point(
            pt.label, pt.pattern, pt.level, b.records, bench.slo if bench else None
        )
        out += differences(
            pt.model_dump(mode="json", exclude=unrecomputed),
            fresh.model_dump(mode="json", exclude=unrecomputed),
            pt.label,
        )
        out += _spec_problems(pt.spec_decode, f"{pt.label}.spec_decode")
    if load is not None:  # the pattern's stop rule (a sweep's; the others never stop early)
        for i, pt in enumerate(b.load_points):
            expected = load.stop_reason(b.load_points[: i + 1], bench.slo)
            if pt.stop_reason != expected:
                out.append(
                    f"{pt.label}: stop_reason {pt.stop_reason!r}, the {load.pattern}'s rule "
                    f"says {expected!r}"
                )
            if expected is not None and i + 1 < len(b.load_points):
                out.append(f"{pt.label}: the {load.pattern} went on after it should have stopped")
    summarised = {pt.label for pt in b.load_points}
    for name in dict.fromkeys(r.prompt for r in b.records if r.phase == "load"):
        if name not in summarised:
            out.append(f"{name}: measured load requests without a summary")
    return out


def _bench_of(report: Report) -> Any:
    """The embedded recipe's Bench section; None when it has no valid one."""
    try:
        return Bench.model_validate(report.recipe.get("bench", {}))
    except ValidationError:
        return None


def records_item(report: Report) -> CheckItem:
    problems: list[str] = []
    b = report.bench
    if report.status == "complete":
        if b is None or not b.complete:
            problems.append("status is complete, but the bench did not complete")
        if report.incomplete_reason is not None:
            problems.append("status is complete, yet incomplete_reason is set")
    elif not report.incomplete_reason:
        problems.append("status is incomplete without a reason")
    if b is None:
        return check_item(
            "records", problems, "no bench ran: no records", "the run status is wrong"
        )
    bench = _bench_of(report)
    if bench is None:
        problems.append("the embedded recipe has no valid bench section to check records against")
    limits = _record_limits(bench)
    if b.load_points and b.load_points[-1].stop_reason:
        # a pattern that stopped early (a sweep) runs none of its levels after its last point
        ran = {pt.label for pt in b.load_points}
        limits = {k: v for k, v in limits.items() if not k[1].startswith("load") or k[0] in ran}
    for i, r in enumerate(b.records):
        expected = limits.get((r.prompt, r.phase))
        where = f"record {i} ({r.prompt} {r.phase} #{r.index})"
        if bench is not None and expected is None:
            problems.append(f"{where}: not a prompt and phase of the recipe")
        max_tokens = expected[0] if expected else None
        fraction = bench.usable_fraction if bench is not None else None
        problems += [f"{where}: {p}" for p in implausible(r)]
        problems += [f"{where}: {p}" for p in _record_problems(r, max_tokens, fraction)]
    problems += _order_problems(b)
    problems += _count_problems(b, limits)
    if bench is not None:
        body = request_body(bench, b.served_model, "", 0)
        template = {k: v for k, v in body.items() if k not in {"messages", "max_tokens"}}
        problems += differences(b.request_template, template, "request_template")
    return check_item(
        "records",
        problems,
        f"{len(b.records)} records consistent: plausible values, rates, TTFT within wall, "
        "usable flags, chunk times, token counts, start times in order, counts per prompt",
        "raw records are inconsistent",
    )


def _record_limits(bench: Any) -> dict[tuple[str, str], tuple[int | None, int]]:
    """(prompt, phase) -> (max_tokens, how many requests) from the recipe's bench section; a
    load point's max_tokens vary with its dataset (None: not checked here)."""
    if bench is None:
        return {}
    out: dict[tuple[str, str], tuple[int | None, int]] = {}
    if bench.load is not None:
        for level in bench.load.planned_levels():
            label = bench.load.label(level)
            out[(label, "load_warmup")] = (None, bench.load.warmups_at(level))
            out[(label, "load")] = (None, bench.load.requests_at(level))
        for name in ("prefill_warmup", "prefill"):
            if bench.prefill is not None:
                for depth in bench.prefill.depths:
                    runs = bench.prefill.warmups if name == "prefill_warmup" else bench.prefill.runs
                    out[(f"prefill-{depth}", name)] = (bench.prefill.max_tokens, runs)
        return out
    for p in bench.prompts:
        out[(p.name, "warmup")] = (p.max_tokens, bench.warmups)
        out[(p.name, "measured")] = (p.max_tokens, bench.runs)
    if bench.prefill is not None:
        for depth in bench.prefill.depths:
            name = f"prefill-{depth}"
            out[(name, "prefill_warmup")] = (bench.prefill.max_tokens, bench.prefill.warmups)
            out[(name, "prefill")] = (bench.prefill.max_tokens, bench.prefill.runs)
    return out


# a table of checks on one record, each adding its problem
def _record_problems(  # noqa: C901
    r: Any, max_tokens: int | None, fraction: float | None
) -> list[str]:
    out: list[str] = []
    if max_tokens is not None and r.max_tokens != max_tokens:
        out.append(f"max_tokens {r.max_tokens}, the recipe says {max_tokens}")
    ttft, wall, tokens = r.ttft_s, r.wall_s, r.completion_tokens
    if ttft is not None and ttft <= 0:
        out.append(f"ttft_s {ttft} is not positive")
    if wall is not None and wall <= 0:
        out.append(f"wall_s {wall} is not positive")
    if ttft is not None and wall is not None and ttft > wall:
        out.append(f"ttft_s {ttft} is after wall_s {wall}")
    if tokens is not None and not 0 <= tokens <= r.max_tokens:
        out.append(f"completion_tokens {tokens} outside 0..max_tokens {r.max_tokens}")
    if tokens and wall and ttft:
        out += _rate_problems("decode_tps", r.decode_tps, decode_tps(tokens, wall, ttft))
    elif r.decode_tps is not None:
        out.append("decode_tps without tokens, TTFT and wall time to compute it from")
    if tokens and wall:
        out += _rate_problems("wall_tps", r.wall_tps, wall_tps(tokens, wall))
    elif r.wall_tps is not None:
        out.append("wall_tps without tokens and wall time to compute it from")
    if fraction is not None:
        usable = r.error is None and is_usable(tokens, r.max_tokens, fraction)
        if r.usable != usable:
            out.append(
                f"usable is {r.usable}, the rule (no error, at least {fraction:g} of max_tokens) "
                f"says {usable}"
            )
    elif r.usable and r.error is not None:
        out.append("usable despite an error")
    times = r.text_chunk_times_s
    if any(later < earlier for earlier, later in itertools.pairwise(times)):
        out.append("text_chunk_times_s go backwards")
    if times and ttft is not None and not math.isclose(times[0], ttft, abs_tol=1e-9):
        out.append(f"the first text chunk ({times[0]}) is not at ttft_s ({ttft})")
    if times and ttft is None:
        out.append("text chunks arrived, yet ttft_s is missing")
    if times and wall is not None and times[-1] > wall:
        out.append(f"a text chunk at {times[-1]} s is after the end of the stream ({wall} s)")
    if r.chunks < len(times):
        out.append(f"{len(times)} text chunk times but only {r.chunks} chunks")
    return out


def _rate_problems(name: str, stored: float | None, fresh: float | None) -> list[str]:
    if stored is None and fresh is None:
        return []
    if stored is None or fresh is None or not math.isclose(stored, fresh, rel_tol=REL_TOL):
        return [f"{name} {stored!r}, recomputed {fresh!r}"]
    return []


def _parse_time(value: str) -> dt.datetime | None:
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _order_problems(b: Any) -> list[str]:
    out: list[str] = []
    start, end = _parse_time(b.started_at), _parse_time(b.finished_at)
    for name, value, parsed in (
        ("started_at", b.started_at, start),
        ("finished_at", b.finished_at, end),
    ):
        if parsed is None:
            out.append(f"bench {name} {cut(repr(value))} is not an ISO 8601 time with a zone")
    previous = start
    for i, r in enumerate(b.records):
        t = _parse_time(r.started_at)
        if t is None:
            out.append(f"record {i}: started_at {cut(repr(r.started_at))} is not an ISO 8601 time")
            continue
        if previous is not None and t < previous:
            out.append(f"record {i}: started_at {r.started_at} is before the one before it")
        previous = t
    if previous is not None and end is not None and previous > end:
        out.append(f"the last record started after the bench finished ({b.finished_at})")
    return out


def _count_problems(b: Any, limits: dict[tuple[str, str], tuple[int | None, int]]) -> list[str]:
    out: list[str] = []
    groups: dict[tuple[str, str], list[int]] = {}
    for r in b.records:
        groups.setdefault((r.prompt, r.phase), []).append(r.index)
    for key, indexes in groups.items():
        if indexes != list(range(len(indexes))):
            out.append(f"{key[0]} {key[1]}: indexes {cut(str(indexes))} are not 0, 1, 2, ...")
        if key in limits and len(indexes) > limits[key][1]:
            out.append(
                f"{key[0]} {key[1]}: {len(indexes)} requests, the recipe plans {limits[key][1]}"
            )
    if b.complete:
        measured_prefill = {f"prefill-{pf.depth}" for pf in b.prefill if pf.status == "measured"}
        for (prompt, phase), (_, planned) in limits.items():
            if phase.startswith("prefill") and prompt not in measured_prefill:
                continue
            got = len(groups.get((prompt, phase), []))
            if got != planned:
                out.append(f"{prompt} {phase}: {got} requests in a complete run, planned {planned}")
    return out
