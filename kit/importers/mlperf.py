"""MLPerf Inference LoadGen's ``mlperf_log_summary.txt`` (v4.x-v5.x): scenario (Server, Offline,
SingleStream; Server under the Interactive benchmarks' latency bounds named as such),
throughput, latencies in ns, and the test parameters. A LoadGen run is reference-only: kit's
traffic does not rebuild its queries.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from kit.errors import BadInputError
from kit.importers.parse import (
    NO_OPTIONS,
    ImportOptions,
    Parsed,
    Reader,
    latency,
    parse_file,
    point_label,
)
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint, Workload
from kit.recipe.figures import Definition, LatencyFigures, PointFigure, ReferencePoint

BANNER = "MLPerf Results Summary"
NS = 1e-6  # ns -> ms
DEFINITIONS: dict[PointFigure, Definition] = {
    "ttft_ms": Definition(
        kit=None,
        text="MLPerf first token latency: from the query's issue to the first token the "
        "SUT reports, in ns",
    ),
    "tpot_ms": Definition(
        kit=None,
        text="MLPerf time to output token: per sample (latency - first token latency) / "
        "(output tokens - 1), in ns",
    ),
    "e2e_ms": Definition(
        kit="e2e_ms", text="MLPerf latency: from the query's issue to its completion, in ns"
    ),
    "output_tps": Definition(
        kit="output_tps",
        text="MLPerf (completed) tokens per second: output tokens of the completed samples",
    ),
}
_QPS = "QPS w/ loadgen overhead"
_TPS = "TPS w/ loadgen overhead"
# MLPerf's Interactive benchmarks bound TPOT at 40 ms (llama2-70b) or 30 ms (llama3.1-8b); its
# Server scenarios at 100 ms or more
INTERACTIVE_TPOT_MS = 50.0
_LINE = re.compile(r"^\s*([^:*]+?)\s*:\s*(\S.*?)\s*$")


def detect(path: Path, data: Parsed) -> bool:
    """Text whose first lines carry LoadGen's banner."""
    return data.json is None and BANNER in data.text[:400]


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and m.group(1) not in out:
            out[m.group(1)] = m.group(2)
    return out


class _Summary:
    def __init__(self, fields: dict[str, str], file: str) -> None:
        self.fields = fields
        self.file = file

    def num(self, *keys: str) -> float | None:
        for key in keys:
            value = self.fields.get(key)
            if value is None:
                continue
            try:
                return float(value)
            except ValueError:
                raise BadInputError(
                    f"{self.file}: {key}: expected a number, not {value!r}"
                ) from None
        return None

    def latency(self, label: str, prefix: str) -> LatencyFigures | None:
        """``Mean <label> (ns)`` and ``NN.00 percentile <prefix> (ns)``, in ms."""
        return latency(
            self.num(f"Mean {label} (ns)"),
            self.num(f"50.00 percentile {prefix} (ns)"),
            self.num(f"90.00 percentile {prefix} (ns)"),
            self.num(f"99.00 percentile {prefix} (ns)"),
            scale=NS,
        )


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read a LoadGen summary (Server, Offline or SingleStream). The run is reference-only: its
    queries come from the benchmark's own sample set (not named in the summary) under LoadGen's
    duration and early-stopping rules, which kit's traffic does not rebuild."""
    parsed = parse_file(path)
    s = _Summary(_fields(parsed.text), path.name)
    scenario = s.fields.get("Scenario")
    mode = s.fields.get("Mode")
    if scenario is None:
        raise BadInputError(f"{path.name}: a LoadGen summary without its Scenario line")
    # SingleStream labels its throughput "QPS / TPS w/ loadgen overhead"
    samples = s.num("Completed samples per second", "Samples per second", _QPS)
    tokens = s.num("Completed tokens per second", "Tokens per second", _TPS)
    if mode != "PerformanceOnly":
        raise BadInputError(
            f"{path.name}: an MLPerf {mode or 'unknown-mode'} summary (Mode is not "
            "PerformanceOnly): kit imports the performance runs"
        )
    if samples is None and tokens is None:
        raise BadInputError(
            f"{path.name}: an MLPerf {scenario} summary without a throughput line kit reads "
            f"(Samples per second, Completed samples per second, {_QPS})"
        )
    warnings: list[str] = []
    notes: list[str] = []
    result = s.fields.get("Result is")
    if result != "VALID":
        warnings.append(f"LoadGen's result is {result or 'not stated'}, not VALID")
    target = s.num("target_qps")
    min_ms = s.num("min_duration (ms)")
    load: ImportedLoad | None = None
    if scenario == "Server" and target:
        requests = math.ceil(target * (min_ms or 0) / 1000) or s.num("min_query_count")
        load = ImportedLoad(
            pattern="rate",
            level=target,
            arrival="poisson",
            requests=int(requests) if requests else None,
            note=f"LoadGen's Poisson arrivals at target_qps {target:g} for at least "
            f"{(min_ms or 0) / 1000:g} s",
        )
    elif scenario == "SingleStream":
        queries = s.num("min_query_count")
        load = ImportedLoad(
            pattern="concurrency", level=1, requests=int(queries) if queries else None
        )
    for label in (f"{_QPS.replace('w/', 'w/o')}", f"{_TPS.replace('w/', 'w/o')}"):
        value = s.num(label)
        if value is not None:
            notes.append(f"LoadGen's {label}: {value:g} (kit takes the figure with it)")
    scheduled = s.num("Scheduled samples per second")
    if scheduled is not None:
        notes.append(f"LoadGen scheduled {scheduled:g} samples/s (target_qps {target or 0:g})")
    for name in ("ttft_latency (ns)", "tpot_latency (ns)"):
        bound = s.num(name)
        if bound is not None:
            notes.append(f"LoadGen constraint {name.split(' ')[0]}: {bound * NS:g} ms (p99)")
    point = ImportedPoint(
        label=point_label(load, 0) if load else scenario.lower(),
        load=load,
        figures=ReferencePoint(
            request_throughput=samples,
            output_tps=tokens,
            ttft_ms=s.latency("First Token latency", "first token latency"),
            tpot_ms=s.latency("Time to Output Token", "time to output token"),
            e2e_ms=s.latency("latency", "latency"),
        ),
    )
    layout = f"mlperf_log_summary.txt, {scenario} scenario"
    tpot_bound = s.num("tpot_latency (ns)")
    if scenario == "Server" and tpot_bound is not None and tpot_bound * NS <= INTERACTIVE_TPOT_MS:
        ttft_bound = (s.num("ttft_latency (ns)") or 0) * NS
        layout += (
            f" under Interactive latency bounds (TTFT p99 {ttft_bound:g} ms, TPOT p99 "
            f"{tpot_bound * NS:g} ms: an Interactive benchmark)"
        )
    workload = Workload(dataset="the MLPerf benchmark's sample set (not named in the summary)")
    sut = s.fields.get("SUT name")
    notes.append(f"model: the summary names none (SUT {sut!r})")
    return Imported(
        file=path.name,
        tool="mlperf loadgen",
        layout=layout,
        model=None,
        workload=workload,
        points=[point],
        reference_only="an MLPerf LoadGen run (its sample set and run rules are LoadGen's)",
        warnings=[
            *warnings,
            f"MLPerf LoadGen {scenario} run (SUT {sut!r}): reference-only, kit's traffic does "
            "not rebuild LoadGen's queries",
        ],
        notes=notes,
    )


READER = Reader(
    tool="mlperf loadgen",
    reads="MLPerf Inference mlperf_log_summary.txt",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
