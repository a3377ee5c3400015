"""`vllm bench serve` at each of kit's load points, against the same server, side by side.

For a recipe whose bench has a load pattern: per point, one invocation with the same traffic
(:func:`run_points`), its figures against kit's (:func:`compare_point`).
"""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from kit.bench import BenchResult
from kit.bench.load import LoadPoint
from kit.bench.load.datasets import Planned, nth
from kit.bench.stream import ignores_eos
from kit.figures import AGREEMENT_PCT, TOOL_KINDS, Kind
from kit.vllm_bench.job import VllmBenchJob
from kit.vllm_bench.prompts import shown_argv

log = logging.getLogger(__name__)

DRIVER = Path(__file__).with_name("driver.py")

# vLLM's name of each of the figure table's tool figures (kit.figures.TOOL_KINDS): a
# throughput's own key, a latency's statistic then the figure ("median_ttft_ms", "p99_itl_ms")
_VLLM_RATE = {
    "output_tps": "output_throughput",
    "request_throughput": "request_throughput",
    "total_tps": "total_token_throughput",
}
_VLLM_STAT = {"mean": "mean", "p50": "median", "p90": "p90", "p99": "p99"}


def vllm_key(k: Kind) -> str:
    """vLLM's result key of a figure of the table."""
    if k.point_stat is None:
        return _VLLM_RATE[k.key]
    return f"{_VLLM_STAT[k.point_stat]}_{k.point_field}"


# (name, vLLM result key, kit's field of a point, its statistic or None)
# the judged ones first, the tails after them, as reports have listed them
FIGURES: tuple[tuple[str, str, str, str | None], ...] = tuple(
    (k.title, vllm_key(k), k.figure, k.point_stat)
    for k in sorted(TOOL_KINDS, key=lambda k: not k.judged)
)
AGREEMENT = tuple(k.title for k in TOOL_KINDS if k.judged)


class AtLevel(Protocol):
    """What :func:`point_argv` reads of a point: its measured requests and its level."""

    @property
    def requests(self) -> int: ...
    @property
    def level(self) -> float: ...


class PointFigure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    figure: str = Field(description="e.g. 'output tok/s', 'TTFT p50' (ms).")
    kit: float | None = Field(description="kit's value at the point.")
    vllm: float | None = Field(description="vLLM's value at the point.")
    delta_pct: float | None = Field(description="(kit - vLLM) / vLLM, percent.")


