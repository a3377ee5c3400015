"""The task harness (``bench.quality.harness``): lm-evaluation-harness's CLI, from its own venv,
against the served endpoint, and its results file read back into the report's ``harness``
(:class:`HarnessRun`); docs/quality.md says what runs and what does not."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from kit.base import FrozenModel
from kit.paths import display_path
from kit.recipe.quality import Harness

log = logging.getLogger(__name__)

LM_EVAL = "lm-eval"
LM_EVAL_VERSION = "0.4.13"
# the api extra brings what lm-eval's local-completions model needs (aiohttp, requests,
# tenacity, tiktoken); no torch, no transformers
LM_EVAL_REQUIREMENTS = [f"lm-eval[api]=={LM_EVAL_VERSION}"]
ENDPOINTS = {
    "local-completions": "/v1/completions",
    "local-chat-completions": "/v1/chat/completions",
}
OUT_DIR = "lm-eval"  # under the run's output folder
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*")

ModelArg = str | int | float | bool | None


class HarnessMetric(FrozenModel):
    """One figure of a task, as lm-eval's results file gives it."""

    metric: str = Field(description="lm-eval's metric name (e.g. exact_match).")
    filter: str = Field(description="The filter its answers went through ('none': as answered).")
    value: float = Field(description="The metric's value over the task's documents.")
    stderr: float | None = Field(description="lm-eval's standard error (None: not given).")


class HarnessTask(FrozenModel):
    """One task (or group) of the results file."""

    task: str = Field(description="lm-eval's task or group name.")
    version: str | None = Field(description="The task's version (None: not given).")
    n_shot: int | None = Field(description="Few-shot examples per prompt (None: not given).")
    docs: int | None = Field(description="Documents scored (None: a group).")
    docs_total: int | None = Field(description="Documents the task has (None: a group).")
    metrics: list[HarnessMetric] = Field(description="Its figures.")


class HarnessRun(FrozenModel):
    """The task harness of a run (``bench.quality.harness``): lm-eval's scores, read back from
    its results file, or why there are none."""

    settings: Harness = Field(description="The recipe's bench.quality.harness it ran with.")
    tool_version: str | None = Field(description="lm-eval's version, from its results file.")
    model_args: dict[str, ModelArg] = Field(
        description="lm-eval's --model_args, but the server's URL."
    )
    tasks: list[HarnessTask] = Field(description="Per task, its figures (none on a failure).")
    results_file: str | None = Field(
        description="lm-eval's results file, relative to the run's output folder."
    )
    duration_s: float = Field(description="Wall time of the lm-eval process (install excluded).")
    error: str | None = Field(description="Why there are no scores (None: there are).")


@dataclass(frozen=True)
class HarnessJob:
    """Where lm-eval runs and against what: its venv's python, the server, its model name,
    the recipe's settings, the include folder resolved, the run's output folder, the
    per-request time limit."""

    python: Path
    url: str
    model: str
    settings: Harness
    include_dir: Path | None
    out_dir: Path
    request_timeout_s: float


def model_args(job: HarnessJob) -> dict[str, ModelArg]:
    """lm-eval's --model_args: the served model, no tokenizer (nothing is downloaded; the
    prompts go as text), one request at a time."""
    return {
        "model": job.model,
        "base_url": job.url.rstrip("/") + ENDPOINTS[job.settings.model],
        "tokenizer_backend": None,
        "tokenized_requests": False,
        "num_concurrent": 1,
        "max_retries": 1,
        "timeout": math.ceil(job.request_timeout_s),
    }


def command(job: HarnessJob) -> list[str]:
    """lm-eval's command line (0.4.13's ``run``); the JSON arguments keep a model name with
    a comma whole."""
    s = job.settings
    argv = [str(job.python), "-m", "lm_eval", "run", "--model", s.model]
    argv += ["--model_args", json.dumps(model_args(job)), "--tasks", ",".join(s.tasks)]
    argv += ["--output_path", str((job.out_dir / OUT_DIR).resolve())]
    if job.include_dir is not None:
        argv += ["--include_path", str(job.include_dir)]
    if s.limit is not None:
        argv += ["--limit", str(s.limit)]
    if s.num_fewshot is not None:
        argv += ["--num_fewshot", str(s.num_fewshot)]
    if s.gen_kwargs:
        argv += ["--gen_kwargs", json.dumps(s.gen_kwargs)]
    if s.model == "local-chat-completions":
        argv.append("--apply_chat_template")
    return argv


def environ(settings: Harness) -> dict[str, str]:
    """kit's environment without its Python paths, offline unless the recipe says not."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    if settings.offline:
        env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return env


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _metrics(row: dict[str, Any]) -> list[HarnessMetric]:
    """A task's row of ``results``: keys ``metric,filter`` and ``metric_stderr,filter``."""
    out = []
    for key, raw in row.items():
        metric, _, filt = key.partition(",")
        value = _number(raw)
        if not filt or metric.endswith("_stderr") or value is None:
            continue
        stderr = _number(row.get(f"{metric}_stderr,{filt}"))
        out.append(HarnessMetric(metric=metric, filter=filt, value=value, stderr=stderr))
    return out


