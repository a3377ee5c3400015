"""guidellm's benchmarks report: ``metadata.version`` 1 (guidellm 0.4-0.5: ``args`` beside
``benchmarks``) and 2 (0.6 on: ``config.spec``), as JSON or YAML; one point per benchmark
(strategy). The 0.2-0.3 layout is :mod:`kit.importers.guidellm_legacy`'s. guidellm names its
figures differently from kit (:data:`DEFINITIONS`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from kit.errors import BadInputError
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
    shown_name,
    stats,
)
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint, PerRequest, Workload
from kit.recipe.figures import Definition, LatencyFigures, PointFigure, ReferencePoint

VERSIONS = (1, 2)
# guidellm's time_per_output_token_ms is latency / output tokens, TTFT included: kit has no name
# for it
TPOT_E2E = "guidellm time_per_output_token_ms (latency / output tokens, TTFT included)"
DEFINITIONS: dict[PointFigure, Definition] = {
    "tpot_ms": Definition(
        kit="tpot_ms",
        text="guidellm inter_token_latency_ms: per request (latency - TTFT) / (output tokens "
        "- 1), kit's TPOT",
    ),
    "itl_ms": Definition(kit=None, text="guidellm has no per-chunk ITL"),
    "output_tps": Definition(
        kit="output_tps",
        text="guidellm output_tokens_per_second, its successful requests' mean rate",
    ),
    "ttft_ms": Definition(
        kit="ttft_ms", text="guidellm time_to_first_token_ms: to the first streamed token"
    ),
}


_YAML_HEAD = re.compile(r"^(?:---\s*\n)?benchmarks:\s*\n")


def document(data: Parsed) -> Any:
    """The report as JSON, or as YAML where it was saved so (``benchmarks.yaml``)."""
    if data.json is not None or not _YAML_HEAD.match(data.text):
        return data.json
    try:
        return yaml.safe_load(data.text)
    except yaml.YAMLError:
        return None


def legacy(doc: Any) -> bool:
    """A guidellm 0.2-0.3 report: no ``metadata``, each benchmark its ``args`` and
    ``run_stats`` (:mod:`kit.importers.guidellm_legacy` reads it)."""
    if not isinstance(doc, dict) or "metadata" in doc:
        return False
    benches = [b for b in doc.get("benchmarks") or [] if isinstance(b, dict)]
    return bool(benches) and all("args" in b and "run_stats" in b for b in benches)


def detect(path: Path, data: Parsed) -> bool:
    """A JSON (or YAML) object with a ``benchmarks`` list of ``generative_benchmark``
    entries, of guidellm 0.4 on (the 0.2-0.3 layout has its own reader)."""
    doc = document(data)
    if legacy(doc):
        return False
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        return False
    marks = ("metadata" in doc and ("args" in doc or "config" in doc)) or any(
        isinstance(b, dict) and b.get("type_") == "generative_benchmark" for b in doc["benchmarks"]
    )
    return bool(marks)


def _dist(metrics: Fields, key: str) -> Fields | None:
    """The successful requests' distribution of a metric."""
    metric = metrics.sub(key)
    return metric.sub("successful") if metric is not None else None


def _lat(metrics: Fields, key: str, scale: float = 1.0) -> LatencyFigures | None:
    d = _dist(metrics, key)
    if d is None:
        return None
    pct = d.sub("percentiles")
    return latency(
        d.finite("mean"),
        d.finite("median"),
        pct.finite("p90") if pct else None,
        pct.finite("p99") if pct else None,
        scale=scale,
    )


def _mean(metrics: Fields, key: str) -> float | None:
    d = _dist(metrics, key)
    return d.finite("mean") if d is not None else None


def _load(strategy: Fields, requests: int | None) -> ImportedLoad | None:
    kind = strategy.text("type_") or strategy.text("kind")
    if kind == "synchronous":
        return ImportedLoad(pattern="concurrency", level=1, requests=requests)
    if kind == "concurrent":
        streams = strategy.count("streams") or strategy.count("max_concurrency")
        return (
            ImportedLoad(pattern="concurrency", level=streams, requests=requests)
            if streams
            else None
        )
    if kind == "throughput":
        cap = strategy.count("max_concurrency")
        if not cap:
            return None
        return ImportedLoad(
            pattern="concurrency",
            level=cap,
            requests=requests,
            note=f"throughput strategy: as many requests at once as allowed ({cap})",
        )
    if kind in ("constant", "poisson"):
        rate = strategy.finite("rate")
        if not rate:
            return None
        cap = strategy.count("max_concurrency")
        return ImportedLoad(
            pattern="rate",
            level=rate,
            arrival="constant" if kind == "constant" else "poisson",
            # guidellm's default cap on requests in flight is its own limit, not the run's
            max_concurrency=cap if cap is not None and cap < 10_000 else None,
            requests=requests,
        )
    return None


def _max_requests(constraints: Fields | None) -> int | None:
    if constraints is None:
        return None
    c = constraints.sub("max_requests") or constraints.sub("max_number")
    if c is None:
        return None
    args = c.sub("args")
    return c.count("max_num") or (args.count("count") if args else None)


