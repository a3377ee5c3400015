"""A load report's points beside `vllm bench serve`'s saved results at the same points, offline:
for a run whose report was written before its vLLM side finished (the comparison kit makes
at the end of `kit reproduce`, :func:`kit.vllm_bench.points.compare_point`, made afterwards).

The report is verified first (signature by ``--key``, every figure recomputed from its records).
Per point: kit's and vLLM's output tok/s and TTFT / TPOT / ITL medians and p99s, the deltas,
the server's own figures for kit's window, kit's client CPU, and, with ``--server-log``, the
lines where the engine said it compiled a kernel while serving.

    python experiments/sweep-vs-vllm.py REPORT.json VLLM_DIR --key KEY.pub \
        [--server-log LOG] > out.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.report.files import read_report
from kit.signing.keys import load_public_key
from kit.vllm_bench.points import compare_point

JIT = "JIT compilation during inference"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("vllm_dir", type=Path, help="folder of vllm-bench-<point>.json")
    ap.add_argument("--key", type=Path, required=True, help="public key the report is signed by")
    ap.add_argument("--server-log", type=Path, default=None, help="server.log (or .gz)")
    args = ap.parse_args()
    report, check = read_report(args.report, load_public_key(args.key))
    assert report.bench is not None
    points = []
    for p in report.bench.load_points:
        entry: dict[str, object] = {
            "label": p.label,
            "requests": p.requests,
            "client_cpu_pct": p.client_cpu_pct,
            "server_mean_ttft_ms": p.server.mean_ttft_ms if p.server else None,
        }
        path = args.vllm_dir / f"vllm-bench-{p.label}.json"
        if path.exists():
            figures, agree = compare_point(p, json.loads(path.read_text()))
            entry["figures"] = [f.model_dump() for f in figures]
            entry["agree"] = agree
        else:
            entry["figures"], entry["agree"] = [], None
            entry["vllm"] = "no result (not run)"
        points.append(entry)
    jit: list[str] = []
    if args.server_log:
        opener = gzip.open if args.server_log.suffix == ".gz" else open
        with opener(args.server_log, "rt", errors="replace") as fh:
            jit = [line.strip() for line in fh if JIT in line]
    out = {
        "report": args.report.name,
        "status": report.status,
        "signed_by": check.keyid,
        "signature_valid": check.valid,
        "points": points,
        "engine_jit_while_serving": jit,
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