class VllmBenchPoint(BaseModel):
    """One load point: vLLM's figures beside kit's."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="kit's point, e.g. concurrency-4.")
    argv: list[str] = Field(description="The `vllm bench serve` arguments (after the module).")
    result_file: str | None = Field(None, description="vLLM's saved result (beside the report).")
    completed: int = Field(description="Requests vLLM counted as completed.")
    failed: int = Field(description="Requests vLLM counted as failed.")
    figures: list[PointFigure] = Field(description="Each figure, kit's and vLLM's.")
    agree: bool | None = Field(
        description=f"Output tok/s and the median TTFT, TPOT, ITL within {AGREEMENT_PCT:g} % "
        "(None: not compared)."
    )
    note: str | None = Field(None, description="What differs in how the two sent the traffic.")
    error: str | None = Field(None, description="Why the invocation failed, if it did.")


def invoke(
    python: str, argv: list[str], env: dict[str, str], timeout_s: float, log_file: Path
) -> str | None:
    """Run `vllm bench serve` (``argv`` after the module), its output into ``log_file``; why it
    failed, or None."""
    try:
        proc = subprocess.run(
            [python, "-m", "vllm.entrypoints.cli.main", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    log_file.write_text(proc.stdout)
    if proc.returncode != 0:
        return f"exit {proc.returncode}: " + " | ".join(proc.stdout.splitlines()[-3:])
    return None


def invoke_points(
    python: str, argvs: dict[str, list[str]], env: dict[str, str], timeout_s: float, out_dir: Path
) -> dict[str, str | None]:
    """Run each point's `vllm bench serve` (``argvs``: label -> arguments after the module)
    in one engine process (:mod:`kit.vllm_bench.driver`), its output into
    ``vllm-bench-points.log``; label -> why that point failed, or None."""
    plan = out_dir / "vllm-bench-points.plan.json"
    status_file = out_dir / "vllm-bench-points.status.json"
    plan.write_text(json.dumps([{"label": k, "argv": v[2:]} for k, v in argvs.items()]))
    status_file.unlink(missing_ok=True)
    error = None
    with (out_dir / "vllm-bench-points.log").open("w") as log_fh:
        try:
            proc = subprocess.run(
                [python, str(DRIVER), str(plan), str(status_file)],
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=timeout_s * max(1, len(argvs)),
                check=False,
            )
            if proc.returncode != 0:
                error = f"the driver exited {proc.returncode} (vllm-bench-points.log)"
        except (OSError, subprocess.TimeoutExpired) as exc:
            error = f"{type(exc).__name__}: {exc}"
    done: dict[str, str | None] = {}
    if status_file.exists():
        done = json.loads(status_file.read_text())
    return {label: done.get(label, error or "not run") for label in argvs}


def point_lines(planned: list[Planned], point: LoadPoint, offset: int, salt: str) -> str:
    """The custom dataset of one point: the prompts kit sent at it (from ``offset``, its
    warm-ups being first), each behind ``salt`` and its number, with its output length."""
    rows = []
    for i in range(point.requests):
        p = nth(planned, offset + i)
        rows.append(json.dumps({"prompt": f"[{salt}-{i}] {p.text}", "output_tokens": p.max_tokens}))
    return "\n".join(rows) + "\n"


def point_argv(
    job: VllmBenchJob, point: AtLevel, dataset: Path, *, warmups: int, result_file: str
) -> list[str]:
    """`vllm bench serve` arguments for one of kit's load points, its prompts in ``dataset``."""
    bench, url, model, tokenizer, result_dir = (
        job.bench,
        job.url,
        job.model,
        job.tokenizer,
        job.out_dir,
    )
    load = bench.load
    assert load is not None
    argv = [
        "bench", "serve", "--backend", "openai-chat", "--base-url", url.rstrip("/"),
        "--endpoint", "/v1/chat/completions", "--model", model, "--tokenizer", str(tokenizer),
        "--dataset-name", "custom", "--dataset-path", str(dataset), "--custom-output-len", "-1",
        "--skip-chat-template", "--disable-shuffle",
        "--num-prompts", str(point.requests), "--num-warmups",
        str(warmups), "--temperature", str(bench.sampling.temperature),
        "--top-p", str(bench.sampling.top_p), "--top-k", str(bench.sampling.top_k),
        "--min-p", str(bench.sampling.min_p),
        "--extra-body", json.dumps({"chat_template_kwargs": dict(bench.chat_template_kwargs)}),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99",
        "--save-result", "--result-dir", str(result_dir), "--result-filename", result_file,
        "--disable-tqdm",
    ]  # fmt: skip
    argv += load.vllm_args(point.level)
    if ignores_eos(bench):  # as kit's requests
        argv.append("--ignore-eos")
    return argv


def compare_point(point: LoadPoint, data: dict[str, Any]) -> tuple[list[PointFigure], bool | None]:
    """kit's figures of a point against vLLM's saved result.

    Both tools define the figures alike here (vLLM's benchmark is where kit's load definitions
    come from): output throughput over the benchmark's duration, TTFT to the first token, TPOT
    per request excluding the first, ITL per chunk. One difference: vLLM's TTFT ends at the
    first chunk with choices, kit's at the first with text; a first token with no text of its
    own (a partial UTF-8 sequence, frequent with a synthetic model's random tokens) moves kit's
    a token later. kit's points keep both (``first_chunk_ms``), and the TTFT compared here is
    vLLM's. Agreement: output throughput and the median TTFT, TPOT and ITL each within 2 %.
    """
    figures = []
    for name, key, field, stat in FIGURES:
        raw = data.get(key)
        theirs = float(raw) if isinstance(raw, (int, float)) else None
        value = getattr(point, field)
        if field == "ttft_ms" and point.first_chunk_ms is not None:
            value = point.first_chunk_ms  # vLLM stops its TTFT clock at the first chunk
        ours: float | None = getattr(value, stat) if stat else value
        delta = (ours - theirs) / theirs * 100 if ours is not None and theirs else None
        figures.append(PointFigure(figure=name, kit=ours, vllm=theirs, delta_pct=delta))
    judged = [f.delta_pct for f in figures if f.figure in AGREEMENT]
    if any(d is None for d in judged):
        return figures, None
    return figures, all(abs(d or 0) <= AGREEMENT_PCT for d in judged)


