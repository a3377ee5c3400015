#!/usr/bin/env bash
# The wheels that guidellm and AIPerf (kit's pins: kit/peers/guidellm.py, kit/peers/aiperf.py)
# need on a GPU host beyond what its Python already has, to carry there: with them, the peers'
# venvs are made offline over the host's site-packages (PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR
# KIT_PEERS_SYSTEM_SITE_PACKAGES=1; `scripts/gpu-run.sh peer-wheels DIR`; docs/peers.md).
#
#   scripts/peer-wheels.sh OUTDIR [PYVER]   # PYVER: 3.12
#
# Writes OUTDIR/part-N/ (*.whl, each part at most PART_MB, 45 MB: what one device call carries
# beside the checkout) and OUTDIR/part-N/peer-wheels.txt (the wheels, and the host's packages
# they were chosen against), and prints the total size.
#
# What is missing is what pip (which fills such a venv on the host) would install there, for both
# tools at once (one version of each package, which either tool's venv then takes). It is asked
# here of a stand-in for the host's Python: a venv of PYVER whose site-packages hold an empty
# distribution (a name and a version, no files) for each package of the host's.
# - HOST_FREEZE=FILE: the host's packages, exactly: its `python3 -m pip list --format=freeze`
#   (`scripts/gpu-run.sh host-freeze` brings it back in $OUT/host/host-freeze.txt).
# - else the picture of the host below (../shared/notes/gpu-host.md: Python 3.12 with
#   torch 2.11.0+cu130, transformers, numpy, aiohttp, pydantic, ...), by name, each taken to be
#   at the version the tool would install (so it satisfies); torch at $TORCH (2.11.0+cu130:
#   guidellm's venv pins the engine's torch). If the host has an older one, its install fails
#   offline naming it: bring the freeze back and run this again with HOST_FREEZE.
# Needs network, uv (KIT_UV, on PATH, or kit's .venv/bin/uv; it fetches PYVER where it finds
# none: PYTHON=PATH names one, and another version resolves, then PYVER's wheels are downloaded)
# and a Linux x86_64 machine: the wheels are chosen for this machine's platform (manylinux x86_64).
set -euo pipefail
OUT=${1:?usage: scripts/peer-wheels.sh OUTDIR [PYVER]}
PYVER=${2:-3.12}
TORCH=${TORCH:-2.11.0+cu130}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ "$(uname -sm)" = "Linux x86_64" ] || { echo "peer-wheels.sh: needs Linux x86_64 (the host's platform)" >&2; exit 2; }
UV=${KIT_UV:-$(command -v uv || echo "$ROOT/.venv/bin/uv")}
pin() { sed -n 's/^VERSION = "\(.*\)"$/\1/p' "$ROOT/kit/peers/$1.py"; }
GUIDELLM=$(pin guidellm); AIPERF=$(pin aiperf)
PART_MB=${PART_MB:-45}

