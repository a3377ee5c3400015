"""What lowers decode-TPS noise of the CPU recipe on a small shared machine?

    .venv/bin/python experiments/cpu-noise.py [--blocks 2] [--runs 10]      (KIT_HOME as for make)

Boots the cpu-tiny recipe's server (built and cached as `make reproduce` does) once per block,
alternating the arms block by block (A B A B ...), and runs the recipe's protocol with
``--runs`` measured runs per prompt in each:

- ``default``: vLLM's own thread settings, the bench client unpinned;
- ``split``: the server's OpenMP threads bound to CPU 0 (VLLM_CPU_OMP_THREADS_BIND=0), the bench
  client pinned to the last CPU.

Per block and prompt it prints the decode TPS mean, the CV of the first 5 runs (what the
protocol uses), the CV of all runs, and a robust CV (1.4826 x MAD / median), plus the other
processes' CPU share from kit's host-load sampler. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from kit import engine as engine_mod
from kit.bench import Bencher, Watch, model_info
from kit.build import build
from kit.probe import HostLoadSampler
from kit.recipe import load_recipe
from kit.serve import NativeRuntime

ROOT = Path(__file__).resolve().parents[1]
ARMS = {
    "default": ({}, None),
    "split": ({"VLLM_CPU_OMP_THREADS_BIND": "0"}, (os.cpu_count() or 1) - 1),
}


def _cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.mean(xs) * 100 if len(xs) > 1 else 0.0


def _robust_cv(xs: list[float]) -> float:
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    return 1.4826 * mad / med * 100


def block(arm: str, runs: int) -> list[dict[str, object]]:
    env, client_cpu = ARMS[arm]
    sets = [f"bench.runs={runs}", "bench.prefill=null"]
    sets += [f'server.env.{k}="{v}"' for k, v in env.items()]
    loaded = load_recipe(ROOT / "recipes" / "cpu-tiny.yaml", sets)
    built = build(loaded)
    server_cfg = loaded.recipe.server
    eng = engine_mod.resolve(server_cfg.engine, server_cfg.patches)
    before = os.sched_getaffinity(0)
    rows: list[dict[str, object]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        NativeRuntime(eng).start(
            loaded.recipe, built.served_dir, built.draft_dir, Path(tmp) / "server.log"
        ) as server,
    ):
        try:
            if client_cpu is not None:
                os.sched_setaffinity(0, {client_cpu})
            name, max_len = model_info(server.url)
            with HostLoadSampler() as load:
                watch = Watch(hooks=(load.mark,))
                result = Bencher(
                    server.url, loaded.recipe.bench, name, max_model_len=max_len, watch=watch
                ).run()
        finally:
            os.sched_setaffinity(0, before)
    other = load.host_load.other_cpu_pct
    for prompt in loaded.recipe.bench.prompts:
        tps = [
            r.decode_tps
            for r in result.records
            if r.prompt == prompt.name and r.phase == "measured" and r.decode_tps
        ]
        rows.append(
            {
                "arm": arm,
                "prompt": prompt.name,
                "n": len(tps),
                "mean": round(statistics.mean(tps), 2),
                "cv5_pct": round(_cv(tps[:5]), 2),
                "cv_all_pct": round(_cv(tps), 2),
                "robust_cv_pct": round(_robust_cv(tps), 2),
                "other_cpu_pct": other,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=2, help="blocks per arm (interleaved)")
    parser.add_argument("--runs", type=int, default=10, help="measured runs per prompt")
    ns = parser.parse_args()
    rows = []
    for _ in range(ns.blocks):
        for arm in ARMS:
            for row in block(arm, ns.runs):
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(f"\n{'arm':8} {'prompt':10} {'mean':>8} {'CV(5)':>7} {'CV(all)':>8} {'robust':>7}")
    for r in rows:
        print(
            f"{r['arm']:8} {r['prompt']:10} {r['mean']:>8} {r['cv5_pct']:>6}% "
            f"{r['cv_all_pct']:>7}% {r['robust_cv_pct']:>6}%"
        )


if __name__ == "__main__":
    main()
