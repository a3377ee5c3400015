#!/usr/bin/env bash
# Does AutoRound give the same checkpoint bytes twice? cpu-tiny built from nothing (a fresh
# KIT_HOME each time) under several settings, the model's and the checkpoint's digests compared.
#
#   experiments/checkpoint-determinism.sh [OUT.json]   (default experiments/results/checkpoint-determinism-<date>.json)
#
# Variants: the default twice; torch on one thread (OMP_NUM_THREADS=1); torch's kernels forced to
# AVX2 and to no vector ISA (ATEN_CPU_CAPABILITY=avx2 / default: what another host's CPU would
# pick). Each row: the variant, the model's identity, the checkpoint's identity, where AutoRound
# ran (quantization.built_on) and the files whose sha256 differs from the first build's.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-experiments/results/checkpoint-determinism-$(date -u +%F).json}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
run() {  # NAME ENV...
  local name=$1; shift
  local home="$WORK/$name"
  mkdir -p "$home"
  env "$@" KIT_HOME="$home" .venv/bin/kit build recipes/cpu-tiny.yaml >"$WORK/$name.json" 2>"$WORK/$name.log"
  echo "checkpoint-determinism: $name done" >&2
}
run default-1 X=1
run default-2 X=1
run threads-1 OMP_NUM_THREADS=1
run aten-avx2 ATEN_CPU_CAPABILITY=avx2
run aten-default ATEN_CPU_CAPABILITY=default
.venv/bin/python - "$WORK" "$OUT" <<'EOF'
import json, platform, sys
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
names = ["default-1", "default-2", "threads-1", "aten-avx2", "aten-default"]
builds = {n: json.loads((work / f"{n}.json").read_text()) for n in names}
first = {f["path"]: f["sha256"] for f in builds[names[0]]["quantization"]["files"]}
rows = []
for n in names:
    q = builds[n]["quantization"]
    files = {f["path"]: f["sha256"] for f in q["files"]}
    rows.append({
        "variant": n,
        "model_identity": builds[n]["model"]["identity"],
        "checkpoint_identity": q["identity"],
        "same_checkpoint_as_first": q["identity"] == builds[names[0]]["quantization"]["identity"],
        "files_differing_from_first": sorted(p for p in files.keys() | first.keys()
                                             if files.get(p) != first.get(p)),
        "built_on": q.get("built_on"),
        "versions": q.get("versions"),
    })
result = {"machine": platform.processor() or platform.machine(), "rows": rows}
out.write_text(json.dumps(result, indent=1) + "\n")
for r in rows:
    print(f"{r['variant']:14} model {r['model_identity'][:12]} checkpoint {r['checkpoint_identity'][:12]}"
          f" same={r['same_checkpoint_as_first']} differ={r['files_differing_from_first']}")
EOF
