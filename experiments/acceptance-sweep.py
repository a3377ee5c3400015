"""The acceptance sweep on one GPU: each point's decode speed against the no-draft baseline,
the step time against the tokens accepted and verified, and the roofline's predicted speed-up
beside the measured one (issue 47; docs/results.md, docs/roofline.md).

    .venv/bin/python experiments/acceptance-sweep.py DIR --key KEY.pub [-o OUT.json] [--plot PNG]

DIR holds one folder per point, each with the signed report.json of one `kit reproduce` of the
seed-acceptance recipe (scripts/gpu-run.sh, .gpu job): ``nodraft`` (speculative.method=none)
and the DFlash2 points (``seed``, ``acc-<mean>``, ``k3``). Every report is verified with KEY
first. A point's decode figure is its headline (the median of the measured runs) per prompt; its
acceptance is vLLM's counters over the measured window. A step is one target pass verifying
1 + k tokens plus one draft pass: step time = acceptance length / decode TPS.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kit.report.files import read_report
from kit.roofline.model import Pass, predicted_speedup
from kit.signing import load_public_key


def point(path: Path, key: Path) -> dict[str, Any]:
    report, _ = read_report(path, load_public_key(key))
    assert report.bench is not None
    spec = report.recipe.get("speculative") or {}
    gpu = report.host.gpus[0].name if report.host and report.host.gpus else None
    assert report.roofline is not None
    roof = {p.prompt: p for p in report.roofline.prompts}
    target_layers = report.roofline.target.layers
    draft = report.roofline.draft
    draft_layers = draft.layers * report.roofline.draft_passes_per_step if draft else 0
    prompts = {}
    for p in report.bench.prompts:
        decode = p.headline.value if p.headline is not None else p.decode_tps.mean
        sd = p.spec_decode
        length = sd.acceptance_length if sd is not None and sd.drafts else 1.0
        r = roof.get(p.prompt)
        prompts[p.prompt] = {
            "decode_tps": decode,
            "accepted_per_draft": sd.accepted_per_draft if sd is not None else None,
            "acceptance_length": length,
            "drafts": sd.drafts if sd is not None else 0,
            "step_ms": (length or 1.0) / decode * 1000 if decode else None,
            "target_pass_bytes": r.target_pass_bytes_per_gpu,
            "draft_step_bytes": r.draft_step_bytes_per_gpu,
            "bandwidth_gbps": report.roofline.bandwidth.used_gbps,
            "context_tokens": r.context_tokens,
            "target_layers": target_layers,
            "draft_layers": draft_layers,
            "report_step_model": r.step_model.model_dump() if r.step_model else None,
        }
    return {
        "report": path.as_posix(),
        "run_id": report.run_id,
        "gpu": gpu,
        "method": spec.get("method", "none"),
        "k": spec.get("num_speculative_tokens", 0),
        "target_mean": ((spec.get("synthetic_acceptance") or {}).get("mean")),
        "validity": "valid" if report.validity.valid else "INVALID",
        "prompts": prompts,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--key", type=Path, required=True)
    ap.add_argument("-o", "--out", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    points = {
        d.name: point(d / "report.json", args.key)
        for d in sorted(args.dir.iterdir())
        if (d / "report.json").is_file()
    }
    base = points.get("nodraft")
    if base is None:
        print("no nodraft point: no baseline", file=sys.stderr)
        return 2
    rows = []
    for name, pt in points.items():
        if name == "nodraft":
            continue
        for prompt, f in pt["prompts"].items():
            plain = base["prompts"][prompt]
            measured = f["decode_tps"] / plain["decode_tps"]
            predicted = predicted_speedup(
                f["acceptance_length"],
                plain["step_ms"],
                Pass(plain["target_layers"], plain["target_pass_bytes"]),
                Pass(
                    f["target_layers"] + f["draft_layers"],
                    f["target_pass_bytes"] + f["draft_step_bytes"],
                ),
                plain["bandwidth_gbps"],
            )
            rows.append(
                {
                    "point": name,
                    "prompt": prompt,
                    "k": pt["k"],
                    "target_accepted_per_draft": pt["target_mean"],
                    "accepted_per_draft": f["accepted_per_draft"],
                    "acceptance_length": f["acceptance_length"],
                    "decode_tps": f["decode_tps"],
                    "plain_decode_tps": plain["decode_tps"],
                    "step_ms": f["step_ms"],
                    "plain_step_ms": plain["step_ms"],
                    "step_over_plain": f["step_ms"] / plain["step_ms"],
                    "speedup": measured,
                    "predicted": predicted.as_dict(),
                    "error_pct": (predicted.speedup / measured - 1) * 100,
                    "bytes_model_speedup": predicted.bytes_only,
                    "bytes_model_error_pct": (predicted.bytes_only / measured - 1) * 100,
                    "own_run_speedup": (f["report_step_model"] or {}).get("predicted_speedup"),
                }
            )
    doc = {"points": points, "rows": rows}
    text = json.dumps(doc, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    for r in rows:
        print(
            f"{r['point']:>8} {r['prompt']:>9} k={r['k']} accepted/draft "
            f"{r['accepted_per_draft']:.2f} decode {r['decode_tps']:7.1f} "
            f"step {r['step_ms']:.2f} ms "
            f"(x{r['step_over_plain']:.2f} plain) speed-up {r['speedup']:.2f} predicted "
            f"{r['predicted']['speedup']:.2f} ({r['error_pct']:+.1f} %), bytes model "
            f"{r['bytes_model_speedup']:.2f} ({r['bytes_model_error_pct']:+.1f} %)",
            file=sys.stderr,
        )
    if args.plot:
        plot(rows, args.plot)
    return 0


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib  # lazy: the html extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for prompt, marker in (("narrative", "o"), ("code", "s")):
        mine = sorted(
            (r for r in rows if r["prompt"] == prompt and r["k"] == 7),
            key=lambda r: r["accepted_per_draft"],
        )
        x = [r["accepted_per_draft"] for r in mine]
        ax.plot(x, [r["speedup"] for r in mine], marker=marker, label=f"{prompt}: measured")
        ax.plot(
            x,
            [r["predicted"]["speedup"] for r in mine],
            marker=marker,
            linestyle="--",
            label=f"{prompt}: roofline step model",
        )
        ax.plot(
            x,
            [r["bytes_model_speedup"] for r in mine],
            marker=marker,
            linestyle=":",
            alpha=0.6,
            label=f"{prompt}: bytes-only model",
        )
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("accepted draft tokens per step (of 7)")
    ax.set_ylabel("decode speed-up over no draft")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
