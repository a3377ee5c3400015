"""LLMPerf's ``token_benchmark_ray.py`` results: ``*_summary.json`` (``version`` 2023-08-31)
and ``*_individual_responses.json`` (one record per request, no load stated). Its figures are
not all kit's (:data:`DEFINITIONS`).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kit.importers.parse import (
    NO_OPTIONS,
    Fields,
    ImportOptions,
    Parsed,
    Reader,
    failure_warning,
    hub_id,
    latency,
    parse_file,
    point_label,
    stats,
)
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint, PerRequest, Workload
from kit.recipe.figures import Definition, LatencyFigures, PointFigure, ReferencePoint

# LLMPerf's inter_token_latency is, per request, the sum of every gap (the first token's
# included) over the output tokens: about latency / output tokens, neither kit's TPOT nor its ITL
ITL_E2E = "llmperf inter_token_latency (every gap, TTFT included, / output tokens)"
DEFINITIONS: dict[PointFigure, Definition] = {
    "ttft_ms": Definition(kit="ttft_ms", text="LLMPerf ttft_s: to the first streamed chunk"),
    "itl_ms": Definition(
        kit=None,
        text="LLMPerf inter_token_latency_s is latency / output tokens (TTFT included): "
        "kept apart, neither kit's TPOT nor its ITL",
    ),
    "output_tps": Definition(
        kit=None,
        text="LLMPerf counts output tokens with a Llama tokenizer, whatever the model",
    ),
}
_RECORD_KEYS = ("ttft_s", "end_to_end_latency_s", "number_output_tokens")


def _is_record(doc: Any) -> bool:
    return isinstance(doc, dict) and all(k in doc for k in _RECORD_KEYS)


def detect(path: Path, data: Parsed) -> bool:
    """A summary object (``results_*`` keys and the load) or a list of request records."""
    doc = data.json
    if isinstance(doc, dict):
        return "num_concurrent_requests" in doc and any(
            isinstance(k, str) and k.startswith("results_") for k in doc
        )
    return isinstance(doc, list) and bool(doc) and all(_is_record(d) for d in doc)


def _lat(doc: Fields, name: str) -> LatencyFigures | None:
    base = f"results_{name}_s"
    return latency(
        doc.finite(f"{base}_mean"),
        doc.finite(f"{base}_quantiles_p50"),
        doc.finite(f"{base}_quantiles_p90"),
        doc.finite(f"{base}_quantiles_p99"),
        scale=1000.0,
    )


def _stats_ms(values: list[float]) -> LatencyFigures | None:
    s = stats(values)
    if s is None:
        return None
    return latency(s.mean, s.median, s.p90, s.p99, scale=1000.0)


_CODES = re.compile(r"(-?\d+(?:\.\d+)?)\s*:\s*(\d+)")


def _codes(value: Any) -> dict[str, int] | None:
    """LLMPerf's error code frequency (a dict, or its Python text "{429.0: 130}")."""
    pairs = value.items() if isinstance(value, dict) else _CODES.findall(str(value or ""))
    out = {f"{float(code):g}": int(n) for code, n in pairs}
    return out or None


def _read_records(path: Path, records: list[Any]) -> Imported:
    rows = [Fields(r, path.name, f"[{i}].") for i, r in enumerate(records)]
    ok = [r for r in rows if r.raw("error_code") is None and not r.raw("error_msg")]
    failed = len(rows) - len(ok)
    codes: dict[str, int] = {}
    for r in rows:
        if r.raw("error_code") is not None:
            key = f"{r.finite('error_code') or 0:g}"
            codes[key] = codes.get(key, 0) + 1
    ttft = [v for r in ok if (v := r.finite("ttft_s")) is not None]
    e2e = [v for r in ok if (v := r.finite("end_to_end_latency_s")) is not None]
    itl = [v for r in ok if (v := r.finite("inter_token_latency_s")) is not None]
    ins = [v for r in ok if (v := r.finite("number_input_tokens")) is not None]
    outs = [v for r in ok if (v := r.finite("number_output_tokens")) is not None]
    other = {}
    itl_e2e = _stats_ms(itl)
    if itl_e2e is not None:
        other[ITL_E2E] = itl_e2e
    point = ImportedPoint(
        label=point_label(None, 0),
        load=None,
        figures=ReferencePoint(
            requests=len(rows),
            completed=len(ok),
            failed=failed,
            ttft_ms=_stats_ms(ttft),
            e2e_ms=_stats_ms(e2e),
        ),
        input_tokens_mean=sum(ins) / len(ins) if ins else None,
        output_tokens_mean=sum(outs) / len(outs) if outs else None,
        other=other,
        per_request=PerRequest(
            count=len(rows),
            failed=failed,
            input_tokens=stats(ins),
            output_tokens=stats(outs),
            ttft_ms=stats(v * 1000 for v in ttft),
            e2e_ms=stats(v * 1000 for v in e2e),
        ),
    )
    workload = Workload(
        input_tokens=round(sum(ins) / len(ins)) if ins else None,
        output_tokens=round(sum(outs) / len(outs)) if outs else None,
        lengths_from="number_input_tokens / number_output_tokens mean" if ins else None,
    )
    warnings = [
        "request records only: no model, concurrency or throughput (the *_summary.json "
        "beside it has them); figures computed from the records"
    ]
    partial = failure_warning("", len(rows), failed, codes or None)
    if partial:
        warnings.append(partial)
    return Imported(
        file=path.name,
        tool="llmperf",
        layout="individual_responses.json (request records)",
        points=[point],
        workload=workload,
        warnings=warnings,
    )


