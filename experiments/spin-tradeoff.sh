#!/usr/bin/env bash
# Engine speed against held streams on this host: vLLM's shared-memory readers spinning on
# sched_yield() (vLLM's default) or sleeping between checks (patch 0007, VLLM_SHM_SPIN_SLEEP_S),
# in blocks interleaved A B C A B C (one server boot a block, experiments/held-trace.py in each).
#
#   experiments/spin-tradeoff.sh [OUT_DIR] [BLOCKS] [ROUNDS]      (default: /tmp/spin-tradeoff 2 2)
#
# Writes OUT_DIR/<block>-<arm>.json (held-trace's table) and prints, per arm, the held share and
# the decode tok/s of the runs not held (median and CV). Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/spin-tradeoff}
blocks=${2:-2}
rounds=${3:-2}
mkdir -p "$out"
arms=(yield sleep100us sleep20us)
declare -A sets=([yield]="" [sleep100us]="server.env.VLLM_SHM_SPIN_SLEEP_S=0.0001"
  [sleep20us]="server.env.VLLM_SHM_SPIN_SLEEP_S=0.00002")
for b in $(seq 1 "$blocks"); do
  for arm in "${arms[@]}"; do
    args=(--rounds "$rounds" -o "$out/$b-$arm.json")
    [[ -n "${sets[$arm]}" ]] && args+=(--set "${sets[$arm]}")
    .venv/bin/python experiments/held-trace.py "${args[@]}" > "$out/$b-$arm.log" 2>&1
    echo "block $b $arm done" >&2
  done
done
.venv/bin/python - "$out" "${arms[@]}" <<'PY'
import json, statistics, sys
from pathlib import Path
out, arms = Path(sys.argv[1]), sys.argv[2:]
summary = {}
for arm in arms:
    rows = [r for f in sorted(out.glob(f"*-{arm}.json")) for r in json.loads(f.read_text())["requests"]]
    clean = [r["decode_tps"] for r in rows if not r["held"]]
    by_prompt = {}
    for r in rows:
        if not r["held"]:
            by_prompt.setdefault(r["prompt"], []).append(r["decode_tps"])
    summary[arm] = {
        "measured": len(rows),
        "held": sum(r["held"] for r in rows),
        "clean_decode_tps_median": statistics.median(clean) if clean else None,
        "clean_decode_tps_cv_pct": {
            p: statistics.stdev(v) / statistics.fmean(v) * 100 for p, v in by_prompt.items() if len(v) > 1
        },
    }
print(json.dumps(summary, indent=2))
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
PY