def parse_results(data: dict[str, Any]) -> list[HarnessTask]:
    """The tasks of lm-eval's results JSON; ValueError when it has none kit can read."""
    results = data.get("results")
    if not isinstance(results, dict) or not results:
        raise ValueError("no results in lm-eval's results file")
    samples, versions, shots = (data.get(k) or {} for k in ("n-samples", "versions", "n-shot"))
    tasks = []
    for name, row in results.items():
        if not isinstance(row, dict):
            raise ValueError(f"results.{name} is not a mapping")
        n = samples.get(name) or {}
        version = versions.get(name)
        tasks.append(
            HarnessTask(
                task=name,
                version=None if version is None else str(version),
                n_shot=shots.get(name) if isinstance(shots.get(name), int) else None,
                docs=n.get("effective") if isinstance(n.get("effective"), int) else None,
                docs_total=n.get("original") if isinstance(n.get("original"), int) else None,
                metrics=_metrics(row),
            )
        )
    return tasks


def read_results(path: Path) -> tuple[list[HarnessTask], str | None]:
    """The tasks and lm-eval's version from a results file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("lm-eval's results file is not a JSON object")
    version = data.get("lm_eval_version")
    return parse_results(data), version if isinstance(version, str) else None


def failure_reason(log_file: Path, returncode: int) -> str:
    """lm-eval's own words for why it stopped: its exception's line, else its last line."""
    lines = [ln.strip() for ln in log_file.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if _EXCEPTION_LINE.match(ln)]
    said = (errors or lines or ["no output"])[-1]
    return f"lm-eval exited {returncode}: {said[:500]} (log: {display_path(log_file)})"


def _results_files(folder: Path) -> set[Path]:
    return set(folder.glob("**/results_*.json")) if folder.is_dir() else set()


def _run(job: HarnessJob, log_file: Path) -> str | None:
    """Run lm-eval, its output into ``log_file``; why it failed, or None."""
    try:
        with log_file.open("w") as fh:
            proc = subprocess.run(
                command(job),
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=environ(job.settings),
                cwd=job.include_dir or job.out_dir,
                timeout=job.settings.timeout_s,
                check=False,
            )
    except subprocess.TimeoutExpired:
        return f"lm-eval gave no result in {job.settings.timeout_s:g} s (killed)"
    except OSError as exc:
        return f"lm-eval could not start: {exc}"
    return failure_reason(log_file, proc.returncode) if proc.returncode else None


def failed(settings: Harness, reason: str, duration_s: float = 0.0) -> HarnessRun:
    """The report's record of a harness that gave no scores."""
    return HarnessRun(
        settings=settings,
        tool_version=None,
        model_args={},
        tasks=[],
        results_file=None,
        duration_s=round(duration_s, 3),
        error=reason,
    )


def run_harness(job: HarnessJob) -> HarnessRun:
    """lm-eval against the server; a harness that fails is a HarnessRun with its reason, never
    an exception."""
    folder = job.out_dir / OUT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    before = _results_files(folder)
    log.info("harness: lm-eval %s on %s", LM_EVAL_VERSION, ",".join(job.settings.tasks))
    t0 = time.monotonic()
    reason = _run(job, folder / "lm-eval.log")
    duration = time.monotonic() - t0
    new = sorted(_results_files(folder) - before, key=lambda p: p.stat().st_mtime)
    if reason is None and not new:
        reason = f"lm-eval wrote no results file under {display_path(folder)}"
    if reason is not None:
        log.error("harness failed: %s", reason)
        return failed(job.settings, reason, duration)
    try:
        tasks, version = read_results(new[-1])
    except (OSError, ValueError) as exc:
        return failed(job.settings, f"lm-eval's results file {new[-1].name}: {exc}", duration)
    args = {k: v for k, v in model_args(job).items() if k != "base_url"}
    log.info("harness: %s", "; ".join(describe(t) for t in tasks))
    return HarnessRun(
        settings=job.settings,
        tool_version=version,
        model_args=args,
        tasks=tasks,
        results_file=new[-1].relative_to(job.out_dir).as_posix(),
        duration_s=round(duration, 3),
        error=None,
    )


def describe(task: HarnessTask) -> str:
    """One task in one line: ``name: metric value ± stderr, ... (n docs)``."""
    figures = ", ".join(
        f"{m.metric}{'' if m.filter == 'none' else f' ({m.filter})'} {m.value:.4g}"
        + ("" if m.stderr is None else f" ± {m.stderr:.2g}")
        for m in task.metrics
    )
    docs = "" if task.docs is None else f" ({task.docs} docs)"
    return f"{task.task}: {figures or 'no figures'}{docs}"
