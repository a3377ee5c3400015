#!/usr/bin/env bash
# Cold set-up, timed by stage: from a fresh clone of REF to the first measured request of the
# embedded CPU recipe, with empty pip/uv caches and an empty KIT_HOME, as a new user would.
#
#   experiments/cold-setup.sh [REF] [OUT.json]      (REF defaults to HEAD)
#
# Stages, each as seconds since the clone: venv (kit's .venv ready), engine (engine venv ready),
# model, quantize, healthy (server answers /health), first_measured (the first measured request
# is sent, read from the report's records). Don't run it while other work loads the machine.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:-HEAD}
out=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$here" "$work/kit"
git -C "$work/kit" checkout -q "$(git -C "$here" rev-parse "$ref")"
cd "$work/kit"
export KIT_HOME="$work/home" PIP_CACHE_DIR="$work/cache/pip" UV_CACHE_DIR="$work/cache/uv"
log="$work/run.log"
t0=$(date +%s.%N)
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done; }
make venv 2>&1 | stamp > "$log"
t_venv=$(date +%s.%N)
make reproduce RECIPE=recipes/cpu-tiny.yaml REPORTS="$work/reports" 2>&1 | stamp >> "$log" || true
t_end=$(date +%s.%N)
report=$(find "$work/reports" -name report.json | head -n 1)
python3 - "$log" "$report" "$t0" "$t_venv" "$t_end" "$ref" "$out" <<'PY'
import base64, datetime, json, re, sys
log, report, t0, t_venv, t_end, ref, out = sys.argv[1:]
t0, t_venv, t_end = float(t0), float(t_venv), float(t_end)
marks = {"engine": r"engine: (installed in|.* ready in)", "model": r"model: .*\(synthetic",
         "quantize": r"quantize: (done|cache hit)", "healthy": r"serve: healthy"}
seen = {}
for line in open(log, errors="replace"):
    ts, _, text = line.partition(" ")
    for name, pat in marks.items():
        if name not in seen and re.search(pat, text):
            seen[name] = round(float(ts) - t0, 1)
res = {"ref": ref, "venv": round(t_venv - t0, 1), **seen, "total": round(t_end - t0, 1)}
if report:
    env = json.load(open(report))
    body = json.loads(base64.b64decode(env["payload"])) if "payload" in env else env
    first = next((r for r in body["bench"]["records"] if r["phase"] == "measured"), None)
    if first:
        at = datetime.datetime.fromisoformat(first["started_at"].replace("Z", "+00:00"))
        res["first_measured"] = round(at.timestamp() - t0, 1)
    res["status"] = body.get("status")
print(json.dumps(res))
if out:
    open(out, "a").write(json.dumps(res) + "\n")
PY
