"""Verify stage: check a report file from a stranger, offline, item by item.

``verify_report`` runs every item and returns a :class:`Checklist`; an item that cannot run
because an earlier one made it impossible (an unreadable payload, a payload that fails the
schema) says so and counts as not checked. Items:

- ``envelope``: size and depth limits, the DSSE envelope's exact shape (``kit.sign``);
- ``signature``: with a public key it must verify; without one a signature is reported as not
  checked, and an unsigned report fails unless ``allow_unsigned``;
- ``payload``: the payload parses within the limits and is in canonical form;
- ``schema``: the ``Report`` model (strict) and the JSON Schema generated from it;
- ``recipe``: the embedded recipe validates, its sha256 matches, and so do the protocol flags;
- ``summaries``: per-prompt and prefill statistics, spec-decode figures, GPU sampling summaries
  and energy per token, recomputed from the raw records with kit's own functions;
- ``records``: each request's internal consistency (rates, TTFT within wall, usable flag, chunk
  times, token counts), start times in order, counts per prompt, run status, request template;
- ``patches``: the patch manifest is well-formed and names the recipe's series;
- ``validity``: the verdict recomputed from the report and its host evidence.

A file that cannot be opened as a kit report envelope at all (unreadable, over the size or
depth limit, not JSON, not an envelope) raises ``BadInputError`` (exit 2): there is nothing to
check. Any failed item makes the checklist fail (``kit report verify`` exits 1).

:func:`read_report_file` is the one way show and compare read a report: the same limits, the
canonical check and the strict schema, with errors that name the file.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib
import itertools
import math
import re
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kit.errors import BadInputError, VerificationFailed
from kit.report import SCHEMA_VERSION, Report, non_canonical_reasons, report_json_schema
from kit.sign import (
    MAX_BYTES,
    MAX_DEPTH,
    Envelope,
    SignatureCheck,
    canonical_bytes,
    load_payload,
    open_envelope,
    open_envelope_file,
    verify_envelope,
)

REL_TOL = 1e-9  # stored and recomputed figures agree to this relative tolerance
ABS_TOL = 1e-12
MAX_PROBLEMS = 12  # per item; the count of the rest is given

_SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z")
_PATCH_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.patch\Z")
_READ_HINT = "ask the sender for the report file exactly as kit wrote it"


class CheckItem(BaseModel):
    """One item of a checklist."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="envelope, signature, payload, schema, recipe, ...")
    ok: bool | None = Field(description="True: passed. False: failed. None: not checked.")
    detail: str = Field(description="One line: what was checked, or why it failed or was not.")
    problems: list[str] = Field(default_factory=list, description="Each problem found.")


