"""vLLM's own benchmark (`vllm bench serve`) against the server kit measured, side by side:
per prompt of the sequential protocol (:mod:`kit.vllm_bench.prompts`), or per load point
(:mod:`kit.vllm_bench.points`). How the figures are made comparable, and when they agree, is
in :func:`run_vllm_bench`.
"""

import json
import logging
import os
import time
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from kit.bench import Bencher, BenchResult
from kit.bench.load import Planned
from kit.vllm_bench.job import VllmBenchJob
from kit.vllm_bench.points import VllmBenchPoint, invoke, run_points
from kit.vllm_bench.prompts import (
    DEFINITIONS,
    TTFT_TOLERANCE_MS,
    VllmBenchPrompt,
    bench_argv,
    compare,
    dataset_lines,
    explain,
    parse_result,
    shown_argv,
)

__all__ = [
    "DEFINITIONS",
    "TTFT_TOLERANCE_MS",
    "VllmBench",
    "VllmBenchJob",
    "VllmBenchPoint",
    "VllmBenchPrompt",
    "bench_argv",
    "compare",
    "dataset_lines",
    "explain",
    "parse_result",
    "run_vllm_bench",
    "shown_argv",
]

log = logging.getLogger(__name__)


class VllmBench(BaseModel):
    """`vllm bench serve` against the same server, beside kit's figures."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(description="How it was run.")
    definitions: str = Field(description="How the figures were made comparable.")
    warmups: int = Field(description="Warm-up requests per prompt.")
    runs: int = Field(description="Measured requests per prompt.")
    prompts: list[VllmBenchPrompt] = Field(description="Per prompt.")
    points: list[VllmBenchPoint] = Field(
        default_factory=list,
        description="Per load point, for a bench with a load pattern (kit.vllm_bench.points).",
    )
    agree: bool | None = Field(
        description="Every prompt (or load point) agrees (None: nothing comparable)."
    )
    notes: list[str] = Field(default_factory=list, description="Why figures differ, if they do.")

    @model_serializer(mode="wrap")
    def _points_only_under_load(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not data.get("points"):
            data.pop("points", None)  # a sequential run's comparison is written as it was
        return data


def run_vllm_bench(
    job: VllmBenchJob, kit_result: BenchResult | None, planned: list[Planned] | None = None
) -> VllmBench:
    """Run `vllm bench serve` once per prompt, or per load point on kit's own requests (as kit
    drew them, ``planned``; else drawn again the same way, a file dataset's path relative to
    ``job.recipe_dir``), and compare with kit's result.

    For each prompt of the recipe, one invocation at max concurrency 1: a custom JSONL dataset
    holding the prompt ``runs`` times (sent as the chat message as it is:
    ``--skip-chat-template``, the server applies the template as it does for kit), the prompt's
    max_tokens as the output length, the recipe's sampling, ``ignore_eos`` when the recipe sets
    it, and the same ``chat_template_kwargs``. Its ``--save-result --save-detailed`` JSON is
    parsed by :func:`parse_result`. Load points: :func:`kit.vllm_bench.points.run_points`.

    The definitions differ, so the comparable figures are computed, not copied:

    - kit's decode TPS of a request is ``completion_tokens / (wall - TTFT)``, TTFT being the
      first chunk carrying text and wall the ``[DONE]`` line.
    - vLLM's TPOT of a request is ``(latency - ttft) / (output_tokens - 1)``, its ttft the first
      chunk with ``choices`` (the role chunk, sent with the first token) and its latency the
      last data line (the usage chunk). ``1000 / TPOT_ms`` therefore counts one token fewer
      than kit: the comparable figure is ``output_tokens / (ttft + sum(itl) - ttft)``, i.e.
      tokens over the span from the first to the last content chunk, per request
      (``--save-detailed`` keeps the per-request ``ttfts``, ``itls`` and ``output_lens``),
      averaged over the requests like kit's. ``1000 / mean_tpot_ms * n / (n - 1)`` is recorded
      too.
    - ITL is per chunk, not per token: with speculative decoding a chunk carries several tokens.

    Agreement: decode TPS within 2 % (``kit.figures.AGREEMENT_PCT``) and TTFT within 5 ms
    (``TTFT_TOLERANCE_MS``), else the comparison says which differs.
    """
    bench, settings, out_dir = job.bench, job.settings, job.out_dir
    runs = settings.runs or bench.runs
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if job.pythonpath is not None:
        env["PYTHONPATH"] = job.pythonpath
    env.setdefault("PYTHONUNBUFFERED", "1")
    if bench.load is not None:
        if planned is None:
            planned = Bencher(job.url, bench, job.model, recipe_dir=job.recipe_dir).load_plan()
        points, notes = run_points(job, env, kit_result, planned)
        judged = [p.agree for p in points if p.agree is not None]
        return VllmBench(
            tool="vllm bench serve (the engine's own), every point in one process "
            "(kit.vllm_bench.driver)",
            definitions="at each load point, as kit.vllm_bench.points says",
            warmups=settings.warmups,
            runs=0,
            prompts=[],
            points=points,
            agree=all(judged) if judged else None,
            notes=notes,
        )
    summaries = {p.prompt: p for p in (kit_result.prompts if kit_result else [])}
    entries: list[VllmBenchPrompt] = []
    for prompt in bench.prompts:
        dataset = out_dir / f"vllm-bench-{prompt.name}.jsonl"
        dataset.write_text(dataset_lines(prompt, runs))
        name = f"vllm-bench-{prompt.name}.json"
        argv = bench_argv(job, prompt, dataset, runs=runs, result_file=name)
        log.info("vllm bench serve: %s, %d requests at concurrency 1", prompt.name, runs)
        t0 = time.monotonic()
        log_file = out_dir / f"vllm-bench-{prompt.name}.log"
        error = invoke(job.python, argv, env, settings.timeout_s, log_file)
        shown = shown_argv(argv, out_dir)
        path = out_dir / name
        if error is None and path.exists():
            parsed = parse_result(json.loads(path.read_text()))
            entries.append(compare(prompt, parsed, summaries.get(prompt.name), shown, name))
            log.info("vllm bench serve: %s done in %.0f s", prompt.name, time.monotonic() - t0)
        else:
            entries.append(
                VllmBenchPrompt(
                    prompt=prompt.name,
                    max_tokens=prompt.max_tokens,
                    argv=shown,
                    completed=0,
                    failed=runs,
                    output_tokens=[],
                    mean_ttft_ms=None,
                    median_ttft_ms=None,
                    mean_tpot_ms=None,
                    mean_itl_ms=None,
                    output_throughput=None,
                    decode_tps_from_tpot=None,
                    decode_tps=None,
                    kit_decode_tps=None,
                    kit_ttft_ms=None,
                    decode_delta_pct=None,
                    ttft_delta_ms=None,
                    agree=None,
                    error=error or "no result file written",
                )
            )
            log.error("vllm bench serve: %s failed: %s", prompt.name, error)
    verdicts = [e.agree for e in entries if e.agree is not None]
    return VllmBench(
        tool="python -m vllm.entrypoints.cli.main bench serve (the engine's own)",
        definitions=DEFINITIONS,
        warmups=settings.warmups,
        runs=runs,
        prompts=entries,
        agree=all(verdicts) if verdicts else None,
        notes=explain(entries),
    )
