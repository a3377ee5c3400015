"""AIPerf's ``profile_export_aiperf.json`` (``schema_version`` 1.x) and
``profile_export_aiperf.csv`` (its tables, CRLF, one after the other); a sweep's aggregate is
:mod:`kit.importers.aiperf_sweep`'s. AIPerf's ``inter_token_latency`` is per request (latency -
TTFT) / (output tokens - 1), kit's TPOT; its ``inter_chunk_latency`` is the gap between chunks,
kit's ITL.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

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
    parse_file,
    point_label,
    shown_name,
)
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint, Workload
from kit.recipe.figures import Definition, LatencyFigures, PointFigure, ReferencePoint

DEFINITIONS: dict[PointFigure, Definition] = {
    "ttft_ms": Definition(
        kit="ttft_ms", text="AIPerf time_to_first_token: to the first response with content"
    ),
    "tpot_ms": Definition(
        kit="tpot_ms",
        text="AIPerf inter_token_latency: per request (latency - TTFT) / (output tokens - 1)",
    ),
    "itl_ms": Definition(
        kit="itl_ms", text="AIPerf inter_chunk_latency: gaps between streamed chunks"
    ),
}
SECOND_TOKEN = "AIPerf time_to_second_token"
CSV_HEADER = "Metric,avg,"


def detect(path: Path, data: Parsed) -> bool:
    """The JSON export (``aiperf_version``, or a schema_version with AIPerf's metric blocks),
    or the CSV export (its first table's header)."""
    doc = data.json
    if isinstance(doc, dict):
        throughput = doc.get("request_throughput")
        return "aiperf_version" in doc or (
            "schema_version" in doc and isinstance(throughput, dict) and "unit" in throughput
        )
    return data.json is None and data.text.lstrip().startswith(CSV_HEADER)


def _lat(doc: Fields, key: str) -> LatencyFigures | None:
    m = doc.sub(key)
    if m is None:
        return None
    return latency(m.finite("avg"), m.finite("p50"), m.finite("p90"), m.finite("p99"))


def _avg(doc: Fields, key: str) -> float | None:
    m = doc.sub(key)
    return m.finite("avg") if m is not None else None


def _schema(doc: Fields) -> str:
    version = doc.text("schema_version")
    if version is not None and not re.fullmatch(r"1(\.\d+)*", version):
        raise BadInputError(
            f"{doc.file}: AIPerf schema_version {version}: kit reads schema 1.x "
            "(AIPerf 0.x profile_export_aiperf.json)"
        )
    return version or "not stated"


def _load(config: Fields | None) -> ImportedLoad | None:
    if config is None:
        return None
    for raw in config.items("phases"):
        if not isinstance(raw, dict) or raw.get("exclude_from_results"):
            continue
        phase = Fields(raw, config.file, "input_config.phases[].")
        warmups = next(
            (
                p.get("requests")
                for p in config.items("phases")
                if isinstance(p, dict) and p.get("exclude_from_results")
            ),
            None,
        )
        warm = warmups if isinstance(warmups, int) else None
        requests = phase.count("requests")
        duration = phase.finite("duration") if requests is None else None
        if phase.count("concurrency") and phase.text("type") == "concurrency":
            return ImportedLoad(
                pattern="concurrency",
                level=phase.count("concurrency") or 1,
                requests=requests,
                duration_s=duration,
                warmup_requests=warm,
            )
        rate = phase.finite("request_rate") or phase.finite("rate")
        if rate:
            return ImportedLoad(
                pattern="rate",
                level=rate,
                arrival="poisson",
                max_concurrency=phase.count("concurrency"),
                requests=requests,
                duration_s=duration,
                warmup_requests=warm,
            )
    loadgen = config.sub("loadgen")  # the layout before phases
    if loadgen is not None:
        rate = loadgen.finite("request_rate")
        if rate:
            return ImportedLoad(
                pattern="rate",
                level=rate,
                arrival="poisson",
                max_concurrency=loadgen.count("concurrency"),
                requests=loadgen.count("request_count"),
                warmup_requests=loadgen.count("warmup_request_count"),
            )
        if loadgen.count("concurrency"):
            return ImportedLoad(
                pattern="concurrency",
                level=loadgen.count("concurrency") or 1,
                requests=loadgen.count("request_count"),
                warmup_requests=loadgen.count("warmup_request_count"),
            )
    return None


def _model(config: Fields | None) -> tuple[str | None, str | None]:
    """(the model name requests carried, the tokenizer's name)."""
    if config is None:
        return None, None
    model = None
    models = config.sub("models")
    items = models.items("items") if models else []
    if items and isinstance(items[0], dict):
        model = items[0].get("name")
    endpoint = config.sub("endpoint")
    if model is None and endpoint is not None:
        names = endpoint.items("model_names")
        model = names[0] if names else None
    tokenizer = config.sub("tokenizer")
    return (
        str(model) if model is not None else None,
        tokenizer.text("name") if tokenizer else None,
    )


def _workload(config: Fields | None, ins: float | None, outs: float | None) -> Workload:
    dataset = None
    backend = endpoint_kind = None
    if config is not None:
        for raw in config.items("datasets"):
            if isinstance(raw, dict):
                d = Fields(raw, config.file, "input_config.datasets[].")
                where = shown_name(d.text("path") or d.text("name") or "")
                dataset = " ".join(x for x in (d.text("format"), d.text("type"), where) if x) + (
                    f" ({d.count('entries')} entries)" if d.count("entries") else ""
                )
                break
        endpoint = config.sub("endpoint")
        if endpoint is not None:
            urls = endpoint.items("urls")
            backend = str(urls[0]) if urls else endpoint.text("url")
            endpoint_kind = endpoint.text("type")
    return Workload(
        dataset=dataset,
        random=False,
        input_tokens=round(ins) if ins else None,
        output_tokens=round(outs) if outs else None,
        lengths_from="input_sequence_length / output_sequence_length avg" if ins else None,
        endpoint=endpoint_kind,
        backend_url=backend,
    )


def _failed(doc: Fields) -> int | None:
    errors = _avg(doc, "error_request_count")
    if errors is not None:
        return int(errors)
    summary = doc.items("error_summary")
    counts = [e.get("count") for e in summary if isinstance(e, dict)]
    return sum(c for c in counts if isinstance(c, int)) if doc.has("error_summary") else None


def _error_codes(doc: Fields) -> dict[str, int] | None:
    """The error summary's codes (or types) and counts."""
    out: dict[str, int] = {}
    for e in doc.items("error_summary"):
        if not isinstance(e, dict) or not isinstance(e.get("count"), int):
            continue
        details = e.get("error_details")
        code = details.get("code") or details.get("type") if isinstance(details, dict) else None
        out[str(code or "?")] = out.get(str(code or "?"), 0) + e["count"]
    return out or None


def _read_json(path: Path, doc: Fields) -> Imported:
    layout = _schema(doc)
    config = doc.sub("input_config")
    load = _load(config)
    model, tokenizer = _model(config)
    repo = hub_id(model) or hub_id(tokenizer)
    notes: list[str] = []
    warnings: list[str] = []
    if repo and repo != model:
        notes.append(f"model: the hub id is the tokenizer's ({repo}); requests named {model!r}")
    count = _avg(doc, "request_count")
    other = {}
    second = _lat(doc, "time_to_second_token")
    if second is not None:
        other[SECOND_TOKEN] = second
    ins, outs = _avg(doc, "input_sequence_length"), _avg(doc, "output_sequence_length")
    figures = ReferencePoint(
        requests=load.requests if load else None,
        completed=int(count) if count is not None else None,
        failed=_failed(doc),
        duration_s=_avg(doc, "benchmark_duration"),
        request_throughput=_avg(doc, "request_throughput"),
        output_tps=_avg(doc, "output_token_throughput"),
        total_tps=_avg(doc, "total_token_throughput"),
        ttft_ms=_lat(doc, "time_to_first_token"),
        tpot_ms=_lat(doc, "inter_token_latency"),
        itl_ms=_lat(doc, "inter_chunk_latency"),
        e2e_ms=_lat(doc, "request_latency"),
    )
    label = point_label(load, 0)
    if load is not None and load.duration_s is not None:
        warnings.append(
            f"{label}: a time-bounded run (the profiling phase ran {load.duration_s:g} s, "
            f"--benchmark-duration), not a request count: {int(count or 0)} requests completed "
            "in it, and kit's point sends that many"
        )
    done = int(count) if count is not None else None
    failed = figures.failed
    partial = failure_warning(
        f"{label}: ",
        done + failed if done is not None and failed is not None else None,
        failed,
        _error_codes(doc),
    )
    if partial:
        warnings.append(partial)
    chunky = chunk_warning(
        f"{label}: ",
        figures.itl_ms.mean if figures.itl_ms else None,
        figures.tpot_ms.mean if figures.tpot_ms else None,
    )
    if chunky:
        warnings.append(chunky)
    mismatch = _avg(doc, "osl_mismatch_count")
    if mismatch and count:
        diff = _avg(doc, "osl_mismatch_diff_pct")
        by = f" (by {diff:+.1f} % on average)" if diff is not None else ""
        warnings.append(
            f"{int(mismatch)} of {int(count)} requests did not produce the output length the "
            f"dataset asked for{by}: the model stopped early"
        )
    if doc.raw("was_cancelled") is True:
        warnings.append("the run was cancelled before its end (was_cancelled: true)")
    workload = _workload(config, ins, outs)
    point = ImportedPoint(
        label=label,
        load=load,
        figures=figures,
        input_tokens_mean=ins,
        output_tokens_mean=outs,
        other=other,
    )
    return Imported(
        file=path.name,
        tool="aiperf",
        layout=f"profile_export_aiperf.json, schema_version {layout}",
        tool_version=doc.text("aiperf_version"),
        date=doc.text("start_time"),
        model=model,
        hub_repo=repo,
        workload=workload,
        points=[point],
        warnings=warnings,
        notes=notes,
    )


# the CSV's metric names (before the unit) -> kit's figure
_CSV_LATENCIES = {
    "Time to First Token": "ttft_ms",
    "Inter Token Latency": "tpot_ms",
    "Inter Chunk Latency": "itl_ms",
    "Request Latency": "e2e_ms",
}
_CSV_VALUES = {
    "Benchmark Duration": "duration_s",
    "Request Throughput": "request_throughput",
    "Output Token Throughput": "output_tps",
    "Total Token Throughput": "total_tps",
}


def _csv_number(value: str, where: str) -> float | None:
    if value.strip() in ("", "N/A"):
        return None
    try:
        return float(value)
    except ValueError:
        raise BadInputError(f"{where}: expected a number, not {value!r}") from None


def _read_csv(path: Path, text: str) -> Imported:
    """The CSV export: the figures only, no model, load or version."""
    tables: list[list[list[str]]] = [[]]
    for row in csv.reader(text.splitlines()):
        if not any(cell.strip() for cell in row):
            if tables[-1]:
                tables.append([])
            continue
        tables[-1].append(row)
    stats_rows: dict[str, dict[str, float | None]] = {}
    values: dict[str, float | None] = {}
    for table in tables:
        if not table:
            continue
        header = table[0]
        for row in table[1:]:
            name = re.sub(r"\s*\([^)]*\)$", "", row[0]).strip()
            where = f"{path.name}: {row[0]}"
            if header[:2] == ["Metric", "avg"]:
                stats_rows[name] = {
                    col: _csv_number(cell, f"{where}: {col}")
                    for col, cell in zip(header[1:], row[1:], strict=False)
                }
            elif header[:2] == ["Metric", "Value"] and len(row) > 1:
                values[name] = _csv_number(row[1], where)
    if "Time to First Token" not in stats_rows and "Request Throughput" not in values:
        raise BadInputError(
            f"{path.name}: an AIPerf CSV without its metrics (Time to First Token, Request "
            "Throughput)"
        )
    lat = {
        field: latency(s.get("avg"), s.get("p50"), s.get("p90"), s.get("p99"))
        for name, field in _CSV_LATENCIES.items()
        if (s := stats_rows.get(name)) is not None
    }
    count = values.get("Request Count")
    errors = values.get("Error Request Count")
    figures = ReferencePoint(
        completed=int(count) if count is not None else None,
        failed=int(errors) if errors is not None else None,
        ttft_ms=lat.get("ttft_ms"),
        tpot_ms=lat.get("tpot_ms"),
        itl_ms=lat.get("itl_ms"),
        e2e_ms=lat.get("e2e_ms"),
        **{field: values.get(name) for name, field in _CSV_VALUES.items()},
    )
    ins = (stats_rows.get("Input Sequence Length") or {}).get("avg")
    outs = (stats_rows.get("Output Sequence Length") or {}).get("avg")
    workload = Workload(
        input_tokens=round(ins) if ins else None,
        output_tokens=round(outs) if outs else None,
        lengths_from="Input / Output Sequence Length avg" if ins else None,
    )
    other = {}
    second = stats_rows.get("Time to Second Token")
    if second is not None:
        second_lat = latency(
            second.get("avg"), second.get("p50"), second.get("p90"), second.get("p99")
        )
        if second_lat is not None:
            other[SECOND_TOKEN] = second_lat
    point = ImportedPoint(
        label=point_label(None, 0),
        load=None,
        figures=figures,
        input_tokens_mean=ins,
        output_tokens_mean=outs,
        other=other,
    )
    return Imported(
        file=path.name,
        tool="aiperf",
        layout="profile_export_aiperf.csv",
        workload=workload,
        points=[point],
        warnings=[
            "the CSV holds figures only (rounded to 2 decimals): no model, load, dataset or "
            "AIPerf version; profile_export_aiperf.json beside it has them"
        ],
    )


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read AIPerf's JSON or CSV export."""
    parsed = parse_file(path)
    if isinstance(parsed.json, dict):
        return _read_json(path, Fields(parsed.json, path.name))
    return _read_csv(path, parsed.text)


READER = Reader(
    tool="aiperf",
    reads="AIPerf profile_export_aiperf.json (schema 1.x) or profile_export_aiperf.csv",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