class Checklist(BaseModel):
    """Every item ``verify_report`` ran on one report file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="The file checked ('<bytes>' for bytes in memory).")
    items: list[CheckItem] = Field(description="The items, in the order they ran.")

    @property
    def ok(self) -> bool:
        """No item failed (items not checked do not fail a checklist)."""
        return not any(item.ok is False for item in self.items)

    @property
    def failed(self) -> list[str]:
        return [item.name for item in self.items if item.ok is False]

    def item(self, name: str) -> CheckItem:
        for entry in self.items:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def render(self) -> str:
        """The checklist as text: ``[ok]``, ``[FAIL]`` or ``[--]`` (not checked) per item."""
        width = max(len(item.name) for item in self.items)
        lines = [f"kit report verify: {self.source}"]
        for item in self.items:
            mark = {True: "[ok]  ", False: "[FAIL]", None: "[--]  "}[item.ok]
            lines.append(f"  {mark} {item.name:<{width}}  {item.detail}")
            lines += [f"  {'':<6} {'':<{width}}  - {p}" for p in item.problems]
        counts = {v: sum(1 for i in self.items if i.ok is v) for v in (True, False, None)}
        if self.ok:
            lines.append(f"passed: {counts[True]} ok, {counts[None]} not checked")
        else:
            lines.append(
                f"FAILED: {counts[False]} of {len(self.items)} items ({', '.join(self.failed)})"
            )
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# reading


def read_report_file(
    path: Path | str, public_key: Ed25519PublicKey | None = None
) -> tuple[Report, SignatureCheck]:
    """Read a report file for show/compare: limits, envelope, signature, canonical payload,
    strict schema. With a key, a report not validly signed by it raises ``VerificationFailed``;
    everything malformed raises ``BadInputError`` naming the file."""
    p = Path(path)
    env = open_envelope_file(p)
    check = verify_envelope(env, public_key)
    if public_key is not None and not check.valid:
        raise VerificationFailed(
            f"{p}: {check.reason}",
            hint="the report was not signed by the holder of this key as it stands",
        )
    try:
        data = load_payload(env)
    except BadInputError as e:
        raise BadInputError(f"{p}: {e.message}", hint=e.hint) from None
    report, problems = _validate(env.payload, data, str(p))
    if report is None:
        raise BadInputError("\n".join(problems), hint=_READ_HINT)
    return report, check


def _validate(payload: bytes, data: dict[str, Any], label: str) -> tuple[Report | None, list[str]]:
    """The report (strict model, then the JSON Schema on the parsed payload) and every schema
    problem, each ``label: path: message``."""
    try:
        report = Report.model_validate_json(payload, strict=True)
    except ValidationError as exc:
        return None, _pydantic_problems(exc, label)
    problems = [f"{label}: {p}" for p in _json_schema_problems(data)]
    return (None if problems else report), problems


def _pydantic_problems(exc: ValidationError, label: str) -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(top)"
        if loc == "schema_version" and isinstance(err.get("input"), int):
            if err["input"] > SCHEMA_VERSION:
                out.append(
                    f"{label}: schema_version {err['input']} is newer than this kit reads "
                    f"({SCHEMA_VERSION}): upgrade kit"
                )
                continue
        out.append(f"{label}: {loc}: {err['msg']}")
    return _capped(out)


@functools.lru_cache(maxsize=1)
def _schema_validator() -> Any:
    try:  # a dev dependency: verify still runs on a machine without it
        jsonschema = importlib.import_module("jsonschema")
    except ImportError:
        return None
    schema = report_json_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _json_schema_problems(data: dict[str, Any]) -> list[str]:
    validator = _schema_validator()
    if validator is None:
        return []
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    return _capped(
        [
            f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {_cut(e.message, 160)}"
            for e in errors
        ]
    )


# ---------------------------------------------------------------------------------------------
# the checklist


def verify_report(
    source: Path | str | bytes,
    public_key: Ed25519PublicKey | None = None,
    *,
    allow_unsigned: bool = False,
) -> Checklist:
    """Check a report file (a path, or its bytes) and return the checklist of every item.

    Raises ``BadInputError`` only when the file cannot be opened as a kit report envelope.
    """
    if isinstance(source, bytes):
        label = "<bytes>"
        env = open_envelope(source)
    else:
        label = str(source)
        env = open_envelope_file(Path(source))
    items = [
        CheckItem(
            name="envelope",
            ok=True,
            detail=f"DSSE envelope of {env.payload_type}, payload {len(env.payload):,} bytes "
            f"(limits {MAX_BYTES:,} bytes, {MAX_DEPTH} levels)",
        ),
        _signature_item(env, public_key, allow_unsigned),
    ]
    data: dict[str, Any] | None = None
    try:
        data = load_payload(env)
        items.append(CheckItem(name="payload", ok=True, detail="a JSON object in canonical form"))
    except BadInputError as e:
        items.append(CheckItem(name="payload", ok=False, detail=e.message))
    if data is None:
        skipped = "skipped: the payload is unreadable"
        names = ("schema", "recipe", "summaries", "records", "patches", "validity")
        items += [CheckItem(name=n, ok=None, detail=skipped) for n in names]
        return Checklist(source=label, items=items)

    report, problems = _validate(env.payload, data, "payload")
    if report is not None:
        how = "the JSON Schema" if _schema_validator() else "no JSON Schema (jsonschema missing)"
        items.append(CheckItem(name="schema", ok=True, detail=f"Report model (strict) and {how}"))
    else:
        items.append(
            CheckItem(
                name="schema",
                ok=False,
                detail="the payload does not match the report schema",
                problems=[p.removeprefix("payload: ") for p in problems],
            )
        )
    items.append(_recipe_item(data))
    if report is None:
        skipped = "skipped: the payload does not match the schema"
        items += [CheckItem(name=n, ok=None, detail=skipped) for n in ("summaries", "records")]
    else:
        items += [_summaries_item(report), _records_item(report)]
    items.append(_patches_item(data))
    if report is None:
        items.append(
            CheckItem(
                name="validity", ok=None, detail="skipped: the payload does not match the schema"
            )
        )
    else:
        items.append(_validity_item(report))
    return Checklist(source=label, items=items)


def _item(name: str, problems: list[str], ok_detail: str, fail_detail: str) -> CheckItem:
    if not problems:
        return CheckItem(name=name, ok=True, detail=ok_detail)
    return CheckItem(name=name, ok=False, detail=fail_detail, problems=_capped(problems))


def _signature_item(
    env: Envelope, public_key: Ed25519PublicKey | None, allow_unsigned: bool
) -> CheckItem:
    check = verify_envelope(env, public_key)
    if check.valid:
        return CheckItem(name="signature", ok=True, detail=check.reason)
    if not check.signed:
        if public_key is None and allow_unsigned:
            return CheckItem(
                name="signature",
                ok=None,
                detail="unsigned (allowed): nothing shows who wrote the report or that it is "
                "unaltered",
            )
        why = "" if public_key is None else "; a key was given, so a signature is required"
        return CheckItem(
            name="signature",
            ok=False,
            detail="unsigned: nothing shows who wrote the report or that it is unaltered" + why,
        )
    if check.valid is None:
        return CheckItem(name="signature", ok=None, detail=check.reason + " (pass --key)")
    return CheckItem(name="signature", ok=False, detail=check.reason)


def _recipe_item(data: dict[str, Any]) -> CheckItem:
    from kit.errors import RecipeError
    from kit.recipe import recipe_sha256, validate_data

    recipe, stored = data.get("recipe"), data.get("recipe_sha256")
    if not isinstance(recipe, dict) or not isinstance(stored, str):
        return CheckItem(name="recipe", ok=False, detail="no embedded recipe or recipe_sha256")
    problems: list[str] = []
    # The hash was taken over the recipe as kit dumped it, but the JSON round trip turns a
    # float with an integral value (1.0) into an int (1). The recipe model turns it back; its
    # dump is cut to the keys the report carries, so a field a newer kit added (with its
    # default) does not change the hash, while a key removed from the report still does. A
    # hash over the RFC 8785 bytes, which the round trip leaves alone, is accepted too.
    candidates = [hashlib.sha256(canonical_bytes(recipe)).hexdigest(), recipe_sha256(recipe)]
    try:
        model = validate_data(recipe, "recipe")
    except RecipeError as e:
        problems += e.problems
    else:
        candidates.append(recipe_sha256(_restricted(model.to_json_dict(), recipe)))
        if data.get("recipe_name") != model.name:
            problems.append(
                f"recipe_name {_cut(repr(data.get('recipe_name')))} is not the recipe's "
                f"name {model.name!r}"
            )
        reasons = non_canonical_reasons(recipe)
        if data.get("non_canonical") != reasons:
            problems.append("non_canonical does not list the recipe's departures from the protocol")
        if data.get("canonical") is not (not reasons):
            problems.append(
                f"canonical is {data.get('canonical')!r}, the recipe says {not reasons}"
            )
    if stored not in candidates:
        problems.insert(
            0,
            f"recipe_sha256 {_cut(stored, 20)} does not match the embedded recipe "
            f"({candidates[-1]})",
        )
    return _item(
        "recipe",
        problems,
        f"sha256 {stored[:16]}… matches the embedded recipe; protocol flags agree",
        "the embedded recipe does not match its hash or the report",
    )


def _restricted(normalized: Any, raw: Any) -> Any:
    """``normalized`` cut to the keys ``raw`` has, all the way down."""
    if isinstance(normalized, dict) and isinstance(raw, dict):
        return {k: _restricted(normalized[k], raw[k]) for k in raw if k in normalized}
    if isinstance(normalized, list) and isinstance(raw, list) and len(normalized) == len(raw):
        return [_restricted(n, r) for n, r in zip(normalized, raw, strict=True)]
    return normalized


# ---------------------------------------------------------------------------------------------
# summaries recomputed from the raw records


def _summaries_item(report: Report) -> CheckItem:
    from kit.bench import summarize_prefill, summarize_prompt
    from kit.metrics import add_spec, spec_decode_from_counts
    from kit.pipeline import span_tokens
    from kit.probe import build_sampling, energy_per_token_j
    from kit.recipe import Prompt

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
            stored = s.model_dump(mode="json", exclude={"spec_decode", "server"})
            fresh = summarize_prompt(prompt, b.records)
            problems += _differences(
                stored, fresh.model_dump(mode="json", exclude={"spec_decode", "server"}), s.prompt
            )
            if s.spec_decode is not None:
                sd = s.spec_decode
                again = spec_decode_from_counts(
                    sd.drafts, sd.draft_tokens, sd.accepted_tokens, list(sd.per_position_accepted)
                )
                problems += _differences(_dump(sd), _dump(again), f"{s.prompt}.spec_decode")
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
                problems += _differences(_dump(pf), _dump(fresh_pf), f"prefill {pf.depth}")
            elif any(x is not None for x in (pf.prompt_tokens, pf.ttft_ms, pf.prefill_tps)):
                problems.append(f"prefill {pf.depth}: {pf.status}, yet it carries statistics")
        if b.prefill:
            done.append(f"{len(b.prefill)} prefill depth(s)")
        windows = [s.spec_decode for s in b.prompts if s.spec_decode is not None]
        problems += _differences(
            _dump(b.spec_decode), _dump(add_spec(windows)), "spec_decode (the prompts' windows)"
        )
        if windows:
            done.append("spec decode")
    sampling = report.gpu_sampling
    if sampling is not None:
        again_s = build_sampling(
            started_at=sampling.started_at,
            interval_s=sampling.interval_s,
            duration_s=sampling.duration_s,
            unavailable=sampling.unavailable,
            gpus=sampling.gpus,
            marks=sampling.marks,
            samples=sampling.samples,
        )
        problems += _differences(_dump(sampling), _dump(again_s), "gpu_sampling")
        done.append(f"GPU sampling summaries ({len(sampling.samples)} readings)")
    energy: float | None = None
    if sampling is not None and b is not None:
        value = energy_per_token_j(sampling, span_tokens(b))
        energy = value if isinstance(value, float) else None
    problems += _differences(report.energy_per_token_j, energy, "energy_per_token_j")
    if energy is not None:
        done.append("energy per token")
    records = len(b.records) if b is not None else 0
    return _item(
        "summaries",
        problems,
        f"{', '.join(done) or 'nothing to recompute'}: recomputed from {records} raw records",
        "stored figures differ from those recomputed from the raw records",
    )


def _dump(model: BaseModel | None) -> Any:
    return None if model is None else model.model_dump(mode="json")


def _bench_of(report: Report) -> Any:
    """The embedded recipe's Bench section; None when it has no valid one."""
    from kit.recipe import Bench

    try:
        return Bench.model_validate(report.recipe.get("bench", {}))
    except ValidationError:
        return None


