"""Does the host-speed witness follow decode speed? The witness and a measured request,
alternated N times against one vLLM CPU server, and the correlation between them.

    .venv/bin/python experiments/host-speed.py [-n 40] [--url URL [--cpus 0,1]] [-o FILE]
        (KIT_HOME as for make)

Without --url it serves recipes/cpu-tiny.yaml (built and cached as `make reproduce` does) and
pins the witness to the engine's worker cores as its log names them, as kit's bench does
(kit.probe.hostspeed); with --url, a server already running (`kit serve recipes/cpu-tiny.yaml`)
and the CPUs of --cpus (default: all of this process's). After the recipe's warm-ups, request i
sends prompt i mod P of the recipe, each preceded by one witness reading while the server is
idle. Per pair: the witness's two parts and their geometric mean, the request's decode tok/s
and the engine's own (generation tokens over vLLM's request_decode_time, /metrics around the
request alone). Prints, per prompt, Pearson's r between each witness figure and decode tok/s
(client and engine), and writes it all as JSON (default
experiments/results/host-speed-<date>.json). Run it on a machine nothing else is using.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kit import engine as engine_mod  # noqa: E402
from kit.bench import RequestTag, SequentialClient, StreamLimits, model_info, request_body  # noqa: E402
from kit.bench.server import scrape_metrics  # noqa: E402
from kit.build import build  # noqa: E402
from kit.enginelog import read_engine_choices  # noqa: E402
from kit.metrics import request_witness  # noqa: E402
from kit.probe.hostspeed import HostSpeedWitness, plan, score  # noqa: E402
from kit.recipe import Bench, load_recipe  # noqa: E402
from kit.serve import NativeRuntime  # noqa: E402


@contextmanager
def served(args: argparse.Namespace, loaded: Any) -> Iterator[tuple[str, frozenset[int], str]]:
    """The server's URL, the witness's CPUs and where they came from."""
    if args.url:
        cpus = {int(c) for c in args.cpus.split(",")} if args.cpus else os.sched_getaffinity(0)
        yield args.url.rstrip("/"), frozenset(cpus), "--cpus" if args.cpus else "all CPUs"
        return
    built = build(loaded)
    eng = engine_mod.resolve(loaded.recipe.server.engine, loaded.recipe.server.patches)
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        with NativeRuntime(eng).start(
            loaded.recipe, built.served_dir, built.draft_dir, log_path
        ) as server:
            choices = read_engine_choices(log_path)
            binding = choices.cpu_binding if choices else None
            where = plan("native", True, binding)
            assert where.cpus is not None, where.note
            yield server.url, where.cpus, binding or "no binding logged: all CPUs"


def pairs(url: str, bench: Bench, witness: HostSpeedWitness, n: int) -> list[dict[str, Any]]:
    """N witness readings, each followed by a measured request."""
    name, _ = model_info(url)
    bodies = [request_body(bench, name, p.text, p.max_tokens) for p in bench.prompts]
    limits = StreamLimits.of(bench)
    client = SequentialClient(url)
    metrics = httpx.Client(timeout=10)
    rows: list[dict[str, Any]] = []
    try:
        for i in range(bench.warmups * len(bodies)):
            client.stream(bodies[i % len(bodies)], RequestTag("warm", "warmup", i), limits)
        for i in range(n):
            k = i % len(bodies)
            speed = witness()
            before = scrape_metrics(metrics, url)
            rec = client.stream(bodies[k], RequestTag(bench.prompts[k].name, "measured", i), limits)
            w = request_witness(before, scrape_metrics(metrics, url))
            engine = (
                w.generation_tokens / w.decode_s
                if w and w.single and w.decode_s and w.generation_tokens
                else None
            )
            rows.append({
                "index": i, "prompt": bench.prompts[k].name, "error": rec.error,
                "decode_tps": rec.decode_tps, "engine_decode_tps": engine,
                "witness": speed.model_dump() if speed else None,
                "witness_score": score(speed) if speed else None,
            })  # fmt: skip
            print(
                f"{i:3d} {bench.prompts[k].name:10s} decode {rec.decode_tps or 0:8.1f} tok/s  "
                f"witness {score(speed) if speed else 0:10.1f}",
                file=sys.stderr,
            )
    finally:
        client.close()
        metrics.close()
    return rows


def pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    try:
        return round(statistics.correlation(xs, ys), 4)
    except statistics.StatisticsError:  # a constant series
        return None


def correlations(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per prompt: r of each witness figure against the client's and the engine's decode."""
    out: dict[str, dict[str, Any]] = {}
    for prompt in dict.fromkeys(r["prompt"] for r in rows):
        mine = [r for r in rows if r["prompt"] == prompt and r["witness"] and r["decode_tps"]]
        figures = {
            "python": [r["witness"]["python_ops_s"] for r in mine],
            "kernel": [r["witness"]["kernel_ops_s"] for r in mine],
            "score": [r["witness_score"] for r in mine],
        }
        decode = [r["decode_tps"] for r in mine]
        engine = [r for r in mine if r["engine_decode_tps"]]
        out[prompt] = {
            "pairs": len(mine),
            **{f"r_{k}_vs_decode": pearson(v, decode) for k, v in figures.items()},
            "r_score_vs_engine_decode": pearson(
                [r["witness_score"] for r in engine], [r["engine_decode_tps"] for r in engine]
            ),
            "decode_cv_pct": round(statistics.stdev(decode) / statistics.fmean(decode) * 100, 2)
            if len(decode) > 1
            else None,
            "score_cv_pct": round(
                statistics.stdev(figures["score"]) / statistics.fmean(figures["score"]) * 100, 2
            )
            if len(mine) > 1
            else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=40, help="witness + request pairs")
    parser.add_argument("--url", help="a running server (else cpu-tiny is served here)")
    parser.add_argument("--cpus", help="with --url: the witness's CPUs, e.g. 0 or 0,1")
    parser.add_argument("--recipe", type=Path, default=ROOT / "recipes" / "cpu-tiny.yaml")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    loaded = load_recipe(args.recipe, ["bench.prefill=null"])
    with served(args, loaded) as (url, cpus, source), HostSpeedWitness(cpus) as witness:
        rows = pairs(url, loaded.recipe.bench, witness, args.n)
    result = correlations(rows)
    print(json.dumps(result, indent=2))
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    out = args.output or ROOT / "experiments" / "results" / f"host-speed-{dt.date.today()}.json"
    doc = {
        "commit": commit, "recipe": loaded.recipe.name, "n": args.n, "cpus": sorted(cpus),
        "cpus_from": source, "correlation": result, "rows": rows,
    }  # fmt: skip
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(out, file=sys.stderr)


if __name__ == "__main__":
    main()