def _records(b: Fields) -> tuple[list[Any], int]:
    reqs = b.sub("requests")
    if reqs is None:
        return [], 0
    done = [r for r in reqs.items("successful") if isinstance(r, dict)]
    failed = [r for r in reqs.items("errored") if isinstance(r, dict)]
    incomplete = [r for r in reqs.items("incomplete") if isinstance(r, dict)]
    return done + failed + incomplete, len(failed)


def _per_request(b: Fields) -> PerRequest | None:
    records, failed = _records(b)
    if not records:
        return None
    rows = [Fields(r, b.file, f"{b.at}requests[].") for r in records]
    return PerRequest(
        count=len(records),
        failed=failed,
        input_tokens=stats(v for r in rows if (v := r.finite("prompt_tokens")) is not None),
        output_tokens=stats(v for r in rows if (v := r.finite("output_tokens")) is not None),
        ttft_ms=stats(v for r in rows if (v := r.finite("time_to_first_token_ms")) is not None),
        e2e_ms=stats(v * 1000 for r in rows if (v := r.finite("request_latency")) is not None),
    )


def point(b: Fields, index: int, planned: int | None, warnings: list[str]) -> ImportedPoint:
    config = b.sub("config") or b.sub("args")  # 0.2-0.3: args
    strategy = config.sub("strategy") if config else None
    requests = _max_requests(config.sub("constraints") if config else None) or planned
    if requests is None and config is not None and config.has("max_number"):
        requests = config.count("max_number")
    bound = config.finite("max_duration") if config is not None and requests is None else None
    load = _load(strategy, requests) if strategy else None
    if load is not None and bound:
        load = load.model_copy(update={"duration_s": bound})
    label = point_label(load, index)
    metrics = b.sub("metrics")
    if metrics is None:
        raise BadInputError(f"{b.file}: {b.at}metrics: missing (expected guidellm's figures)")
    totals = metrics.sub("request_totals") or b.sub("request_totals")
    done = totals.count("successful") if totals else None
    errored = totals.count("errored") if totals else None
    total = totals.count("total") if totals else None
    incomplete = totals.count("incomplete") if totals else None
    per_request = _per_request(b)
    sampled = b.has("request_samples") or b.has("run_stats")
    if per_request is not None and total is not None and per_request.count != total:
        why = (
            "the report keeps only a sample of the records; its figures are over all of them"
            if sampled
            else "guidellm leaves its warm-up and cool-down out"
        )
        warnings.append(
            f"{label}: {per_request.count} request records, {total} counted in the figures ({why})"
        )
    if bound:
        warnings.append(
            f"{label}: a time-bounded benchmark (max_duration {bound:g} s, no request count): "
            f"{total if total is not None else 'its'} requests were counted in it, and kit's "
            "point sends that many"
        )
    partial = failure_warning(f"{label}: ", total, errored)
    if partial:
        warnings.append(partial)
    if incomplete:
        warnings.append(
            f"{label}: {incomplete} request(s) still running at the end (incomplete) are in "
            "the total, not in the figures"
        )
    other = {}
    tpot_e2e = _lat(metrics, "time_per_output_token_ms")
    if tpot_e2e is not None:
        other[TPOT_E2E] = tpot_e2e
    return ImportedPoint(
        label=label,
        load=load,
        figures=ReferencePoint(
            requests=total,
            completed=done,
            failed=errored,
            duration_s=b.finite("duration"),
            request_throughput=_mean(metrics, "requests_per_second"),
            output_tps=_mean(metrics, "output_tokens_per_second"),
            total_tps=_mean(metrics, "tokens_per_second"),
            ttft_ms=_lat(metrics, "time_to_first_token_ms"),
            tpot_ms=_lat(metrics, "inter_token_latency_ms"),
            e2e_ms=_lat(metrics, "request_latency", scale=1000.0),
        ),
        input_tokens_mean=_mean(metrics, "prompt_token_count"),
        output_tokens_mean=_mean(metrics, "output_token_count"),
        other=other,
        per_request=per_request,
    )


def request_body(benchmarks: list[Fields]) -> dict[str, Any]:
    """The body of the first request record (guidellm keeps it as JSON text)."""
    for b in benchmarks:
        for r in _records(b)[0]:
            args = r.get("request_args")
            try:
                parsed = json.loads(args) if isinstance(args, str) else args
            except ValueError:
                continue
            if isinstance(parsed, dict) and isinstance(parsed.get("body"), dict):
                return dict(parsed["body"])
    return {}


def _workload_v1(doc: Fields, body: dict[str, Any], points: list[ImportedPoint]) -> Workload:
    args = doc.sub("args")
    data = [shown_name(str(d)) for d in args.items("data")] if args else []
    backend = args.text("target") if args else None
    endpoint = args.text("request_format") if args else None
    return workload_of(", ".join(data) or None, body, points, backend, endpoint)


