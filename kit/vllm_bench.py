"""vLLM's own benchmark (`vllm bench serve`) against the server kit measured, side by side.

For each prompt of the recipe, one invocation at max concurrency 1: a custom JSONL dataset
holding the prompt ``runs`` times (sent as the chat message as it is: ``--skip-chat-template``,
the server applies the template as it does for kit), the prompt's max_tokens as the output
length, the recipe's sampling, ``ignore_eos`` when the recipe sets it, and the same
``chat_template_kwargs``. Its ``--save-result --save-detailed`` JSON is parsed here.

The definitions differ, so the comparable figures are computed, not copied:

- kit's decode TPS of a request is ``completion_tokens / (wall - TTFT)``, TTFT being the first
  chunk carrying text and wall the ``[DONE]`` line.
- vLLM's TPOT of a request is ``(latency - ttft) / (output_tokens - 1)``, its ttft the first
  chunk with ``choices`` (the role chunk, sent with the first token) and its latency the last
  data line (the usage chunk). ``1000 / TPOT_ms`` therefore counts one token fewer than kit:
  the comparable figure is ``output_tokens / (ttft + sum(itl) - ttft)``, i.e. tokens over the
  span from the first to the last content chunk, per request (``--save-detailed`` keeps the
  per-request ``ttfts``, ``itls`` and ``output_lens``), averaged over the requests like kit's.
  ``1000 / mean_tpot_ms * n / (n - 1)`` is recorded too.
- ITL is per chunk, not per token: with speculative decoding a chunk carries several tokens.

Agreement: decode TPS within 2 % and TTFT within 5 ms, else the comparison says which differs.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from kit.bench import BenchResult, PromptSummary
from kit.errors import BadInputError
from kit.paths import display_path
from kit.recipe import Bench, Prompt, VllmBenchSettings
from kit.vllm_bench_load import VllmBenchPoint, invoke, run_points

log = logging.getLogger(__name__)

DECODE_TOLERANCE_PCT = 2.0
TTFT_TOLERANCE_MS = 5.0


class VllmBenchPrompt(BaseModel):
    """One prompt: vLLM's figures, the comparable ones, kit's, and the deltas."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(description="Prompt name.")
    max_tokens: int = Field(description="Output length asked for.")
    result_file: str | None = Field(None, description="vLLM's saved result (beside the report).")
    argv: list[str] = Field(description="The `vllm bench serve` arguments (after the module).")
    completed: int = Field(description="Requests vLLM counted as completed.")
    failed: int = Field(description="Requests vLLM counted as failed.")
    output_tokens: list[int] = Field(description="Per request, from the usage chunk.")
    mean_ttft_ms: float | None = Field(description="vLLM's mean TTFT (first chunk), ms.")
    median_ttft_ms: float | None = Field(description="vLLM's median TTFT, ms.")
    mean_tpot_ms: float | None = Field(description="vLLM's mean TPOT, (latency-ttft)/(n-1), ms.")
    mean_itl_ms: float | None = Field(description="vLLM's mean inter-chunk latency, ms.")
    mean_e2el_ms: float | None = Field(None, description="vLLM's mean end-to-end latency, ms.")
    output_throughput: float | None = Field(description="vLLM's output tok/s over its duration.")
    decode_tps_from_tpot: float | None = Field(
        description="1000 / mean_tpot_ms x n/(n-1), n the mean output tokens."
    )
    decode_tps: float | None = Field(
        description="Comparable with kit's: mean over requests of tokens / sum(itl)."
    )
    spec_decode_acceptance_length: float | None = Field(
        None, description="vLLM's own acceptance length over its run (1 + accepted/drafts)."
    )
    spec_decode_acceptance_rate: float | None = Field(
        None, description="vLLM's own acceptance rate over its run, percent."
    )
    kit_decode_tps: float | None = Field(description="kit's mean decode TPS for the prompt.")
    kit_ttft_ms: float | None = Field(description="kit's mean TTFT for the prompt, ms.")
    decode_delta_pct: float | None = Field(description="(kit - vLLM) / vLLM decode TPS, percent.")
    ttft_delta_ms: float | None = Field(description="kit - vLLM mean TTFT, ms.")
    agree: bool | None = Field(
        description="Decode within 2 % and TTFT within 5 ms (None: not comparable)."
    )
    error: str | None = Field(None, description="Why the invocation failed, if it did.")


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
        description="Per load point, for a bench with a load pattern (kit.vllm_bench_load).",
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


