"""How fast kit's clients take a stream in, as a ratio to a minimal stdlib client measured in the
same run: is the bench client ever the bottleneck?

A fake OpenAI server in its own process (asyncio, chunked SSE, one pre-encoded event per token,
as fast as the socket takes them) streams ``--tokens`` tokens per request. Three clients read
``--requests`` requests each, one stream at a time, in interleaved rounds (A B C A B C ...):

- ``stdlib``: http.client, a line per event, json.loads per event: about the least a client
  can do and still read every event;
- ``kit-aio``: kit's load client (kit.bench.aio.stream_request), the record it keeps included;
- ``kit-sequential``: kit's sequential client (kit.bench.SequentialClient: the load client's
  coroutine, one stream at a time, on its own event loop), the one the protocol's runs use;
- ``httpx``: ``httpx.Client.stream`` and ``iter_lines``, a line per event, json.loads per event:
  what kit's sequential client was built on until 2026-12-04 (it measured 0.42x stdlib then).

For each arm and round: streamed tokens per second of wall time, and per second of the client
process's CPU time. The summary gives each arm's median over the rounds and its ratio to
``stdlib`` in the same round (median of the per-round ratios).

    python experiments/load-client.py --out results.json
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def serve(port_out: Any, tokens_default: int) -> None:
    """The fake server: chunked SSE, one event per token."""
    event = json.dumps(
        {"choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": None}]}
    )
    one = f"data: {event}\n\n".encode()
    one_chunk = f"{len(one):x}\r\n".encode() + one + b"\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = json.loads(await reader.readexactly(length)) if length else {}
                n = int(body.get("max_tokens", tokens_default))
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                for i in range(n):
                    writer.write(one_chunk)
                    if i % 64 == 63:
                        await writer.drain()
                usage = json.dumps(
                    {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}}
                )
                for data in (f"data: {usage}\n\n".encode(), b"data: [DONE]\n\n"):
                    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_out.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def body(tokens: int) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": tokens,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip


def stdlib_client(port: int, requests: int, tokens: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    got = 0
    payload = json.dumps(body(tokens))
    for _ in range(requests):
        conn.request("POST", "/v1/chat/completions", payload, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        while True:
            line = resp.readline()
            if not line:
                break
            if line.startswith(b"data: "):
                data = line[6:].strip()
                if data == b"[DONE]":
                    resp.read()
                    break
                chunk = json.loads(data)
                if chunk.get("choices"):
                    got += 1
    conn.close()
    return got


def aio_client(port: int, requests: int, tokens: int) -> int:
    from kit.bench import RequestTag, StreamLimits, aio

    limits = StreamLimits(usable_fraction=0.25, deadline_s=600, stall_s=60)

    async def run() -> int:
        conn = aio.Connection(f"http://127.0.0.1:{port}")
        got = 0
        t0 = time.perf_counter()
        for i in range(requests):
            rec = await aio.stream_request(
                conn, body(tokens), RequestTag("p", "load", i), limits, t0=t0
            )
            assert rec.error is None, rec.error
            got += len(rec.text_chunk_times_s)
        await conn.close()
        return got

    return asyncio.run(run())


def sequential_client(port: int, requests: int, tokens: int) -> int:
    from kit.bench import RequestTag, SequentialClient, StreamLimits

    limits = StreamLimits(usable_fraction=0.25, deadline_s=600, stall_s=60)
    got = 0
    client = SequentialClient(f"http://127.0.0.1:{port}")
    for i in range(requests):
        rec = client.stream(body(tokens), RequestTag("p", "measured", i), limits)
        assert rec.error is None, rec.error
        got += len(rec.text_chunk_times_s)
    client.close()
    return got


def httpx_client(port: int, requests: int, tokens: int) -> int:
    import httpx

    got = 0
    payload = body(tokens)
    with httpx.Client(timeout=60) as client:
        for _ in range(requests):
            with client.stream(
                "POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=payload
            ) as resp:
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    if json.loads(data).get("choices"):
                        got += 1
    return got


ARMS = {
    "stdlib": stdlib_client,
    "kit-aio": aio_client,
    "kit-sequential": sequential_client,
    "httpx": httpx_client,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    ports: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(ports, args.tokens), daemon=True)
    server.start()
    port = ports.get(timeout=30)
    for fn in ARMS.values():  # warm: imports, first connection
        fn(port, 1, 100)
    rows: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        for arm, fn in ARMS.items():
            cpu0, t0 = time.process_time(), time.perf_counter()
            got = fn(port, args.requests, args.tokens)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            assert got == args.requests * args.tokens, (arm, got)
            rows.append({"round": rnd, "arm": arm, "tokens": got, "wall_s": round(wall, 4),
                         "cpu_s": round(cpu, 4), "tok_per_s": round(got / wall),
                         "tok_per_cpu_s": round(got / cpu) if cpu else None})  # fmt: skip
    server.terminate()
    summary = {}
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        ratios = [
            r["tok_per_s"] / next(s["tok_per_s"] for s in rows
                                  if s["round"] == r["round"] and s["arm"] == "stdlib")
            for r in mine
        ]  # fmt: skip
        summary[arm] = {
            "median_tok_per_s": statistics.median(r["tok_per_s"] for r in mine),
            "median_tok_per_cpu_s": statistics.median(r["tok_per_cpu_s"] or 0 for r in mine),
            "median_ratio_to_stdlib": round(statistics.median(ratios), 3),
        }
    result = {"requests": args.requests, "tokens": args.tokens, "rounds": args.rounds,
              "summary": summary, "rows": rows}  # fmt: skip
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