def _range_ratio(mean: float | None, stddev: float | None) -> float:
    """kit's uniform range ratio with LLMPerf's normal spread's standard deviation."""
    if not mean or not stddev:
        return 0.0
    return round(min(math.sqrt(3) * stddev / mean, 0.99), 3)


def _read_summary(path: Path, doc: Fields) -> Imported:
    notes: list[str] = []
    warnings: list[str] = []
    model = doc.text("model")
    streams = doc.count("num_concurrent_requests")
    started = doc.count("results_num_requests_started")
    completed = doc.count("results_num_completed_requests")
    errors = doc.count("results_number_errors")
    per_min = doc.finite("results_num_completed_requests_per_min")
    load = ImportedLoad(pattern="concurrency", level=streams, requests=started) if streams else None
    other = {}
    itl = _lat(doc, "inter_token_latency")
    if itl is not None:
        other[ITL_E2E] = itl
    point = ImportedPoint(
        label=point_label(load, 0),
        load=load,
        figures=ReferencePoint(
            requests=started,
            completed=completed,
            failed=errors,
            request_throughput=per_min / 60 if per_min is not None else None,
            output_tps=doc.finite("results_mean_output_throughput_token_per_s"),
            ttft_ms=_lat(doc, "ttft"),
            e2e_ms=_lat(doc, "end_to_end_latency"),
        ),
        input_tokens_mean=doc.finite("results_number_input_tokens_mean"),
        output_tokens_mean=doc.finite("results_number_output_tokens_mean"),
        other=other,
    )
    partial = failure_warning(
        f"{point.label}: ", started, errors, _codes(doc.raw("results_error_code_frequency"))
    )
    if partial:
        warnings.append(partial)
    mean_in, mean_out = doc.finite("mean_input_tokens"), doc.finite("mean_output_tokens")
    sd_in, sd_out = doc.finite("stddev_input_tokens"), doc.finite("stddev_output_tokens")
    ratio = _range_ratio(mean_in, sd_in)
    notes.append(
        "dataset: LLMPerf's prompts are sonnet lines cut to the drawn length; kit sends random "
        "words of the same token lengths"
    )
    if sd_in or sd_out:
        notes.append(
            f"dataset: LLMPerf drew lengths from normal distributions (stddev {sd_in:g} in / "
            f"{sd_out:g} out); kit's uniform range_ratio {ratio} has the input's stddev"
        )
    measured = point.output_tokens_mean
    if mean_out and measured and abs(measured - mean_out) / mean_out > 0.02:
        warnings.append(
            f"requests asked for {mean_out:g} output tokens and produced {measured:g} on "
            "average (LLMPerf's Llama tokenizer count, and no ignore_eos)"
        )
    workload = Workload(
        dataset="LLMPerf sonnet prompts",
        random=mean_in is not None and mean_out is not None,
        input_tokens=round(mean_in) if mean_in else None,
        output_tokens=round(mean_out) if mean_out else None,
        range_ratio=ratio,
        lengths_from="mean_input_tokens, mean_output_tokens",
    )
    framework = doc.text("framework")
    reference_only = None
    if framework:
        reference_only = f"a hosted API ({framework}): its server cannot be rebuilt"
        warnings.append(
            f"measured against {framework}'s hosted API: kit cannot rebuild its server, so "
            "the figures are reference-only"
        )
    stamp = doc.finite("timestamp")
    repo = hub_id(model)
    if model and repo is None:
        notes.append(f"model: {model!r} is a provider's name, not a hub repository")
    return Imported(
        file=path.name,
        tool="llmperf",
        layout=f"summary.json, version {doc.text('version') or 'not stated'}",
        date=datetime.fromtimestamp(stamp, timezone.utc).isoformat() if stamp else None,
        model=model,
        hub_repo=repo,
        engine=f"{framework} (hosted API)" if framework else None,
        workload=workload,
        points=[point],
        reference_only=reference_only,
        warnings=warnings,
        notes=notes,
    )


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read an LLMPerf summary or its individual responses."""
    parsed = parse_file(path)
    if isinstance(parsed.json, list):
        return _read_records(path, parsed.json)
    return _read_summary(path, Fields(parsed.json, path.name))


READER = Reader(
    tool="llmperf",
    reads="LLMPerf *_summary.json or *_individual_responses.json",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