DEFINITIONS = (
    "kit decode TPS = tokens / (wall - TTFT); vLLM TPOT = (latency - ttft) / (n - 1); the "
    "comparable vLLM figure is tokens / sum(itl) per request (first to last content chunk), "
    "averaged over requests; vLLM's ttft is the first chunk with choices (the role chunk, sent "
    "with the first token), kit's the first chunk carrying text"
)


def dataset_lines(prompt: Prompt, runs: int) -> str:
    """The custom dataset: the prompt ``runs`` times with its output length."""
    line = json.dumps({"prompt": prompt.text, "output_tokens": prompt.max_tokens})
    return "\n".join([line] * runs) + "\n"


def bench_argv(
    *,
    url: str,
    model: str,
    tokenizer: Path,
    dataset: Path,
    prompt: Prompt,
    bench: Bench,
    runs: int,
    warmups: int,
    result_dir: Path,
    result_file: str,
) -> list[str]:
    """Arguments of `vllm bench serve` for one prompt (after ``-m vllm.entrypoints.cli.main``)."""
    s = bench.sampling
    extra: dict[str, Any] = {"chat_template_kwargs": dict(bench.chat_template_kwargs)}
    if s.seed is not None:
        extra["seed"] = s.seed
    argv = [
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--base-url",
        url.rstrip("/"),
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        model,
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(dataset),
        "--custom-output-len",
        str(prompt.max_tokens),
        "--skip-chat-template",
        "--disable-shuffle",
        "--num-prompts",
        str(runs),
        "--max-concurrency",
        "1",
        "--request-rate",
        "inf",
        "--num-warmups",
        str(warmups),
        "--temperature",
        str(s.temperature),
        "--top-p",
        str(s.top_p),
        "--top-k",
        str(s.top_k),
        "--min-p",
        str(s.min_p),
        "--extra-body",
        json.dumps(extra, separators=(",", ":")),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        result_file,
        "--disable-tqdm",
    ]
    if bench.ignore_eos:
        argv.append("--ignore-eos")
    return argv


def shown_argv(argv: list[str], out_dir: Path) -> list[str]:
    """The arguments as a report shows them: files of ``out_dir`` by their names (they lie
    beside the report), other absolute paths (the tokenizer, a model path as the served name)
    the way every path in a report is shown."""
    shown = []
    for before, arg in zip(["", *argv], argv, strict=False):
        path = Path(arg)
        if before == "--endpoint":  # a URL path, not a file
            shown.append(arg)
        elif arg.startswith(str(out_dir)):
            shown.append(path.name)
        elif path.is_absolute():
            shown.append(display_path(path))
        else:
            shown.append(arg)
    return shown


