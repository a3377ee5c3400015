#!/usr/bin/env bash
# Check patches/vllm-0.26.0 (DFlash2 backported to vLLM 0.26.0) on a machine without a GPU:
#
#   scripts/check-dflash2-series.sh [WORKDIR]        (default /tmp/kit-dflash2-check)
#
# 1. Downloads the vllm 0.26.0 wheel, and 0.28.0's to compare with (UPSTREAM=0 skips it),
#    into WORKDIR/wheels (kept for the next run), and unzips the files the series touches.
# 2. Applies the series three ways to a pristine copy each: kit's applier (kit.patches: apply,
#    verify, then apply again, which must change nothing), git apply --check + git apply, and
#    patch --dry-run -p1 --fuzz=0 + patch -p1 --fuzz=0. The three must give the same bytes;
#    git apply -R, last patch first, must give the pristine files back.
# 3. python -m py_compile on every touched or created file.
# 4. experiments/dflash2-cpu-check.py: the pure-torch pieces and the two Triton kernels (CPU
#    interpreter) against references, and against 0.28.0's. It needs a python with torch and
#    triton: PYTHON=..., else kit's .venv (torch) with triton==3.9.0 put into WORKDIR/pylib.
#
# Nothing here needs a GPU, and nothing is installed outside WORKDIR.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/kit-dflash2-check}
series=$repo/patches/vllm-0.26.0
kitpy=$repo/.venv/bin/python
mkdir -p "$work/wheels"

wheel() {  # version -> path of the downloaded wheel
  local found
  found=$(compgen -G "$work/wheels/vllm-$1-*.whl" | head -n1 || true)
  if [ -z "$found" ]; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 -d "$work/wheels" "vllm==$1" >&2
    found=$(compgen -G "$work/wheels/vllm-$1-*.whl" | head -n1)
  fi
  echo "$found"
}

extract() {  # wheel dest paths... : the dist-info and those of the paths the wheel has
  "$kitpy" - "$@" <<'EOF'
import sys, zipfile
wheel, dest, *paths = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = set(z.namelist())
    info = [n for n in names if n.split("/")[0].endswith(".dist-info")]
    z.extractall(dest, info + [p for p in paths if p in names])
EOF
}

mapfile -t touched < <(grep -h '^+++ b/' "$series"/*.patch | cut -c7- | sort -u)
patches=("$series"/*.patch)
trees=$work/trees
rm -rf "$trees"
w26=$(wheel 0.26.0)
for t in pristine kit git patch; do extract "$w26" "$trees/$t" "${touched[@]}"; done
echo "== ${#patches[@]} patches, ${#touched[@]} files, on $(basename "$w26")"

echo "== kit: apply, verify, apply again"
"$kitpy" - "$series" "$trees/kit" <<'EOF'
import hashlib, sys
from pathlib import Path
from kit import patches as kp

series, site = kp.load_series(sys.argv[1]), Path(sys.argv[2])
def snapshot():
    return {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(site.rglob("*.py"))}
assert {s.state for s in kp.check(series, site)} == {"applies"}, kp.check(series, site)
first = kp.apply(series, site)
assert kp.verify(series, site) == first
before = snapshot()
assert kp.apply(series, site) == first and snapshot() == before, "re-apply changed the engine"
print(f"applied and verified: {len(first.patches)} patches, {len(first.files)} files; "
      "applying again changed nothing")
EOF

echo "== git apply --check, then git apply; then git apply -R, last patch first"
(
  cd "$trees/git"
  export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
  git init -q .
  for p in "${patches[@]}"; do git apply --check "$p" && git apply "$p"; done
  cp -a "$trees/git" "$trees/reversed"
  cd "$trees/reversed"
  for ((i = ${#patches[@]} - 1; i >= 0; i--)); do git apply -R --check "${patches[i]}" && git apply -R "${patches[i]}"; done
)

echo "== patch --dry-run -p1 --fuzz=0, then patch -p1 --fuzz=0"
for p in "${patches[@]}"; do
  patch -d "$trees/patch" -s -p1 --fuzz=0 --dry-run <"$p"
  patch -d "$trees/patch" -s -p1 --fuzz=0 <"$p"
done

for f in "${touched[@]}"; do
  cmp "$trees/kit/$f" "$trees/git/$f"
  cmp "$trees/kit/$f" "$trees/patch/$f"
  if [ -f "$trees/pristine/$f" ]; then cmp "$trees/pristine/$f" "$trees/reversed/$f"
  elif [ -e "$trees/reversed/$f" ]; then echo "$f: not removed by git apply -R" >&2; exit 1; fi
done
echo "the three appliers wrote the same bytes; git apply -R restored the pristine files"

echo "== py_compile"
for f in "${touched[@]}"; do "$kitpy" -m py_compile "$trees/kit/$f"; done
echo "${#touched[@]} files compile"

echo "== CPU checks (experiments/dflash2-cpu-check.py)"
upstream=()
if [ "${UPSTREAM:-1}" != 0 ]; then
  extract "$(wheel 0.28.0)" "$trees/upstream" \
    vllm/model_executor/models/qwen3_dflash2.py vllm/model_executor/layers/logits_processor.py \
    vllm/v1/worker/gpu/sample/gumbel.py vllm/v1/worker/gpu/spec_decode/dflash2/speculator.py
  upstream=(--upstream "$trees/upstream")
fi
py=${PYTHON:-$kitpy}
if ! "$py" -c 'import torch, triton' 2>/dev/null; then
  [ -d "$work/pylib/triton" ] || "$kitpy" -m pip install -q --target "$work/pylib" triton==3.9.0
  export PYTHONPATH=$work/pylib${PYTHONPATH:+:$PYTHONPATH}
fi
cd "$repo/experiments"
TRITON_INTERPRET=1 "$py" dflash2-cpu-check.py "$trees/kit" "${upstream[@]}"