def workload_of(
    dataset: str | None,
    body: dict[str, Any],
    points: list[ImportedPoint],
    backend: str | None,
    endpoint: str | None,
    synthetic: Fields | None = None,
) -> Workload:
    ins = [p.input_tokens_mean for p in points if p.input_tokens_mean]
    max_tokens = body.get("max_tokens")
    ignore_eos = body.get("ignore_eos") if isinstance(body.get("ignore_eos"), bool) else None
    if synthetic is not None:
        prompt, output = synthetic.count("prompt_tokens"), synthetic.count("output_tokens")
        return Workload(
            dataset=f"synthetic_text (prompt_tokens {prompt}, output_tokens {output})",
            random=prompt is not None and output is not None,
            input_tokens=prompt,
            output_tokens=output,
            range_ratio=0.0,
            lengths_from="config.spec.data[0].prompt_tokens, output_tokens",
            ignore_eos=ignore_eos,
            endpoint=endpoint,
            backend_url=backend,
        )
    out = max_tokens if isinstance(max_tokens, int) and ignore_eos else None
    outs = [p.output_tokens_mean for p in points if p.output_tokens_mean]
    return Workload(
        dataset=dataset,
        random=False,
        input_tokens=round(sum(ins) / len(ins)) if ins else None,
        output_tokens=out or (round(sum(outs) / len(outs)) if outs else None),
        lengths_from="prompt_token_count mean; "
        + ("max_tokens with ignore_eos" if out else "output_token_count mean"),
        ignore_eos=ignore_eos,
        endpoint=endpoint,
        backend_url=backend,
    )


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read a guidellm report (``metadata.version`` 1 or 2)."""
    parsed = parse_file(path)
    doc = Fields(document(parsed), path.name)
    meta = doc.sub("metadata")
    version = meta.count("version") if meta else None
    if version is None:
        raise BadInputError(
            f"{path.name}: a guidellm report with neither metadata.version (guidellm 0.4 on) "
            "nor the 0.2-0.3 layout (benchmarks with args and run_stats)",
            hint="kit reads guidellm reports of metadata.version 1 and 2, and of 0.2-0.3",
        )
    if version not in VERSIONS:
        raise BadInputError(
            f"{path.name}: guidellm report metadata.version {version}: kit reads versions 1 and 2"
        )
    warnings: list[str] = []
    notes: list[str] = []
    bench_list = doc.items("benchmarks")
    if not bench_list:
        raise BadInputError(f"{path.name}: benchmarks: empty (no point was measured)")
    benches = [
        Fields(b, path.name, f"benchmarks[{i}].")
        for i, b in enumerate(bench_list)
        if isinstance(b, dict)
    ]
    synthetic = None
    if version == 1:
        args = doc.sub("args")
        model = args.text("model") if args else None
        planned = args.count("max_requests") if args else None
    else:
        config = doc.sub("config")
        spec = config.sub("spec") if config else None
        backend = spec.sub("backend") if spec else None
        model = backend.text("model") if backend else None
        planned = None
        data = spec.items("data") if spec else []
        if data and isinstance(data[0], dict) and data[0].get("kind") == "synthetic_text":
            synthetic = Fields(data[0], path.name, "config.spec.data[0].")
    points = [point(b, i, planned, warnings) for i, b in enumerate(benches)]
    body = request_body(benches)
    if version == 1:
        workload = _workload_v1(doc, body, points)
    else:
        spec = (doc.sub("config") or Fields({}, path.name)).sub("spec")
        backend = spec.sub("backend") if spec else None
        names = [
            shown_name(str(d.get("path") or d.get("kind")))
            for d in (spec.items("data") if spec else [])
            if isinstance(d, dict)
        ]
        workload = workload_of(
            ", ".join(names) or None,
            body,
            points,
            backend.text("target") if backend else None,
            backend.text("request_format") if backend else None,
            synthetic,
        )
        if synthetic is not None:
            _synthetic_notes(synthetic, notes)
    if model and "mock" in model.lower():
        warnings.append(
            f"the backend looks like a mock server (model {model!r}): its figures are not "
            "from real inference"
        )
    repo = hub_id(model)
    return Imported(
        file=path.name,
        tool="guidellm",
        layout=f"benchmarks report, metadata.version {version}",
        tool_version=meta.text("guidellm_version") if meta else None,
        model=model,
        hub_repo=repo,
        workload=workload,
        points=points,
        warnings=warnings,
        notes=notes,
    )


def _synthetic_notes(data: Fields, notes: list[str]) -> None:
    spread = [
        f"{k} {data.raw(k)}"
        for k in ("prompt_tokens_stdev", "prompt_tokens_min", "prompt_tokens_max", "turns")
        if data.raw(k) is not None
    ]
    if spread:
        notes.append(
            "dataset: guidellm drew lengths with "
            + ", ".join(spread)
            + "; kit sends the mean lengths, one turn"
        )
    if data.items("prefix_buckets"):
        notes.append("dataset: guidellm's shared prefixes (prefix_buckets) are not reproduced")


READER = Reader(
    tool="guidellm",
    reads="guidellm benchmarks.json (report metadata.version 1 or 2)",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
