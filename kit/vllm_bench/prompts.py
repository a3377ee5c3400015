"""`vllm bench serve` per prompt of the sequential protocol: its arguments, its saved result
parsed, and the comparison with kit's figures (the definitions: :mod:`kit.vllm_bench`)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kit.bench import PromptSummary
from kit.errors import BadInputError
from kit.figures import AGREEMENT_PCT
from kit.paths import display_path
from kit.recipe import Prompt
from kit.vllm_bench.job import VllmBenchJob

TTFT_TOLERANCE_MS = 5.0  # decode TPS: within kit.figures.AGREEMENT_PCT


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
        description=f"Decode within {AGREEMENT_PCT:g} % and TTFT within {TTFT_TOLERANCE_MS:g} ms "
        "(None: not comparable)."
    )
    error: str | None = Field(None, description="Why the invocation failed, if it did.")


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
    job: VllmBenchJob, prompt: Prompt, dataset: Path, *, runs: int, result_file: str
) -> list[str]:
    """Arguments of `vllm bench serve` for one prompt (after ``-m vllm.entrypoints.cli.main``),
    ``runs`` times from ``dataset``, its warm-ups as ``job.settings`` says."""
    bench, url, model, tokenizer = job.bench, job.url, job.model, job.tokenizer
    warmups, result_dir = job.settings.warmups, job.out_dir
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
        agree = abs(dpct) <= AGREEMENT_PCT and abs(dttft) <= TTFT_TOLERANCE_MS
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
        if e.decode_delta_pct is not None and abs(e.decode_delta_pct) > AGREEMENT_PCT:
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
