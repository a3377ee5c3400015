"""AIPerf's sweep aggregate, ``sweep_aggregate/profile_export_aiperf_sweep.csv`` and ``.json``:
one point per swept value (concurrency or request rate), each the mean over its trials. The
CSV holds means only (rounded to 2 decimals) and no model, load settings or version; the JSON
adds the percentiles and the sweep's metadata.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from kit.errors import BadInputError
from kit.importers.aiperf import DEFINITIONS
from kit.importers.parse import (
    NO_OPTIONS,
    Fields,
    ImportOptions,
    Parsed,
    Reader,
    chunk_warning,
    latency,
    parse_file,
    point_label,
)
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint, Workload
from kit.recipe.figures import LatencyFigures, ReferencePoint

_PATTERNS = {"concurrency": "concurrency", "request_rate": "rate"}
# AIPerf metric -> kit figure; latencies read as LatencyFigures
_LATENCIES = {
    "time_to_first_token": "ttft_ms",
    "inter_token_latency": "tpot_ms",
    "inter_chunk_latency": "itl_ms",
    "request_latency": "e2e_ms",
}
_VALUES = {
    "benchmark_duration": "duration_s",
    "request_throughput": "request_throughput",
    "output_token_throughput": "output_tps",
    "total_token_throughput": "total_tps",
}


def _csv_header(text: str) -> list[str]:
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    return first.split(",")


def detect(path: Path, data: Parsed) -> bool:
    """The sweep JSON (``aggregation_type`` sweep with per-combination metrics) or the sweep
    CSV (a swept parameter, then ``benchmark_duration_mean`` ... columns)."""
    doc = data.json
    if isinstance(doc, dict):
        return doc.get("aggregation_type") == "sweep" and "per_combination_metrics" in doc
    header = _csv_header(data.text) if data.json is None else []
    return len(header) > 2 and header[0] in _PATTERNS and "request_throughput_mean" in header


def _load(param: str, value: float, trials: int | None) -> ImportedLoad | None:
    pattern = _PATTERNS.get(param)
    if pattern is None or value <= 0:
        return None
    return ImportedLoad(
        pattern="concurrency" if pattern == "concurrency" else "rate",
        level=value,
        arrival="poisson" if pattern == "rate" else None,
        note=f"swept {param}" + (f", {trials} trial(s) a value" if trials else ""),
    )


def _point(
    index: int,
    load: ImportedLoad | None,
    values: dict[str, float | None],
    lat: dict[str, LatencyFigures | None],
    trials: int | None,
    warnings: list[str],
) -> ImportedPoint:
    label = point_label(load, index)
    count = values.get("request_count")
    figures = ReferencePoint(
        completed=int(count) if count is not None else None,
        failed=int(f) if (f := values.get("error_request_count")) is not None else None,
        runs=trials or 1,
        **{kit: values.get(name) for name, kit in _VALUES.items()},
        **{kit: lat.get(name) for name, kit in _LATENCIES.items()},
    )
    chunky = chunk_warning(
        f"{label}: ",
        figures.itl_ms.mean if figures.itl_ms else None,
        figures.tpot_ms.mean if figures.tpot_ms else None,
    )
    if chunky:
        warnings.append(chunky)
    return ImportedPoint(
        label=label,
        load=load,
        figures=figures,
        input_tokens_mean=values.get("input_sequence_length"),
        output_tokens_mean=values.get("output_sequence_length"),
    )


def _number(value: str, where: str) -> float | None:
    if value.strip() in ("", "N/A"):
        return None
    try:
        return float(value)
    except ValueError:
        raise BadInputError(f"{where}: expected a number, not {value!r}") from None


def _read_csv(path: Path, text: str) -> Imported:
    rows = list(csv.reader(text.splitlines()))
    header = rows[0]
    param = header[0]
    table = []
    for row in rows[1:]:
        if not row or not row[0].strip():
            break
        table.append(row)
    meta = {r[0]: r[1] for r in rows if len(r) == 2 and r[0] and r[0] != "Field"}
    runs, combos = meta.get("Number of Profile Runs"), meta.get("Number of Combinations")
    trials = (
        int(runs) // int(combos)
        if runs and combos and runs.isdigit() and combos.isdigit()
        else None
    )
    warnings = [
        "the sweep CSV holds means only, rounded to 2 decimals: no percentiles, model, load "
        "settings or AIPerf version (profile_export_aiperf_sweep.json has the percentiles)"
    ]
    points = []
    for i, row in enumerate(table):
        where = f"{path.name}: row {i + 2}"
        cells = dict(zip(header, row, strict=False))
        values = {
            name.removesuffix("_mean"): _number(v, f"{where}: {name}")
            for name, v in cells.items()
            if name.endswith("_mean")
        }
        lat = {name: latency(values.get(name)) for name in _LATENCIES}
        level = _number(row[0], f"{where}: {param}") or 0.0
        points.append(_point(i, _load(param, level, trials), values, lat, trials, warnings))
    _duration_warning(points, warnings)
    return Imported(
        file=path.name,
        tool="aiperf",
        layout="profile_export_aiperf_sweep.csv (sweep aggregate)",
        workload=_workload(points),
        points=points,
        warnings=warnings,
    )


def _duration_warning(points: list[ImportedPoint], warnings: list[str]) -> None:
    """Neither file states how a point was bounded: AIPerf's sweeps are often time-bounded
    (``--benchmark-duration``), and kit's points send a count of requests. Warn where every
    point ran about as long with a different request count."""
    durations = [p.figures.duration_s for p in points if p.figures.duration_s]
    counts = {p.figures.completed for p in points}
    if durations and len(counts) > 1 and max(durations) - min(durations) < 0.05 * max(durations):
        warnings.append(
            f"every point ran about {min(durations):.0f} s with a different request count: a "
            "time-bounded sweep (the file does not state the bound); kit's points send a count "
            "of requests (bench.load.requests)"
        )


def _workload(points: list[ImportedPoint]) -> Workload:
    ins = [p.input_tokens_mean for p in points if p.input_tokens_mean]
    outs = [p.output_tokens_mean for p in points if p.output_tokens_mean]
    return Workload(
        input_tokens=round(sum(ins) / len(ins)) if ins else None,
        output_tokens=round(sum(outs) / len(outs)) if outs else None,
        lengths_from="input / output_sequence_length means over the points" if outs else None,
    )


def _json_metrics(m: Fields) -> tuple[dict[str, float | None], dict[str, LatencyFigures | None]]:
    values: dict[str, float | None] = {}
    lat: dict[str, LatencyFigures | None] = {}
    for name in m.data:
        metric = m.sub(name)
        if metric is None:
            continue
        mean = metric.finite("mean") if metric.has("mean") else metric.finite("avg")
        values[name] = mean
        if name in _LATENCIES:
            lat[name] = latency(
                mean, metric.finite("p50"), metric.finite("p90"), metric.finite("p99")
            )
    return values, lat


def _read_json(path: Path, doc: Fields) -> Imported:
    meta = doc.sub("metadata")
    trials = meta.count("num_trials_per_value") if meta else None
    warnings: list[str] = []
    points = []
    for i, raw in enumerate(doc.items("per_combination_metrics")):
        if not isinstance(raw, dict):
            continue
        combo = Fields(raw, path.name, f"per_combination_metrics[{i}].")
        params = combo.sub("parameters")
        metrics = combo.sub("metrics")
        if params is None or metrics is None:
            raise BadInputError(f"{path.name}: per_combination_metrics[{i}]: no parameters")
        swept: list[tuple[str, Any]] = list(params.data.items())
        load = None
        if len(swept) == 1 and isinstance(swept[0][1], int | float):
            load = _load(swept[0][0], float(swept[0][1]), trials)
        values, lat = _json_metrics(metrics)
        points.append(_point(i, load, values, lat, trials, warnings))
    failed = doc.items("failed_runs")
    if failed:
        warnings.append(f"{len(failed)} of the sweep's runs failed: their points are missing")
    _duration_warning(points, warnings)
    return Imported(
        file=path.name,
        tool="aiperf",
        layout="profile_export_aiperf_sweep.json (sweep aggregate)",
        workload=_workload(points),
        points=points,
        warnings=warnings,
    )


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read an AIPerf sweep aggregate (CSV or JSON)."""
    parsed = parse_file(path)
    if isinstance(parsed.json, dict):
        return _read_json(path, Fields(parsed.json, path.name))
    return _read_csv(path, parsed.text)


READER = Reader(
    tool="aiperf sweep",
    reads="AIPerf profile_export_aiperf_sweep.csv or .json (a sweep's aggregate)",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