# the host's Python as the notes picture it: the names of its packages
PICTURE="
torch torchvision torchaudio triton sympy mpmath networkx jinja2 markupsafe filelock fsspec
typing-extensions setuptools pillow
transformers huggingface-hub hf-xet tokenizers safetensors regex pyyaml requests urllib3 idna
certifi charset-normalizer tqdm packaging
numpy numba llvmlite scipy pandas pyarrow xxhash python-dateutil pytz tzdata six
aiohttp aiohappyeyeballs aiosignal attrs frozenlist multidict propcache yarl
pydantic pydantic-core annotated-types typing-inspection
psutil protobuf sentencepiece prometheus-client
"

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$UV" venv --quiet --seed --python "${PYTHON:-$PYVER}" "$W/host"
HP=$W/host/bin/python
SITE=$("$HP" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
REQS=("guidellm==$GUIDELLM" "torch==${TORCH%%+*}" "aiperf==$AIPERF")

# stub NAME VERSION: an installed distribution with nothing in it, for pip to count as there
stub() {
  local d
  d="$SITE/$(echo "$1" | tr -- '-.' '__')-$2.dist-info"
  mkdir -p "$d"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$1" "$2" > "$d/METADATA"
  printf 'kit-peer-wheels\n' > "$d/INSTALLER"
  : > "$d/RECORD"
}
# resolve REPORT: what pip would install into the stand-in for both tools (a JSON report)
resolve() {
  "$HP" -m pip install --quiet --disable-pip-version-check --dry-run --only-binary :all: \
    --report "$1" "${REQS[@]}"
}
# names REPORT [WORDS]: what the report installs, name==version (only the packages WORDS name)
names() { "$HP" -c 'import json, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
only = {norm(w) for w in sys.argv[2].split()} if len(sys.argv) > 2 else None
for i in json.load(open(sys.argv[1]))["install"]:
    name = i["metadata"]["name"]
    if only is None or norm(name) in only:
        print(name + "==" + i["metadata"]["version"])' "$@"; }

if [ -n "${HOST_FREEZE:-}" ]; then
  # name==version lines; an editable or a direct URL has no version to stand in for
  grep -E '^[A-Za-z0-9._-]+==' "$HOST_FREEZE" > "$W/host.txt" || true
  # the engine's torch is the host's, wherever it lies (else pip would fetch CUDA's gigabytes)
  grep -qiE '^torch==' "$W/host.txt" || echo "torch==$TORCH" >> "$W/host.txt"
else
  # the picture's packages at the versions the tools would take; torch at the host's
  stub torch "$TORCH"
  resolve "$W/all.json"
  { echo "torch==$TORCH"; names "$W/all.json" "$PICTURE"; } > "$W/host.txt"
fi
while IFS='=' read -r n _ v; do stub "$n" "$v"; done < "$W/host.txt"

# what the tools still need there, downloaded, then packed into parts of at most PART_MB
resolve "$W/need.json"
names "$W/need.json" > "$W/need.txt"
mkdir -p "$W/wheels"
# a stand-in of another Python (PYTHON=..., where uv cannot fetch PYVER: no network to GitHub)
# resolved the set; its wheels are still PYVER's, for the host's manylinux x86_64
DL=()
HPVER=$("$HP" -c 'import sys; print(sys.version_info[0], sys.version_info[1], sep=".")')
if [ "$HPVER" != "$PYVER" ]; then
  DL=(--python-version "$PYVER" --implementation cp)
  for m in manylinux_2_39 manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 \
           manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do DL+=(--platform "${m}_x86_64"); done
  DL+=(--platform any)
fi
"$HP" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
  "${DL[@]}" -d "$W/wheels" -r "$W/need.txt"
{ echo "# wheels: $(wc -l < "$W/need.txt") (guidellm $GUIDELLM, AIPerf $AIPERF, Python $PYVER)"
  cat "$W/need.txt"
  echo "# taken to be on the host (${HOST_FREEZE:-the picture of scripts/peer-wheels.sh}):"
  sed 's/^/#   /' "$W/host.txt"; } > "$W/peer-wheels.txt"
rm -rf "$OUT"/part-*
used=()  # bytes in each part; each wheel, largest first, goes into the first part with room
while read -r size file; do
  i=0
  while [ "$i" -lt "${#used[@]}" ] && [ $((used[i] + size)) -gt $((PART_MB * 1000000)) ]; do
    i=$((i + 1))
  done
  used[i]=$(( ${used[i]:-0} + size ))
  mkdir -p "$OUT/part-$((i + 1))"; mv "$file" "$OUT/part-$((i + 1))/"
done < <(find "$W/wheels" -name '*.whl' -printf '%s %p\n' | sort -rn)
for d in "$OUT"/part-*; do cp "$W/peer-wheels.txt" "$d/"; done
echo "peer-wheels: $(wc -l < "$W/need.txt") wheels beyond the host's $(wc -l < "$W/host.txt") packages, in ${#used[@]} part(s) of at most $PART_MB MB:"
du -sh "$OUT"/part-*
du -ch "$OUT"/part-*/*.whl | tail -1