def _float(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def parse_result(data: dict[str, Any]) -> dict[str, Any]:
    """vLLM's saved result -> the fields of :class:`VllmBenchPrompt` it determines."""
    if "completed" not in data:
        raise BadInputError("not a `vllm bench serve` result: no 'completed' field")
    lens = [int(n) for n in data.get("output_lens") or []]
    itls = data.get("itls") or []
    errors = data.get("errors") or []
    per_request = []
    for i, n in enumerate(lens):
        if i < len(errors) and errors[i]:
            continue
        span = sum(itls[i]) if i < len(itls) and itls[i] else 0.0
        if n > 0 and span > 0:
            per_request.append(n / span)
    tpot = _float(data, "mean_tpot_ms")
    ok_lens = [n for n in lens if n > 1]
    mean_n = statistics.fmean(ok_lens) if ok_lens else None
    rate = _float(data, "spec_decode_acceptance_rate")
    return {
        "completed": int(data.get("completed") or 0),
        "failed": int(data.get("failed") or 0),
        "output_tokens": lens,
        "mean_ttft_ms": _float(data, "mean_ttft_ms"),
        "median_ttft_ms": _float(data, "median_ttft_ms"),
        "mean_tpot_ms": tpot,
        "mean_itl_ms": _float(data, "mean_itl_ms"),
        "mean_e2el_ms": _float(data, "mean_e2el_ms"),
        "output_throughput": _float(data, "output_throughput"),
        "decode_tps_from_tpot": (
            1000.0 / tpot * mean_n / (mean_n - 1) if tpot and mean_n and mean_n > 1 else None
        ),
        "decode_tps": statistics.fmean(per_request) if per_request else None,
        "spec_decode_acceptance_length": _float(data, "spec_decode_acceptance_length"),
        "spec_decode_acceptance_rate": rate,
    }


def compare(
    prompt: Prompt,
    parsed: dict[str, Any],
    kit: PromptSummary | None,
    argv: list[str],
    result_file: str | None,
) -> VllmBenchPrompt:
    """One prompt's side-by-side entry from vLLM's parsed result and kit's summary."""
    fields = dict(parsed)
    kit_tps = kit.decode_tps.mean if kit else None
    kit_ttft = kit.ttft_ms.mean if kit else None
    vllm_tps = fields["decode_tps"]
    vllm_ttft = fields["mean_ttft_ms"]
    dpct = (kit_tps - vllm_tps) / vllm_tps * 100 if kit_tps and vllm_tps else None
    dttft = kit_ttft - vllm_ttft if kit_ttft is not None and vllm_ttft is not None else None
    agree = None
    if dpct is not None and dttft is not None:
        agree = abs(dpct) <= DECODE_TOLERANCE_PCT and abs(dttft) <= TTFT_TOLERANCE_MS
    return VllmBenchPrompt(
        prompt=prompt.name,
        max_tokens=prompt.max_tokens,
        result_file=result_file,
        argv=argv,
        kit_decode_tps=kit_tps,
        kit_ttft_ms=kit_ttft,
        decode_delta_pct=dpct,
        ttft_delta_ms=dttft,
        agree=agree,
        **fields,
    )


def explain(entries: list[VllmBenchPrompt]) -> list[str]:
    """Notes on each figure outside its tolerance."""
    notes = []
    for e in entries:
        if e.error:
            notes.append(f"{e.prompt}: vllm bench serve failed: {e.error}")
            continue
        if e.decode_delta_pct is not None and abs(e.decode_delta_pct) > DECODE_TOLERANCE_PCT:
            notes.append(
                f"{e.prompt}: decode TPS differs by {e.decode_delta_pct:+.2f} % (kit "
                f"{e.kit_decode_tps:.2f}, vLLM {e.decode_tps:.2f}): the two ran one after the "
                "other on the same server, so run-to-run variation (kit's CV) is part of it"
            )
        if e.ttft_delta_ms is not None and abs(e.ttft_delta_ms) > TTFT_TOLERANCE_MS:
            notes.append(
                f"{e.prompt}: TTFT differs by {e.ttft_delta_ms:+.1f} ms (kit {e.kit_ttft_ms:.1f}, "
                f"vLLM {e.mean_ttft_ms:.1f})"
            )
    return notes


def run_vllm_bench(
    *,
    python: str,
    pythonpath: str | None,
    url: str,
    model: str,
    tokenizer: Path,
    bench: Bench,
    settings: VllmBenchSettings,
    kit_result: BenchResult | None,
    out_dir: Path,
) -> VllmBench:
    """Run `vllm bench serve` once per prompt and compare with kit's result."""
    runs = settings.runs or bench.runs
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    env.setdefault("PYTHONUNBUFFERED", "1")
    if bench.load is not None:
        points, notes = run_points(
            python=python,
            env=env,
            url=url,
            model=model,
            tokenizer=tokenizer,
            bench=bench,
            warmups=settings.warmups,
            timeout_s=settings.timeout_s,
            kit_result=kit_result,
            out_dir=out_dir,
        )
        judged = [p.agree for p in points if p.agree is not None]
        return VllmBench(
            tool="python -m vllm.entrypoints.cli.main bench serve (the engine's own)",
            definitions="at each load point, as kit.vllm_bench_load says",
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
        argv = bench_argv(
            url=url,
            model=model,
            tokenizer=tokenizer,
            dataset=dataset,
            prompt=prompt,
            bench=bench,
            runs=runs,
            warmups=settings.warmups,
            result_dir=out_dir,
            result_file=name,
        )
        log.info("vllm bench serve: %s, %d requests at concurrency 1", prompt.name, runs)
        t0 = time.monotonic()
        log_file = out_dir / f"vllm-bench-{prompt.name}.log"
        error = invoke(python, argv, env, settings.timeout_s, log_file)
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