def run_points(
    job: VllmBenchJob,
    env: dict[str, str],
    kit_result: BenchResult | None,
    planned: list[Planned],
) -> tuple[list[VllmBenchPoint], list[str]]:
    """One `vllm bench serve` per kit load point on ``planned`` (kit's requests, as
    :meth:`kit.bench.Bencher.planned` drew them), run by ``job.python`` in ``env``; the entries
    and notes on what differs.

    For a recipe whose bench has a load pattern: per point, one invocation with the same
    traffic. The prompts are kit's own for that point (the dataset's, drawn as kit draws them),
    written as a custom JSONL dataset with each request's output length and sent as the chat
    message as they are (``--skip-chat-template --disable-shuffle``), each behind a salt of its
    own, so neither client's requests hit the prefix cache the other one filled. (vLLM's random
    dataset at one ``--seed`` sends the same prompts at every point: on one server each point
    after the first then reads part of its prompts from the prefix cache, which an H200 sweep
    showed at 70 % hits.) ``--ignore-eos`` when the dataset sets it, the point's measured
    requests as ``--num-prompts`` and ``bench.vllm_bench.warmups`` as ``--num-warmups`` (kit's
    own count at the point with ``warmup_per_stream``, so both reach the point's batch size); at
    a concurrency point ``--max-concurrency`` with ``--request-rate inf``, at a rate point
    ``--request-rate`` with ``--burstiness 1`` (Poisson; kit's constant arrivals have no exact
    vLLM equivalent and are sent as Poisson, which the entry says) and the rate pattern's
    ``max_concurrency``. Through the chat endpoint, as kit sends them. All points run in one
    process of the engine's environment (:mod:`kit.vllm_bench.driver`: vLLM's own parser and
    entry point of the subcommand, one point after the other), so vLLM is imported once per
    sweep, not once per point.
    """
    bench, out_dir = job.bench, job.out_dir
    points = kit_result.load_points if kit_result else []
    load = bench.load
    assert load is not None
    note = load.vllm_note()
    argvs: dict[str, list[str]] = {}
    for point in points:
        dataset = out_dir / f"vllm-bench-{point.label}.jsonl"
        salt = f"vllm-{point.label}-{secrets.token_hex(4)}"
        dataset.write_text(point_lines(planned, point, load.warmups_at(point.level), salt))
        argvs[point.label] = point_argv(
            job,
            point,
            dataset,
            warmups=load.vllm_warmups(point.level, job.settings.warmups),
            result_file=f"vllm-bench-{point.label}.json",
        )
    log.info("vllm bench serve: %d points in one process", len(argvs))
    t0 = time.monotonic()
    status = invoke_points(job.python, argvs, env, job.settings.timeout_s, out_dir)
    log.info("vllm bench serve: %d points done in %.0f s", len(argvs), time.monotonic() - t0)
    entries: list[VllmBenchPoint] = []
    for point in points:
        name = f"vllm-bench-{point.label}.json"
        shown = shown_argv(argvs[point.label], out_dir)
        path = out_dir / name
        error = status.get(point.label, "not run")
        if error is None and path.exists():
            data = json.loads(path.read_text())
            figures, agree = compare_point(point, data)
            entries.append(
                VllmBenchPoint(
                    label=point.label,
                    argv=shown,
                    result_file=name,
                    completed=int(data.get("completed") or 0),
                    failed=int(data.get("failed") or 0),
                    figures=figures,
                    agree=agree,
                    note=note,
                )
            )
        else:
            entries.append(
                VllmBenchPoint(
                    label=point.label,
                    argv=shown,
                    completed=0,
                    failed=point.requests,
                    figures=[],
                    agree=None,
                    note=note,
                    error=error or "no result file written",
                )
            )
            log.error("vllm bench serve: %s failed: %s", point.label, error)
    notes = []
    for e in entries:
        if e.error:
            notes.append(f"{e.label}: vllm bench serve failed: {e.error}")
        for f in e.figures:
            if (
                f.figure in AGREEMENT
                and f.delta_pct is not None
                and abs(f.delta_pct) > AGREEMENT_PCT
            ):
                notes.append(
                    f"{e.label}: {f.figure} differs by {f.delta_pct:+.2f} % (kit {f.kit:.2f}, "
                    f"vLLM {f.vllm:.2f}): the two ran one after the other on the same server"
                )
    return entries, notes
