"""The engine's command line for a recipe: vLLM's OpenAI-server arguments and the JSON of
``--speculative-config``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit.recipe import Recipe
from kit.recipe.acceptance import target


def speculative_config(recipe: Recipe, draft_dir: Path | None) -> dict[str, Any] | None:
    """The JSON for ``--speculative-config``, or None without speculative decoding. A
    synthetic acceptance (:mod:`kit.recipe.acceptance`) becomes vLLM's ``rejection_sample_method
    synthetic`` with ``synthetic_acceptance_rates``."""
    spec = recipe.speculative
    if spec.method == "none":
        return None
    # vLLM selects DFlash and DFlash2 drafts through one method; the draft's architecture
    # (DFlashDraftModel / DFlash2DraftModel) picks the model class
    method = "dflash" if spec.method in {"dflash", "dflash2"} else spec.method
    cfg: dict[str, Any] = {"method": method, "num_speculative_tokens": spec.num_speculative_tokens}
    if draft_dir is not None:
        cfg["model"] = str(draft_dir)
    if spec.prompt_lookup_min is not None:
        cfg["prompt_lookup_min"] = spec.prompt_lookup_min
    if spec.prompt_lookup_max is not None:
        cfg["prompt_lookup_max"] = spec.prompt_lookup_max
    cfg.update(spec.extra)
    synthetic = target(spec, recipe.reference)
    if synthetic is not None:
        # the resolved unconditional rates, whatever the form: vLLM takes them for any profile
        cfg["rejection_sample_method"] = "synthetic"
        cfg["synthetic_acceptance_rates"] = synthetic.rates
    return cfg


def server_args(
    recipe: Recipe, model_dir: Path, draft_dir: Path | None, host: str, port: int
) -> list[str]:
    """vLLM OpenAI-server arguments for a recipe (without the interpreter)."""
    s = recipe.server
    args = [
        "--model",
        str(model_dir),
        "--served-model-name",
        s.served_model_name,
        "--host",
        host,
        "--port",
        str(port),
        "--max-model-len",
        str(s.max_model_len),
        "--dtype",
        s.dtype,
        "--kv-cache-dtype",
        s.kv_cache_dtype,
        "--tensor-parallel-size",
        str(s.tensor_parallel_size),
    ]
    if s.pipeline_parallel_size != 1:
        args += ["--pipeline-parallel-size", str(s.pipeline_parallel_size)]
    if s.engine.device == "cuda":
        args += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
    if s.enforce_eager:
        args.append("--enforce-eager")
    if s.attention_backend:
        args += ["--attention-backend", s.attention_backend]
    spec = speculative_config(recipe, draft_dir)
    if spec is not None:
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return args + list(s.extra_args)