def _differences(stored: Any, fresh: Any, path: str) -> list[str]:
    """Every place two JSON values differ; numbers within ``REL_TOL`` agree."""
    out: list[str] = []
    _walk(stored, fresh, path, out)
    return out


def _walk(stored: Any, fresh: Any, path: str, out: list[str]) -> None:
    if isinstance(stored, dict) and isinstance(fresh, dict):
        for key in dict.fromkeys([*stored, *fresh]):
            if key not in stored or key not in fresh:
                out.append(f"{path}.{key}: {'recomputed' if key in fresh else 'stored'} only")
            else:
                _walk(stored[key], fresh[key], f"{path}.{key}", out)
    elif isinstance(stored, list) and isinstance(fresh, list) and len(stored) == len(fresh):
        for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
            _walk(a, b, f"{path}[{i}]", out)
    elif _number(stored) and _number(fresh):
        if not math.isclose(stored, fresh, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            out.append(f"{path}: stored {stored!r}, recomputed {fresh!r}")
    elif stored != fresh or type(stored) is not type(fresh):
        out.append(f"{path}: stored {_cut(repr(stored))}, recomputed {_cut(repr(fresh))}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------
# the raw records themselves


def _records_item(report: Report) -> CheckItem:
    from kit.bench import request_body

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
        return _item("records", problems, "no bench ran: no records", "the run status is wrong")
    bench = _bench_of(report)
    if bench is None:
        problems.append("the embedded recipe has no valid bench section to check records against")
    limits = _record_limits(bench)
    for i, r in enumerate(b.records):
        expected = limits.get((r.prompt, r.phase))
        where = f"record {i} ({r.prompt} {r.phase} #{r.index})"
        if bench is not None and expected is None:
            problems.append(f"{where}: not a prompt and phase of the recipe")
        max_tokens = expected[0] if expected else None
        fraction = bench.usable_fraction if bench is not None else None
        problems += [f"{where}: {p}" for p in _record_problems(r, max_tokens, fraction)]
    problems += _order_problems(b)
    problems += _count_problems(b, limits)
    if bench is not None:
        body = request_body(bench, b.served_model, "", 0)
        template = {k: v for k, v in body.items() if k not in {"messages", "max_tokens"}}
        problems += _differences(b.request_template, template, "request_template")
    return _item(
        "records",
        problems,
        f"{len(b.records)} records consistent: rates, TTFT within wall, usable flags, "
        "chunk times, token counts, start times in order, counts per prompt",
        "raw records are inconsistent",
    )


def _record_limits(bench: Any) -> dict[tuple[str, str], tuple[int, int]]:
    """(prompt, phase) -> (max_tokens, how many requests) from the recipe's bench section."""
    if bench is None:
        return {}
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for p in bench.prompts:
        out[(p.name, "warmup")] = (p.max_tokens, bench.warmups)
        out[(p.name, "measured")] = (p.max_tokens, bench.runs)
    if bench.prefill is not None:
        for depth in bench.prefill.depths:
            name = f"prefill-{depth}"
            out[(name, "prefill_warmup")] = (bench.prefill.max_tokens, bench.prefill.warmups)
            out[(name, "prefill")] = (bench.prefill.max_tokens, bench.prefill.runs)
    return out


def _record_problems(r: Any, max_tokens: int | None, fraction: float | None) -> list[str]:
    from kit.metrics import decode_tps, is_usable, wall_tps

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
            out.append(f"bench {name} {_cut(repr(value))} is not an ISO 8601 time with a zone")
    previous = start
    for i, r in enumerate(b.records):
        t = _parse_time(r.started_at)
        if t is None:
            out.append(f"record {i}: started_at {_cut(repr(r.started_at))} is not an ISO 8601 time")
            continue
        if previous is not None and t < previous:
            out.append(f"record {i}: started_at {r.started_at} is before the one before it")
        previous = t
    if previous is not None and end is not None and previous > end:
        out.append(f"the last record started after the bench finished ({b.finished_at})")
    return out


def _count_problems(b: Any, limits: dict[tuple[str, str], tuple[int, int]]) -> list[str]:
    out: list[str] = []
    groups: dict[tuple[str, str], list[int]] = {}
    for r in b.records:
        groups.setdefault((r.prompt, r.phase), []).append(r.index)
    for key, indexes in groups.items():
        if indexes != list(range(len(indexes))):
            out.append(f"{key[0]} {key[1]}: indexes {_cut(str(indexes))} are not 0, 1, 2, ...")
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


# ---------------------------------------------------------------------------------------------
# patches and validity


def _patches_item(data: dict[str, Any]) -> CheckItem:
    manifest = data.get("patches")
    recipe = _obj(data.get("recipe"))
    named = _obj(recipe.get("server")).get("patches")
    if manifest is None:
        if named:
            return CheckItem(
                name="patches",
                ok=False,
                detail=f"the recipe applies patch series {_cut(repr(named))}, "
                "but the report has no patch manifest",
            )
        return CheckItem(name="patches", ok=True, detail="none applied (the recipe names none)")
    problems: list[str] = []
    if not isinstance(manifest, dict):
        return CheckItem(name="patches", ok=False, detail="the patch manifest is not an object")
    series = manifest.get("series")
    if not isinstance(series, str) or not series:
        problems.append("series: missing or not a name")
    elif named and series != named:
        problems.append(f"series {series!r} is not the recipe's {_cut(repr(named))}")
    engine = _obj(data.get("engine"))
    claimed = engine.get("patch_series")
    if claimed and claimed != series:
        problems.append(f"the engine says it carries {_cut(repr(claimed))}, not {series!r}")
    built_for = (manifest.get("engine"), manifest.get("version"))
    if engine and built_for != (engine.get("name"), engine.get("version")):
        problems.append(
            f"the manifest is for {_cut(str(built_for[0]))} {_cut(str(built_for[1]))}, the "
            f"engine that served is {_cut(str(engine.get('name')))} "
            f"{_cut(str(engine.get('version')))}"
        )
    patches, files = manifest.get("patches"), manifest.get("files")
    if not isinstance(patches, list) or not patches:
        problems.append("patches: not a non-empty list")
        patches = []
    if not isinstance(files, list):
        problems.append("files: not a list")
        files = []
    seen: set[str] = set()
    for i, p in enumerate(patches):
        if not isinstance(p, dict):
            problems.append(f"patches[{i}]: not an object")
            continue
        name = p.get("file")
        if not isinstance(name, str) or not _PATCH_FILE.match(name):
            problems.append(f"patches[{i}].file: {_cut(repr(name))} is not a patch file name")
        elif name in seen:
            problems.append(f"patches[{i}].file: {name} listed twice")
        else:
            seen.add(name)
        if not _is_sha256(p.get("sha256")):
            problems.append(f"patches[{i}].sha256: {_cut(repr(p.get('sha256')))} is not a sha256")
        if "state" in p and p["state"] != "applied":
            problems.append(f"patches[{i}]: state {_cut(repr(p['state']))}, not applied")
    paths: set[str] = set()
    for i, f in enumerate(files):
        if not isinstance(f, dict):
            problems.append(f"files[{i}]: not an object")
            continue
        path = f.get("path")
        if not isinstance(path, str) or not _relative_path(path):
            problems.append(f"files[{i}].path: {_cut(repr(path))} is not a relative path")
        elif path in paths:
            problems.append(f"files[{i}].path: {path} listed twice")
        else:
            paths.add(path)
        if f.get("sha256") is None:
            problems.append(f"files[{i}]: {_cut(repr(path))} is missing on the engine")
        elif not _is_sha256(f.get("sha256")):
            problems.append(f"files[{i}].sha256: {_cut(repr(f.get('sha256')))} is not a sha256")
    return _item(
        "patches",
        problems,
        f"series {series}: {len(patches)} patch(es) and {len(files)} file(s) with sha256",
        "the patch manifest is malformed",
    )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and bool(_SHA256_HEX.match(value))


def _relative_path(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and "\\" not in path and ".." not in parts


def _validity_item(report: Report) -> CheckItem:
    from kit.validity import verdict

    fresh = verdict(report.model_dump(mode="json"), report.host, report.gpu_sampling)
    problems = _differences(_dump(report.validity), _dump(fresh), "validity")
    errors = [f.code for f in fresh.reasons if f.severity == "error"]
    warnings = [f.code for f in fresh.reasons if f.severity == "warning"]
    said = "valid" if fresh.valid else f"INVALID ({', '.join(errors)})"
    if warnings:
        said += f", warnings: {', '.join(warnings)}"
    return _item(
        "validity",
        problems,
        f"the stored verdict is the recomputed one: {said}",
        "the stored verdict is not the one recomputed from the report",
    )


# ---------------------------------------------------------------------------------------------


def _capped(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return [*problems[:MAX_PROBLEMS], f"... and {len(problems) - MAX_PROBLEMS} more"]


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
