#!/usr/bin/env bash
# A newcomer's first runs: N fresh clones, each `make reproduce` with nothing cached but the
# package download cache, then K `kit reproduce` of the last clone's report on the same machine.
#
#   experiments/first-run.sh [-n N] [-k K] [-o OUT.json] [REF]      (default: -n 3 -k 3, REF HEAD)
#
# Each clone gets its own KIT_HOME (.kit in the clone) and kit config dir (a fresh signing key).
# Docker is not used (make's HAS_DOCKER is set empty), so the runs are native, as on a machine
# without it. Writes OUT.json (default experiments/results/first-run-<date>.json): per run its exit
# code, seconds, validity (valid, every reason with its code and message), and per prompt the
# headline (value, interval, runs used and left out), the Club-3090 mean and CV, each run's decode
# tok/s, the engine's speculative-decoding counters (acceptance) and the host-speed witness's
# medians, and per prefill depth its headline and each run's tok/s; per re-run
# its exit code and verdict with every figure's band and the causes. Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
n=3
k=3
out=""
while getopts "n:k:o:" opt; do
  case $opt in
    n) n=$OPTARG ;;
    k) k=$OPTARG ;;
    o) out=$OPTARG ;;
    *) echo "usage: $0 [-n N] [-k K] [-o OUT.json] [REF]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
ref=${1:-HEAD}
out=${out:-experiments/results/first-run-$(date -u +%F).json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lines="$work/lines.jsonl"
: > "$lines"

summarise() {  # summarise KIND INDEX RC SECONDS REPORT [LOG]
  .venv/bin/python - "$@" >> "$lines" <<'PY'
import base64, json, sys
from pathlib import Path
kind, index, rc, seconds, report = sys.argv[1:6]
row = {"kind": kind, "index": int(index), "exit_code": int(rc), "seconds": float(seconds)}
if len(sys.argv) > 6 and Path(sys.argv[6]).is_file():  # the terminal's lines: WARNING is noise
    said = Path(sys.argv[6]).read_text(errors="replace").splitlines()
    row["warning_lines"] = [line for line in said if "WARNING" in line]
path = Path(report)
if path.is_file():
    payload = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
    v = payload["validity"]
    row["status"] = payload["status"]
    row["valid"] = v["valid"]
    row["reasons"] = [{"code": r["code"], "severity": r["severity"], "message": r["message"]}
                      for r in v["reasons"]]
    row["engine_choices"] = (payload.get("server") or {}).get("engine_choices")
    bench = payload.get("bench") or {}
    row["prompts"] = {
        p["prompt"]: {"headline": p.get("headline"), "mean": p["decode_tps"]["mean"],
                      "cv_pct": p["decode_tps"]["cv_pct"],
                      # the host-speed witness's medians over the measured runs (kit.probe.hostspeed)
                      "host_speed": p.get("host_speed"),
                      "spec_decode": {k: (p.get("spec_decode") or {}).get(k) for k in
                                      ("drafts", "draft_tokens", "accepted_tokens",
                                       "acceptance_length", "per_position_rate")},
                      "runs_tps": [r["decode_tps"] for r in bench.get("records", [])
                                   if r["prompt"] == p["prompt"] and r["phase"] == "measured"
                                   and r.get("decode_tps")]}
        for p in bench.get("prompts", [])
    }
    row["prefill"] = {
        str(p["depth"]): {
            "headline": p.get("headline"),
            "runs_tps": [r["prompt_tokens"] / r["ttft_s"] for r in bench.get("records", [])
                         if r["prompt"] == f"prefill-{p['depth']}" and r["phase"] == "prefill"
                         and r.get("ttft_s") and r.get("prompt_tokens")],
        }
        for p in bench.get("prefill", []) if p["status"] == "measured"
    }
    rep = payload.get("reproduction")
    if rep is not None:
        row["verdict"] = {"verdict": rep["verdict"], "summary": rep["summary"],
                          "figures": rep["figures"], "inconclusive": rep.get("inconclusive", []),
                          "causes": rep.get("causes", [])}
else:
    row["report"] = None
print(json.dumps(row))
PY
}

last_clone=""
for i in $(seq 1 "$n"); do
  clone="$work/clone-$i"
  git clone -q "$repo" "$clone"
  git -C "$clone" checkout -q "$ref"
  start=$(date +%s)
  set +e
  (cd "$clone" && env KIT_CONFIG_DIR="$clone/.config-kit" make reproduce HAS_DOCKER= \
     > "$work/run-$i.log" 2>&1)
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  report=$(ls "$clone"/reports/*/report.json 2>/dev/null | head -1 || true)
  summarise run "$i" "$rc" "$secs" "${report:-none}" "$work/run-$i.log"
  echo "first-run: run $i exit $rc in ${secs} s" >&2
  last_clone=$clone
done

original=$(ls "$last_clone"/reports/*/report.json | head -1)
for j in $(seq 1 "$k"); do
  start=$(date +%s)
  set +e
  rerun_out="$work/rerun-$j"
  (cd "$last_clone" && env KIT_CONFIG_DIR="$last_clone/.config-kit" \
     .venv/bin/kit reproduce "$original" --report-key "$last_clone/.config-kit/kit.pub" \
     -o "$rerun_out" > "$work/rerun-$j.log" 2>&1)
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  report=$(ls "$rerun_out"/*/report.json 2>/dev/null | head -1 || true)
  summarise rerun "$j" "$rc" "$secs" "${report:-none}" "$work/rerun-$j.log"
  echo "first-run: re-run $j exit $rc in ${secs} s" >&2
done

.venv/bin/python - "$lines" "$out" "$ref" "$(git rev-parse "$ref")" <<'PY'
import json, platform, sys
from pathlib import Path
from kit.probe import parse_cpuinfo
lines, out, ref, sha = sys.argv[1:5]
rows = [json.loads(line) for line in Path(lines).read_text().splitlines()]
cpu = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
doc = {
    "ref": ref,
    "commit": sha,
    "machine": {"cpu": cpu.get("model"), "cores": cpu.get("cores"),
                "isa": [f for f in cpu.get("isa") or [] if f.startswith(("avx", "amx"))],
                "arch": platform.machine()},
    "runs": [r for r in rows if r["kind"] == "run"],
    "reruns": [r for r in rows if r["kind"] == "rerun"],
}
Path(out).write_text(json.dumps(doc, indent=2) + "\n")
print(out)
PY
