"""How far a load point's medians move on their own: for each point of a verified load report,
kit's TTFT (first chunk, the one compared with vLLM's) and TPOT medians with a 95 % bootstrap
interval from the point's raw records, the medians of its first and second half (send order),
and where `vllm bench serve`'s figure at the same point (the report's vllm_bench section) falls.

A 2 % agreement between two clients, run one after the other, is only a test of the clients
when each client's own median is steadier than that. The bootstrap treats requests as
independent; at a fixed concurrency they are not (streams that start together stay in step),
so the halves are the plainer check.

    python experiments/sweep-noise.py REPORT.json --key KEY.pub > out.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.bench.load.summary import completed, tpot_s
from kit.report.files import read_report
from kit.report.schema import Report
from kit.signing.keys import load_public_key

RESAMPLES = 2000


def interval(values: list[float], rng: random.Random) -> tuple[float, float]:
    """A 95 % bootstrap interval of the median."""
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(RESAMPLES))
    return meds[int(0.025 * RESAMPLES)], meds[int(0.975 * RESAMPLES) - 1]


def figure(values: list[float], vllm: float | None, rng: random.Random) -> dict[str, object]:
    med = statistics.median(values)
    lo, hi = interval(values, rng)
    half = len(values) // 2
    first, second = statistics.median(values[:half]), statistics.median(values[half:])
    return {
        "kit_p50": round(med, 3),
        "ci95": [round(lo, 3), round(hi, 3)],
        "ci95_pct": [round(100 * (lo / med - 1), 2), round(100 * (hi / med - 1), 2)],
        "halves_p50": [round(first, 3), round(second, 3)],
        "halves_delta_pct": round(100 * (second / first - 1), 2),
        "vllm_p50": None if vllm is None else round(vllm, 3),
        "vllm_delta_pct": None if vllm is None else round(100 * (med / vllm - 1), 2),
        "vllm_in_ci95": None if vllm is None else lo <= vllm <= hi,
    }


def points(report: Report, seed: int) -> list[dict[str, object]]:
    """Each load point's TTFT and TPOT medians, their intervals and halves, beside vLLM's."""
    assert report.bench is not None
    rng = random.Random(seed)
    vllm: dict[str, dict[str, float]] = {}
    if report.vllm_bench is not None:
        for vp in report.vllm_bench.points:
            vllm[vp.label] = {f.figure: f.vllm for f in vp.figures if f.vllm is not None}
    in_send_order = sorted(report.bench.records, key=lambda r: r.sent_s or 0.0)
    out = []
    for p in report.bench.load_points:
        done = completed(in_send_order, p.label)
        ttft = [r.first_chunk_s * 1000 for r in done if r.first_chunk_s is not None]
        tpot = [t * 1000 for r in done if (t := tpot_s(r)) is not None]
        theirs = vllm.get(p.label, {})
        out.append(
            {
                "label": p.label,
                "requests": len(done),
                "ttft_ms": figure(ttft, theirs.get("TTFT p50"), rng),
                "tpot_ms": figure(tpot, theirs.get("TPOT p50"), rng),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--key", type=Path, required=True, help="public key the report is signed by")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    report, check = read_report(args.report, load_public_key(args.key))
    out = {
        "report": args.report.name,
        "status": report.status,
        "signed_by": check.keyid,
        "signature_valid": check.valid,
        "resamples": RESAMPLES,
        "seed": args.seed,
        "points": points(report, args.seed),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
