"""Does kit's load client scale over client processes (``bench.load.processes``)? Aggregate
streamed tok/s from P processes, as a ratio to P minimal stdlib clients in the same run.

A fake OpenAI server of ``--servers`` processes, each blocking in ``accept()`` on one shared
socket and serving one connection at a time (chunked SSE, one pre-encoded event per token, as
fast as the socket takes them), so every stream has a server process of its own and the
server is not what limits. For each P of ``--processes``, in interleaved rounds:

- ``kit``: :func:`kit.bench.load.run.run_point` at concurrency P with ``processes: P``
  (kit's spawned asyncio clients, one stream each, records sent back to the parent);
- ``stdlib``: P spawned processes, each one http.client stream reading a line per event and
  json.loads per event (``experiments/load-client.py``'s minimal client, loaded from there).

Both count streamed tokens over the span from the first send to the last byte, from the
clients' own perf_counter stamps (one clock on the host), so process start-up is not in it.
The summary per P: each arm's median tok/s over the rounds, kit's ratio to stdlib (median of
the per-round ratios), and each arm's scaling against its own P=1 (linear: P).

Needs about max(P) * 2 + 2 idle cores:  python experiments/load-scaling.py --out results.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BATCH = 64  # events per sendall


def _events(n: int) -> list[bytes]:
    event = json.dumps(
        {"choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": None}]}
    )
    one = f"data: {event}\n\n".encode()
    chunk = f"{len(one):x}\r\n".encode() + one + b"\r\n"
    full, rest = divmod(n, BATCH)
    usage = json.dumps({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}})
    tail = b"".join(
        f"{len(d):x}\r\n".encode() + d + b"\r\n"
        for d in (f"data: {usage}\n\n".encode(), b"data: [DONE]\n\n")
    )
    return [chunk * BATCH] * full + [chunk * rest + tail + b"0\r\n\r\n"]


def _server(sock: socket.socket) -> None:
    """One server process: one connection at a time, keep-alive, until the client closes."""
    cache: dict[int, list[bytes]] = {}
    head_ok = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    while True:
        conn, _ = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        raise ConnectionError
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        raise ConnectionError
                    buf += data
                body, buf = json.loads(buf[:length]), buf[length:]
                n = int(body.get("max_tokens", 100))
                if n not in cache:
                    cache[n] = _events(n)
                conn.sendall(head_ok)
                for part in cache[n]:
                    conn.sendall(part)
        except (ConnectionError, OSError):
            conn.close()


def _minimal_client() -> Any:
    """experiments/load-client.py's stdlib client (the same code, not a copy)."""
    spec = importlib.util.spec_from_file_location(
        "load_client", Path(__file__).with_name("load-client.py")
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.stdlib_client


def _stdlib(port: int, requests: int, tokens: int, go: Any, out: Any) -> None:
    client = _minimal_client()
    go.wait()
    t0 = time.perf_counter()
    got = client(port, requests, tokens)
    out.put((t0, time.perf_counter(), got))


def stdlib_arm(port: int, p: int, requests: int, tokens: int) -> tuple[float, int, float]:
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_stdlib, args=(port, requests, tokens, go, out)) for _ in range(p)]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # every process up and waiting
    go.set()
    rows = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    span = max(r[1] for r in rows) - min(r[0] for r in rows)
    got = sum(r[2] for r in rows)
    return got / span, got, float("nan")


def kit_arm(port: int, p: int, requests: int, tokens: int) -> tuple[float, int, float]:
    from kit.bench.load.datasets import Planned
    from kit.bench.load.run import LoadTarget, run_point
    from kit.recipe import load_recipe

    load = f"{{pattern: concurrency, levels: [{p}], requests: {p * requests}, processes: {p}}}"
    root = Path(__file__).resolve().parents[1]
    bench = load_recipe(str(root / "recipes" / "cpu-tiny.yaml"), [f"bench.load={load}"])
    planned = [Planned(text="x", max_tokens=tokens)]
    target = LoadTarget(f"http://127.0.0.1:{port}", bench.recipe.bench, "m", planned)
    records, cpu = run_point(target, p, "load", "s", time.perf_counter())
    assert all(r.error is None for r in records), [r.error for r in records if r.error][:3]
    got = sum(len(r.text_chunk_times_s) for r in records)
    start = min(r.sent_s or 0.0 for r in records)
    end = max((r.sent_s or 0.0) + (r.wall_s or 0.0) for r in records)
    return got / (end - start), got, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", default="1,2,4,8", help="comma-separated P values")
    ap.add_argument("--servers", type=int, default=0, help="server processes (0: max P + 2)")
    ap.add_argument("--requests", type=int, default=6, help="requests per stream")
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    ps = [int(v) for v in args.processes.split(",")]
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    fork = mp.get_context("fork")
    servers = [
        fork.Process(target=_server, args=(sock,), daemon=True)
        for _ in range(args.servers or max(ps) + 2)
    ]
    for s in servers:
        s.start()
    arms = {"stdlib": stdlib_arm, "kit": kit_arm}
    for fn in arms.values():  # warm: imports, page cache
        fn(port, 1, 1, 100)
    rows: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        for p in ps:
            for arm, fn in arms.items():
                tps, got, cpu = fn(port, p, args.requests, args.tokens)
                assert got == p * args.requests * args.tokens, (arm, p, got)
                rows.append({"round": rnd, "processes": p, "arm": arm, "tokens": got,
                             "tok_per_s": round(tps),
                             "busiest_client_cpu_pct": None if cpu != cpu else cpu})  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
    for s in servers:
        s.terminate()
    summary: dict[str, Any] = {}
    for p in ps:
        entry: dict[str, Any] = {}
        for arm in arms:
            mine = [r["tok_per_s"] for r in rows if r["arm"] == arm and r["processes"] == p]
            one = [r["tok_per_s"] for r in rows if r["arm"] == arm and r["processes"] == ps[0]]
            entry[f"{arm}_median_tok_per_s"] = statistics.median(mine)
            entry[f"{arm}_scaling_vs_p{ps[0]}"] = round(
                statistics.median(mine) / statistics.median(one), 2
            )
        ratios = [
            r["tok_per_s"] / s["tok_per_s"]
            for r in rows
            for s in rows
            if r["arm"] == "kit" and s["arm"] == "stdlib"
            and r["processes"] == s["processes"] == p and r["round"] == s["round"]
        ]  # fmt: skip
        entry["kit_ratio_to_stdlib"] = round(statistics.median(ratios), 3)
        summary[str(p)] = entry
    result = {"cpus": os.cpu_count(), "requests_per_stream": args.requests,
              "tokens": args.tokens, "rounds": args.rounds, "servers": len(servers),
              "summary": summary, "rows": rows}  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
