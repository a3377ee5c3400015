"""vLLM's serving benchmark results: ``benchmarks/benchmark_serving.py --save-result`` (2024
on, the vllm-ascend CI's truncated copies too), ``vllm bench serve --save-result``, the run
files and ``summary.json`` list of ``vllm bench sweep``, and the multi-turn results of vLLM's
Rust ``vllm-bench`` (``mode: multi_turn``, per-turn metrics), speculative decoding included
where a run has it.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from kit.errors import BadInputError
from kit.importers.parse import (
    NO_OPTIONS,
    Fields,
    ImportOptions,
    Parsed,
    Reader,
    chunk_warning,
    failure_warning,
    hub_id,
    latency,
    mean_of,
    parse_file,
    per_position_counts,
    point_label,
    shown_name,
    stats,
)
from kit.importers.schema import (
    Imported,
    ImportedLoad,
    ImportedPoint,
    PerRequest,
    SpecDecode,
    Workload,
)
from kit.recipe.figures import Definition, LatencyFigures, PointFigure, ReferencePoint
from kit.recipe.protocol import AcceptanceFigures

TOOL = "vllm bench serve"
# the keys every layout has, the truncated vllm-ascend one included
_KEYS = ("backend", "model_id", "num_prompts", "request_rate")
_FIGURES = ("mean_ttft_ms", "output_throughput", "request_throughput")

# kit's load-point definitions come from this benchmark, so the figures map one to one; the one
# difference is TTFT (vLLM: to the first chunk with choices; kit: to the first with text)
DEFINITIONS: dict[PointFigure, Definition] = {
    "ttft_ms": Definition(
        kit="first_chunk_ms",
        text="vLLM: to the first streamed chunk with choices, text or not (kit's "
        "first_chunk_ms); kit's ttft_ms ends at the first chunk with text",
    ),
    "tpot_ms": Definition(
        kit="tpot_ms", text="vLLM: per request, (latency - TTFT) / (output tokens - 1), as kit's"
    ),
    "itl_ms": Definition(kit="itl_ms", text="vLLM: gaps between streamed chunks, as kit's"),
}


_MULTI_TURN = ("backend", "model_id", "mode", "per_turn_metrics")


def _is_run(doc: Any) -> bool:
    if not isinstance(doc, dict) or not any(k in doc for k in _FIGURES):
        return False
    return all(k in doc for k in _KEYS) or all(k in doc for k in _MULTI_TURN)


def detect(path: Path, data: Parsed) -> bool:
    """A JSON object with vLLM's run keys, or a JSON list of them (a sweep's summary)."""
    doc = data.json
    if isinstance(doc, list):
        return bool(doc) and all(_is_run(d) for d in doc)
    return _is_run(doc)


def _layout(run: Fields, summary: bool) -> str:
    if run.text("mode") == "multi_turn":
        return "vllm-bench (Rust) multi-turn result"
    if summary:
        return "vllm bench sweep summary.json (a list of runs)"
    if run.has("run_number"):
        return "vllm bench sweep run file"
    if not run.has("duration") and not run.has("completed"):
        return "benchmark_serving.py, truncated (latencies only)"
    if run.has("endpoint_type") or run.has("failed"):
        return "vllm bench serve --save-result (0.10 on)"
    return "benchmarks/benchmark_serving.py --save-result (2024)"


def _load(run: Fields, notes: list[str]) -> ImportedLoad | None:
    if run.text("mode") == "multi_turn":
        streams = run.count("multi_turn_concurrency")
        return (
            ImportedLoad(
                pattern="concurrency",
                level=streams,
                requests=run.count("completed"),
                note=f"{run.count('num_conversations')} conversation(s) of "
                f"{run.num('avg_turns_completed') or 0:g} turns, {streams} at a time; the "
                "completed turns stand for the requests",
            )
            if streams
            else None
        )
    rate = run.num("request_rate")
    cap = run.count("max_concurrency")
    prompts = run.count("num_prompts")
    burstiness = run.num("burstiness")
    if rate is None or rate == float("inf"):
        if cap:
            return ImportedLoad(pattern="concurrency", level=cap, requests=prompts)
        if prompts:
            return ImportedLoad(
                pattern="concurrency",
                level=prompts,
                requests=prompts,
                note=f"request rate inf with no max_concurrency: all {prompts} requests at once",
            )
        return None
    if rate <= 0:
        raise BadInputError(f"{run.file}: request_rate: {rate:g} is not a rate")
    arrival = "poisson"
    if burstiness is not None and burstiness != 1.0:
        notes.append(
            f"burstiness {burstiness:g} (gamma arrivals): kit sends Poisson ones (burstiness 1)"
        )
    return ImportedLoad(
        pattern="rate", level=rate, arrival=arrival, max_concurrency=cap, requests=prompts
    )


def _lat(run: Fields, name: str, scale: float = 1.0) -> LatencyFigures | None:
    return latency(
        run.finite(f"mean_{name}_ms"),
        run.finite(f"median_{name}_ms"),
        run.finite(f"p90_{name}_ms"),
        run.finite(f"p99_{name}_ms"),
        scale=scale,
    )


def _per_request(run: Fields, warnings: list[str]) -> PerRequest | None:
    ttfts = run.numbers("ttfts")
    outputs = run.numbers("output_lens")
    inputs = run.numbers("input_lens")
    if not (ttfts or outputs):
        return None
    errors = run.items("errors")
    count = max(len(ttfts), len(outputs))
    failed = sum(1 for e in errors if e)
    silent = [
        i
        for i, (t, n) in enumerate(zip(ttfts, outputs, strict=False))
        if n == 0 and t == 0.0 and not (i < len(errors) and errors[i])
    ]
    if silent:
        warnings.append(
            f"{len(silent)} of {count} requests have 0 output tokens and TTFT 0.0 with no error: "
            "vLLM counted them completed, and their TTFT 0.0 is inside its TTFT figures"
        )
    return PerRequest(
        count=count,
        failed=failed,
        input_tokens=stats(inputs),
        output_tokens=stats(outputs),
        ttft_ms=stats(t * 1000 for t in ttfts),
    )


def _point(run: Fields, index: int, notes: list[str], warnings: list[str]) -> ImportedPoint:
    load = _load(run, notes)
    completed = run.count("completed")
    prompts = run.count("num_prompts")
    failed = run.count("failed")
    if failed is None and completed is not None and prompts is not None:
        failed = prompts - completed
    total_tps = run.finite("total_token_throughput")
    if total_tps is None and run.has("input_throughput", "output_throughput"):
        inp, out = run.finite("input_throughput"), run.finite("output_throughput")
        if inp is not None and out is not None:
            total_tps = inp + out
            if index == 0:
                notes.append("total tok/s: input_throughput + output_throughput (no total key)")
    none_done = completed == 0
    e2e = _lat(run, "e2el") or latency(
        run.finite("mean_latency_ms"),
        run.finite("median_latency_ms"),
        run.finite("p90_latency_ms"),
        run.finite("p99_latency_ms"),
    )
    figures = ReferencePoint(
        requests=prompts,
        completed=completed,
        failed=failed,
        duration_s=run.finite("duration"),
        request_throughput=run.finite("request_throughput"),
        output_tps=run.finite("output_throughput"),
        total_tps=total_tps,
        # with nothing completed vLLM writes 0.0 for every latency: no figure, not a fast one
        ttft_ms=None if none_done else _lat(run, "ttft"),
        tpot_ms=None if none_done else _lat(run, "tpot"),
        itl_ms=None if none_done else _lat(run, "itl"),
        e2e_ms=None if none_done else e2e,
    )
    label = point_label(load, index)
    if not none_done:
        chunky = chunk_warning(
            f"{label}: ",
            figures.itl_ms.mean if figures.itl_ms else None,
            figures.tpot_ms.mean if figures.tpot_ms else None,
            _tokens_per_gap(run),
        )
        if chunky:
            warnings.append(chunky)
        sent = (
            prompts
            if prompts is not None
            else (completed + failed if completed is not None and failed is not None else None)
        )
        partial = failure_warning(f"{label}: ", sent, failed, _error_codes(run))
        if partial:
            warnings.append(partial)
    run_number = run.count("run_number")
    return ImportedPoint(
        label=label,
        load=load,
        run=run_number,
        figures=figures,
        input_tokens_mean=mean_of(run.finite("total_input_tokens"), completed),
        output_tokens_mean=mean_of(run.finite("total_output_tokens"), completed),
        per_request=_per_request(run, warnings),
    )


def _tokens_per_gap(run: Fields) -> float | None:
    """Output tokens after the first over the gaps the per-request ``itls`` hold (1: a gap a
    token)."""
    outputs = run.numbers("output_lens")
    gaps = [len(g) for g in run.items("itls") if isinstance(g, list)]
    if not gaps or len(gaps) != len(outputs) or not sum(gaps):
        return None
    return sum(max(n - 1, 0) for n, g in zip(outputs, gaps, strict=True) if g) / sum(gaps)


def _error_codes(run: Fields) -> dict[str, int] | None:
    """The distinct error texts of a run's per-request ``errors`` list, counted (vLLM saves
    the exception text, not a status code)."""
    errors = [str(e).strip().splitlines()[0][:60] for e in run.items("errors") if e]
    if not errors:
        return None
    out: dict[str, int] = {}
    for e in errors:
        out[e] = out.get(e, 0) + 1
    return out


def _speculative(run: Fields) -> SpecDecode | None:
    """The ``spec_decode_*`` keys a run saves when the server drafted (vLLM bench serve reads
    them from the server's counters; the Rust vllm-bench too)."""
    drafts = run.count("spec_decode_num_drafts")
    drafted = run.count("spec_decode_draft_tokens")
    accepted = run.count("spec_decode_accepted_tokens")
    rates = run.numbers("spec_decode_per_position_acceptance_rates")
    rate = run.finite("spec_decode_acceptance_rate")
    length = run.finite("spec_decode_acceptance_length")
    if all(v is None for v in (drafts, drafted, accepted, rate, length)) and not rates:
        return None
    counters = (
        AcceptanceFigures(
            accepted=accepted,
            drafted=drafted,
            drafts=drafts,
            accepted_per_position=per_position_counts(rates, drafts, accepted),
        )
        if drafts is not None and drafted is not None and accepted is not None
        else None
    )
    k = len(rates) or (drafted // drafts if drafts and drafted and drafted % drafts == 0 else None)
    return SpecDecode(
        drafting=True,
        num_speculative_tokens=k or None,
        acceptance=counters,
        acceptance_rate_pct=rate,
        acceptance_length=length,
        per_position_rates=rates,
        source="the spec_decode_* keys",
    )


def _turns(run: Fields) -> str | None:
    """The per-turn TTFT of a multi-turn run, as a note: the prompt grows turn by turn."""
    parts = []
    for i, raw in enumerate(run.items("per_turn_metrics")):
        if not isinstance(raw, dict):
            continue
        turn = Fields(raw, run.file, f"per_turn_metrics[{i}].")
        n, inputs = turn.count("completed"), turn.finite("total_input_tokens")
        ttft = turn.finite("mean_ttft_ms")
        if n and inputs is not None and ttft is not None:
            parts.append(f"turn {turn.count('turn_index')}: {inputs / n:.0f} in, {ttft:.0f} ms")
    return "per turn, mean prompt tokens and TTFT: " + "; ".join(parts) if parts else None


def _date(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return datetime.strptime(value, "%Y%m%d-%H%M%S").isoformat()
    except ValueError:
        return value


def _server_args(run: Fields, notes: list[str]) -> list[str]:
    """The serve parameters a sweep's run file carries, as vLLM arguments."""
    seqs = run.count("max_num_seqs")
    if seqs is None:
        return []
    notes.append(f"server: --max-num-seqs {seqs} (the sweep's serve parameter max_num_seqs)")
    return ["--max-num-seqs", str(seqs)]


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read a vLLM benchmark result (one run, or a sweep's list of runs)."""
    parsed = parse_file(path)
    doc = parsed.json
    summary = isinstance(doc, list)
    docs = doc if summary else [doc]
    runs = [Fields(d, path.name, f"[{i}]." if summary else "") for i, d in enumerate(docs)]
    first = runs[0]
    notes: list[str] = []
    warnings: list[str] = []
    points = [_point(r, i, notes, warnings) for i, r in enumerate(runs)]
    layout = _layout(first, summary)
    if layout.endswith("(latencies only)"):
        warnings.append(
            "truncated schema: only TTFT, TPOT and ITL statistics, no duration, request counts "
            "or throughput"
        )
    model = first.text("model_id")
    tokenizer = first.text("tokenizer_id")
    repo = hub_id(model) or hub_id(tokenizer)
    if model and repo is None:
        notes.append(f"model: the file names {shown_name(model)!r} (a local path or served name)")
    elif repo and repo != model:
        notes.append(f"model: the hub id is the tokenizer's ({repo}); requests named {model!r}")
    if first.text("backend") and first.text("label"):
        notes.append(f"label: {first.text('label')}")
    pts = [p for p in points if p.figures.completed]
    ins = [p.input_tokens_mean for p in pts if p.input_tokens_mean is not None]
    outs = [p.output_tokens_mean for p in pts if p.output_tokens_mean is not None]
    workload = Workload(
        dataset=None,
        random=False,
        input_tokens=round(sum(ins) / len(ins)) if ins else None,
        output_tokens=round(sum(outs) / len(outs)) if outs else None,
        lengths_from="total_input_tokens / completed, total_output_tokens / completed"
        if ins
        else None,
        endpoint=first.text("endpoint_type") or first.text("backend"),
    )
    if summary and len({p.label for p in points}) < len(points):
        notes.append(f"{len(points)} runs of {len({p.label for p in points})} point(s)")
    multi = first.text("mode") == "multi_turn"
    reference_only = None
    if multi:
        reference_only = (
            "a multi-turn run (each turn resends the conversation so far): kit's traffic sends "
            "single-turn requests"
        )
        turns = _turns(first)
        if turns:
            notes.append(turns)
        workload = workload.model_copy(update={"dataset": first.text("workload")})
    return Imported(
        file=path.name,
        tool="vllm-bench (Rust)"
        if multi
        else "vllm bench sweep"
        if summary or first.has("run_number")
        else TOOL,
        layout=layout,
        date=_date(first.text("date")),
        model=model,
        hub_repo=repo,
        workload=workload,
        points=points,
        server_args=_server_args(first, notes),
        speculative=_speculative(first),
        reference_only=reference_only,
        warnings=warnings,
        notes=notes,
    )


READER = Reader(
    tool="vllm bench serve / sweep",
    reads="vLLM benchmark_serving.py / `vllm bench serve --save-result` JSON, a "
    "`vllm bench sweep` run file or summary.json list, or a vllm-bench (Rust) multi-turn result",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
