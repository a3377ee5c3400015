"""SGLang's ``python -m sglang.bench_serving --output-file`` JSONL: one line per run, each
with the server's ``server_info`` (its arguments and version) where the server gave it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from kit.errors import BadInputError
from kit.importers.parse import (
    NO_OPTIONS,
    Fields,
    ImportOptions,
    Parsed,
    Reader,
    chunk_warning,
    hub_id,
    latency,
    mean_of,
    parse_file,
    point_label,
)
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint, SpecDecode, Workload
from kit.recipe.figures import Definition, LatencyFigures, PointFigure, ReferencePoint

DEFINITIONS: dict[PointFigure, Definition] = {
    "ttft_ms": Definition(kit="ttft_ms", text="SGLang: to the first streamed chunk with text"),
    "tpot_ms": Definition(
        kit="tpot_ms", text="SGLang: per request (latency - TTFT) / (output tokens - 1)"
    ),
    "itl_ms": Definition(kit="itl_ms", text="SGLang: gaps between streamed chunks"),
    "output_tps": Definition(
        kit="output_tps",
        text="SGLang counts the server's output tokens; total_output_tokens_retokenized "
        "re-tokenises the text with the client's tokenizer",
    ),
}


def _is_run(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and "request_rate" in doc
        and ("total_output_tokens_retokenized" in doc or "mean_e2e_latency_ms" in doc)
    )


def detect(path: Path, data: Parsed) -> bool:
    """JSON lines (or one JSON object) with SGLang's run keys."""
    docs = data.documents
    return bool(docs) and all(_is_run(d) for d in docs)


def _servers(run: Fields) -> list[Fields]:
    """The server arguments the run recorded: one server, or the prefill and decode ones."""
    info = run.sub("server_info")
    if info is None:
        return []
    out = []
    for role in ("prefill", "decode"):
        for i, s in enumerate(info.items(role)):
            if isinstance(s, dict):
                out.append(Fields(s, run.file, f"server_info.{role}[{i}]."))
    if out:
        return out
    if info.has("model_path") or info.has("version"):
        return [info]
    states = info.items("internal_states")
    return [
        Fields(s, run.file, "server_info.internal_states[0].")
        for s in states[:1]
        if isinstance(s, dict)
    ]


# SGLang's speculative algorithms with a kit method (EAGLE / EAGLE3 have none)
_SPEC_METHODS: dict[str, Literal["mtp", "ngram", "draft_model"]] = {
    "NEXTN": "mtp",
    "NGRAM": "ngram",
    "STANDALONE": "draft_model",
}


def _speculative(run: Fields, server: Fields | None) -> SpecDecode | None:
    """server_info's speculative_* arguments (an algorithm of None: none ran) and the run's
    accept_length (SGLang's mean tokens a verify step, the bonus token included)."""
    if server is None or not server.has("speculative_algorithm"):
        return None
    algorithm = server.text("speculative_algorithm")
    if algorithm is None:
        return SpecDecode(
            drafting=False, source="server_info.speculative_algorithm: null (none ran)"
        )
    kit = _SPEC_METHODS.get(algorithm.upper())
    topk = server.count("speculative_eagle_topk")
    steps = server.count("speculative_num_steps")
    return SpecDecode(
        drafting=True,
        method=algorithm,
        kit_method=kit,
        num_speculative_tokens=steps if steps and (topk is None or topk == 1) else None,
        draft=server.text("speculative_draft_model_path"),
        acceptance_length=run.finite("accept_length"),
        source="server_info.speculative_* and accept_length",
    )


def _lat(run: Fields, name: str) -> LatencyFigures | None:
    return latency(
        run.finite(f"mean_{name}_ms"),
        run.finite(f"median_{name}_ms"),
        run.finite(f"p90_{name}_ms"),
        run.finite(f"p99_{name}_ms"),
    )


def _load(run: Fields, notes: list[str]) -> ImportedLoad | None:
    """The run's load. SGLang writes ``request_rate`` as the bare JSON constant ``Infinity``:
    kit reads it as an unlimited rate, and :func:`read` says so."""
    rate = run.num("request_rate")
    cap = run.count("max_concurrency")
    completed = run.count("completed")
    if rate is None or rate == float("inf"):
        if cap:
            return ImportedLoad(
                pattern="concurrency",
                level=cap,
                requests=completed,
                note="the completed count stands for num_prompts, which SGLang does not save",
            )
        if completed:
            return ImportedLoad(
                pattern="concurrency",
                level=completed,
                requests=completed,
                note="request rate inf with no max_concurrency: every request at once",
            )
        return None
    if rate <= 0:
        raise BadInputError(f"{run.file}: request_rate: {rate:g} is not a rate")
    return ImportedLoad(
        pattern="rate", level=rate, arrival="poisson", max_concurrency=cap, requests=completed
    )


