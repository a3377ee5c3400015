"""Where is a held stream held? The server's send times on the wire against the client's reads.

    .venv/bin/python experiments/held-trace.py [--rounds 3]
        [-o experiments/results/held-trace-HOST.json]
        [--set KEY=VALUE ...]                    (needs tcpdump; KIT_HOME as for make)

Serves the cpu-tiny recipe (built and cached as `make reproduce` does), captures the loopback
traffic of its port with tcpdump, and runs the recipe's protocol ``--rounds`` times with kit's
own bench client (warm-ups, then measured runs, each measured run between two /metrics reads).
Per measured request it sets three clocks side by side, each from the request's send:

- the API server's first token (vLLM's time_to_first_token, from /metrics around it alone);
- the first server-to-client TCP segment carrying a data chunk, and the last (tcpdump);
- the client's first and last text chunk (kit's record).

A stream the client saw held (kit.bench.held) whose first data segment left the server early
was held in the client's host (the data waited in its socket); one whose first data segment
left late was held by the server after its output processor (its streaming task, uvicorn).
Prints and writes the per-request table and the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kit import engine as engine_mod
from kit.bench import Bencher, model_info
from kit.bench.held import held_runs
from kit.build import build
from kit.recipe import load_recipe
from kit.serve import NativeRuntime
from kit.serve.slack import set_timer_slack

ROOT = Path(__file__).resolve().parents[1]


def segments(pcap: Path, port: int) -> list[tuple[float, str, bytes]]:
    """(time, 'c2s' or 's2c', payload) of every TCP segment with a payload on ``port``."""
    data = pcap.read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    scale = 1e-9 if magic == 0xA1B23C4D else 1e-6
    link = struct.unpack("<I", data[20:24])[0]
    skip = {1: 14, 113: 16, 276: 20}.get(link, 14)  # Ethernet (lo), Linux SLL, SLL2
    out = []
    at = 24
    while at + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack("<IIII", data[at : at + 16])
        frame = data[at + 16 : at + 16 + caplen]
        at += 16 + caplen
        ip = frame[skip:]
        if not ip or ip[0] >> 4 != 4:
            continue
        ihl = (ip[0] & 0xF) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        tcp = ip[ihl:total]
        if len(tcp) < 20 or ip[9] != 6:
            continue
        sport, dport = struct.unpack(">HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if not payload:
            continue
        way = "s2c" if sport == port else "c2s" if dport == port else ""
        if way:
            out.append((sec + frac * scale, way, payload))
    return out


def posts(segs: list[tuple[float, str, bytes]]) -> list[dict[str, Any]]:
    """Each chat POST with the server's data segments until the next request."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for t, way, payload in segs:
        if way == "c2s" and payload[:4] in (b"POST", b"GET "):
            current = {"sent": t, "data": []} if payload.startswith(b"POST") else None
            if current is not None:
                out.append(current)
        elif way == "s2c" and current is not None and b"data: {" in payload:
            current["data"].append(t)
    return out


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument(
        "--client-cpus",
        help="Pin the bench client (this process) to these CPUs, e.g. 1 or 0,1 (default: unpinned)",
    )
    parser.add_argument(
        "--server-nice",
        type=int,
        default=0,
        help="Lower the server's priority by this nice value (every process and thread of its "
        "session), so a woken client wins the CPU from its spinning threads",
    )
    parser.add_argument(
        "--timer-slack-ns",
        type=int,
        help="Set this process's timer slack (prctl PR_SET_TIMERSLACK) before the server starts: "
        "the server's processes inherit it, so patch 0007's sleeping readers wake closer to "
        "their 20 us (Linux's default slack adds 50 us to every sleep)",
    )
    parser.add_argument("-o", "--output", type=Path)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.timer_slack_ns is not None:
        set_timer_slack(args.timer_slack_ns)  # the server started below inherits it
    if shutil.which("tcpdump") is None:
        raise SystemExit("held-trace: needs tcpdump (apt-get install tcpdump)")
    loaded = load_recipe(ROOT / "recipes" / "cpu-tiny.yaml", ["bench.prefill=null", *args.sets])
    built = build(loaded)
    server_cfg = loaded.recipe.server
    eng = engine_mod.resolve(server_cfg.engine, server_cfg.patches)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "lo.pcap"
        with NativeRuntime(eng).start(
            loaded.recipe, built.served_dir, built.draft_dir, Path(tmp) / "server.log"
        ) as server:
            port = int(server.url.rsplit(":", 1)[1])
            dump = subprocess.Popen(
                ["tcpdump", "-i", "lo", "-s", "0", "-U", "--time-stamp-precision=nano",
                 "-w", str(pcap), f"tcp port {port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)
            if args.server_nice and server.process is not None:
                os.setpriority(os.PRIO_PGRP, os.getpgid(server.process.pid), args.server_nice)
            if args.client_cpus:
                os.sched_setaffinity(0, {int(c) for c in args.client_cpus.split(",")})
            name, max_len = model_info(server.url)
            records = []
            for _ in range(args.rounds):
                bench = Bencher(server.url, loaded.recipe.bench, name, max_model_len=max_len)
                result = bench.run()
                records.append(result.records)
            time.sleep(0.5)
            dump.terminate()
            dump.wait(timeout=10)
        wire = posts(segments(pcap, port))
    flat = [r for rs in records for r in rs]
    if len(wire) != len(flat):
        raise SystemExit(f"held-trace: {len(wire)} POSTs on the wire, {len(flat)} records")
    starts = range(0, len(flat), len(records[0]))
    for n, (recs, start) in enumerate(zip(records, starts, strict=True)):
        held = {p.name: held_runs(p.name, recs) for p in loaded.recipe.bench.prompts}
        for r, w in zip(recs, wire[start : start + len(recs)], strict=True):
            if r.phase != "measured" or not w["data"]:
                continue
            witness = r.server
            rows.append(
                {
                    "round": n,
                    "prompt": r.prompt,
                    "index": r.index,
                    "held": r.index in held[r.prompt],
                    "server_ttft_ms": witness.ttft_s * 1000 if witness and witness.ttft_s else None,
                    "wire_first_ms": (w["data"][0] - w["sent"]) * 1000,
                    "wire_last_ms": (w["data"][-1] - w["sent"]) * 1000,
                    "client_first_ms": (r.ttft_s or 0) * 1000,
                    "client_last_ms": (r.wall_s or 0) * 1000,
                    "decode_tps": r.decode_tps,
                }
            )
    held_rows = [x for x in rows if x["held"]]
    early = [x for x in held_rows if x["wire_first_ms"] < 0.5 * x["client_first_ms"]]
    summary = {
        "measured": len(rows),
        "held": len(held_rows),
        "held_sent_early_by_the_server": len(early),
        "held_sent_late_by_the_server": len(held_rows) - len(early),
        "sets": args.sets,
        "client_cpus": args.client_cpus,
        "server_nice": args.server_nice,
        # the engine's: the recipe's where it sets one (kit.serve.slack), else this process's
        "timer_slack_ns": server_cfg.timer_slack_ns
        if server_cfg.timer_slack_ns is not None
        else args.timer_slack_ns,
    }
    text = json.dumps({"summary": summary, "requests": rows}, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
