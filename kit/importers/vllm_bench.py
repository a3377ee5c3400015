"""vLLM's serving benchmark results: ``benchmarks/benchmark_serving.py --save-result`` (2024
on, the vllm-ascend CI's truncated copies too), ``vllm bench serve --save-result`` and the run
files and ``summary.json`` list of ``vllm bench sweep``.

kit's load-point definitions come from this benchmark, so the figures map one to one; the one
difference is TTFT (vLLM: to the first chunk with choices; kit: to the first with text).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from kit.errors import BadInputError
from kit.importers.parse import (
    Fields,
    Parsed,
    Reader,
    hub_id,
    latency,
    mean_of,
    parse_file,
    point_label,
    shown_name,
    stats,
)
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint, PerRequest, Workload
from kit.recipe.figures import Definition, LatencyFigures, PointFigure, ReferencePoint

TOOL = "vllm bench serve"
# the keys every layout has, the truncated vllm-ascend one included
_KEYS = ("backend", "model_id", "num_prompts", "request_rate")
_FIGURES = ("mean_ttft_ms", "output_throughput", "request_throughput")

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


def _is_run(doc: Any) -> bool:
    return (
        isinstance(doc, dict) and all(k in doc for k in _KEYS) and any(k in doc for k in _FIGURES)
    )


def detect(path: Path, data: Parsed) -> bool:
    """A JSON object with vLLM's run keys, or a JSON list of them (a sweep's summary)."""
    doc = data.json
    if isinstance(doc, list):
        return bool(doc) and all(_is_run(d) for d in doc)
    return _is_run(doc)


def _layout(run: Fields, summary: bool) -> str:
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
    run_number = run.count("run_number")
    return ImportedPoint(
        label=point_label(load, index),
        load=load,
        run=run_number,
        figures=figures,
        input_tokens_mean=mean_of(run.finite("total_input_tokens"), completed),
        output_tokens_mean=mean_of(run.finite("total_output_tokens"), completed),
        per_request=_per_request(run, warnings),
    )


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


def read(path: Path) -> Imported:
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
    return Imported(
        file=path.name,
        tool="vllm bench sweep" if summary or first.has("run_number") else TOOL,
        layout=layout,
        date=_date(first.text("date")),
        model=model,
        hub_repo=repo,
        workload=workload,
        points=points,
        server_args=_server_args(first, notes),
        warnings=warnings,
        notes=notes,
    )


READER = Reader(
    tool="vllm bench serve / sweep",
    reads="vLLM benchmark_serving.py / `vllm bench serve --save-result` JSON, or a "
    "`vllm bench sweep` run file or summary.json list",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