def _point(run: Fields, index: int, notes: list[str]) -> ImportedPoint:
    load = _load(run, notes)
    completed = run.count("completed")
    return ImportedPoint(
        label=point_label(load, index),
        load=load,
        figures=ReferencePoint(
            requests=completed,
            completed=completed,
            duration_s=run.finite("duration"),
            request_throughput=run.finite("request_throughput"),
            output_tps=run.finite("output_throughput"),
            total_tps=run.finite("total_throughput"),
            ttft_ms=_lat(run, "ttft"),
            tpot_ms=_lat(run, "tpot"),
            itl_ms=_lat(run, "itl"),
            e2e_ms=_lat(run, "e2e_latency"),
        ),
        input_tokens_mean=mean_of(run.finite("total_input_tokens"), completed),
        output_tokens_mean=mean_of(run.finite("total_output_tokens"), completed),
    )


def _workload(run: Fields, notes: list[str]) -> Workload:
    name = run.text("dataset_name")
    if name not in ("random", "random-ids"):
        completed = run.count("completed")
        ins = mean_of(run.finite("total_input_tokens"), completed)
        outs = mean_of(run.finite("total_output_tokens"), completed)
        return Workload(
            dataset=name,
            input_tokens=round(ins) if ins else None,
            output_tokens=round(outs) if outs else None,
            lengths_from="total_input_tokens / completed" if ins else None,
        )
    n_in, n_out = run.count("random_input_len"), run.count("random_output_len")
    ratio = run.finite("random_range_ratio") or 0.0
    if not n_in or not n_out:
        raise BadInputError(f"{run.file}: random_input_len, random_output_len: missing")
    # SGLang: uniform in [max(n*r, 1), n]; kit writes them in its own convention, uniform in
    # [m(1-q), m(1+q)]
    lo_in, lo_out = max(int(n_in * ratio), 1), max(int(n_out * ratio), 1)
    mid_in, mid_out = round((lo_in + n_in) / 2), round((lo_out + n_out) / 2)
    q = min((n_in - lo_in) / (n_in + lo_in), 0.99) if n_in > lo_in else 0.0
    if ratio < 1:
        notes.append(
            f"dataset: SGLang's random lengths {n_in} in / {n_out} out at range ratio "
            f"{ratio:g} are uniform in [{lo_in}, {n_in}] / [{lo_out}, {n_out}]: kit's "
            f"{mid_in} / {mid_out} at range_ratio {q:.3f}"
        )
    return Workload(
        dataset=name,
        random=True,
        input_tokens=mid_in,
        output_tokens=mid_out,
        range_ratio=round(q, 3),
        lengths_from="random_input_len, random_output_len, random_range_ratio",
    )


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read SGLang's bench_serving JSONL (every line a run)."""
    parsed = parse_file(path)
    runs = [Fields(d, path.name, f"line {i + 1}: ") for i, d in enumerate(parsed.documents)]
    first = runs[0]
    notes: list[str] = []
    warnings: list[str] = []
    if parsed.constants:
        warnings.append(
            "non-standard JSON read: " + ", ".join(parsed.constants) + " (request_rate "
            "Infinity is an unlimited rate)"
        )
    points = [_point(r, i, notes) for i, r in enumerate(runs)]
    servers = _servers(first)
    model = next((m for s in servers if (m := s.text("model_path"))), None)
    versions = list(dict.fromkeys(v for s in servers if (v := s.text("version"))))
    info = first.sub("server_info")
    if info is not None and (info.items("prefill") or info.items("decode")):
        roles = f"{len(info.items('prefill'))} prefill, {len(info.items('decode'))} decode"
        warnings.append(
            f"prefill/decode disaggregated serving ({roles} server(s) recorded, tag "
            f"{first.text('tag')!r}): kit serves one engine, so this is reference-only"
        )
    if len(versions) > 1:
        warnings.append("the servers ran different SGLang versions: " + ", ".join(versions))
    engine = "SGLang " + " / ".join(versions) if versions else None
    server = servers[0] if servers else None
    tp = server.count("tp_size") if server else None
    quant = server.raw("quantization") if server else None
    if server is not None:
        notes.append(
            f"server: SGLang tp_size {tp}, quantization {quant or 'none'}, dtype "
            f"{server.text('dtype')}, kv_cache_dtype {server.text('kv_cache_dtype')} (not "
            "carried: kit serves with vLLM)"
        )
    retok = first.count("total_output_tokens_retokenized")
    if retok is not None and retok != first.count("total_output_tokens"):
        notes.append(
            f"output tokens: {first.count('total_output_tokens')} by the server, {retok} "
            "re-tokenised by the client"
        )
    workload = _workload(first, notes)
    for point in points:
        f = point.figures
        chunky = chunk_warning(
            f"{point.label}: ",
            f.itl_ms.mean if f.itl_ms else None,
            f.tpot_ms.mean if f.tpot_ms else None,
        )
        if chunky:
            warnings.append(chunky)
    repo = hub_id(model)
    disaggregated = info is not None and bool(info.items("prefill"))
    return Imported(
        file=path.name,
        tool="sglang bench_serving",
        layout="bench_serving --output-file JSONL",
        model=model,
        hub_repo=repo,
        engine=engine,
        quantization=str(quant or "none") if server is not None else None,
        workload=workload,
        points=points,
        reference_only="prefill/decode disaggregated serving" if disaggregated else None,
        speculative=_speculative(first, server),
        warnings=warnings,
        notes=notes,
    )


READER = Reader(
    tool="sglang bench_serving",
    reads="SGLang `python -m sglang.bench_serving --output-file` JSONL",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
