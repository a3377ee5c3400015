#!/usr/bin/env bash
# What runs on a lent GPU host (no network, Python 3.12 with torch, no vLLM): kit's missing
# wheels, the offline vLLM 0.26.0 bundle, the build and the reproduce runs. Run from the
# repository root; every stage is resumable from kit's caches in $KIT_HOME while the host lives.
#
#   scripts/gpu-run.sh kit-wheels [DIR]        # DIR/*.whl (.whl) -> $SITE (rfc8785, cryptography,
#                                      jsonschema, ...); a recipe that quantizes also needs
#                                      auto-round, datasets and multiprocess (one more DIR)
#   scripts/gpu-run.sh stage DIR               # copy DIR/{parts,whl,install.sh,*.sha256} -> $STAGE
#   scripts/gpu-run.sh install-vllm            # $STAGE -> $SITE (needs every part staged)
#   scripts/gpu-run.sh host-freeze             # the host's Python's packages -> $OUT/host/host-freeze.txt
#                                      (HOST_FREEZE for scripts/peer-wheels.sh: the exact wheels)
#   scripts/gpu-run.sh peer-wheels DIR         # DIR/*.whl (a part of scripts/peer-wheels.sh's OUTDIR)
#                                      -> $PEER_WHEELS; once every part is there, guidellm's and
#                                      AIPerf's venvs are made from them alone, over the host's
#                                      packages (python -m kit.peers install); from then on every
#                                      stage installs peers so (docs/peers.md, "Offline and air-gapped")
#   scripts/gpu-run.sh patch SERIES            # apply an engine patch series to $SITE (an external
#                                      engine is verified before launch, never patched by kit)
#   scripts/gpu-run.sh build RECIPE            # model + draft + quantization (cached)
#   scripts/gpu-run.sh reproduce RECIPE TAG [SECONDS [KIT OPTIONS...]]   # report.json,
#                                      extras.tar.gz -> $OUT/TAG (RECIPE may be a report.json;
#                                      KIT OPTIONS, or KIT_EXTRA unquoted: more kit options)
#   scripts/gpu-run.sh fidelity RECIPE TAG ROUNDS [SECONDS]  # kit serve, then kit bench
#                                      --fidelity ROUNDS against it (KIT_EXTRA: --set ...) -> $OUT/TAG
#   scripts/gpu-run.sh client-bench TAG     # experiments/{load-client,load-scaling}.py -> $OUT/TAG
#   scripts/gpu-run.sh autoround-24gb TAG   # experiments/autoround-24gb.py -> $OUT/TAG
#   scripts/gpu-run.sh checkpoint TAG DIR   # experiments/checkpoint-hosts.py: cpu-tiny from the
#                                      model bytes in DIR/home/models on this host's CPU and GPU,
#                                      against DIR/build.json and DIR/reference (its checkpoint)
#   scripts/gpu-run.sh detach JOB 'STAGE ARGS' ['STAGE ARGS' ...]   # the stages one after
#                                      another in their own session, outliving this call while
#                                      the host stays warm; output in $JOBS/JOB (log, out/)
#   scripts/gpu-run.sh gate TAG                # in a detached job: stop the job unless $OUT/TAG has a
#                                      complete report (so a failed check saves the device time
#                                      of the stages after it)
#   scripts/gpu-run.sh await JOB               # in a detached job: block until another job is done
#                                      (a build detached beside this one, on the host's CPUs,
#                                      finishes before this job's server takes the GPU)
#   scripts/gpu-run.sh wait JOB SECONDS     # follow JOB up to SECONDS, copying what it has
#                                      written to $OUT every 15 s (a tarball per stage tag)
#
# A device call ends at 10 minutes, but a host stays warm while calls follow each other: a
# detached job runs across calls, and each `wait` call brings back what is finished. The host
# goes back 30 s after a call: queue the detach call and its wait calls together, back to back,
# not one after reading the last (a long call's reply came too late to follow twice, and the
# job went with the host).
#
# A call carries at most 64 MiB with the checkout (17 MB tracked since the 2026-12-03 results):
# split the vLLM bundle's tarball in three parts of about 26 MB (install.sh joins parts/* in
# name order) and stage them over three calls: part-00 with .whl, part-01 alone, part-02 with
# whl/, install.sh, the .sha256 and .gpu/keys; then detach.
#
# Environment: KIT_HOME (/root/kit), SITE (/tmp/site), STAGE (/root/stage), OUT (./out),
# KIT_SIGNING_KEY_FILE (.gpu/keys/example.key), JOBS (/root/jobs), PEER_WHEELS (/root/peer-wheels).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export KIT_HOME=${KIT_HOME:-/root/kit}
SITE=${SITE:-/tmp/site}
JOBS=${JOBS:-/root/jobs}
STAGE=${STAGE:-/root/stage}
OUT=${OUT:-$ROOT/out}
KEY=${KIT_SIGNING_KEY_FILE:-$ROOT/.gpu/keys/example.key}
PEER_WHEELS=${PEER_WHEELS:-/root/peer-wheels}
# once peer wheels are staged, the peers (bench.peers) install from them alone, over the host's
# packages: pip's no-index and wheel folder, and kit's switch for venvs over the site-packages
peers_offline() { export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PEER_WHEELS KIT_PEERS_SYSTEM_SITE_PACKAGES=1; }
[ -d "$PEER_WHEELS" ] && peers_offline
export PYTHONPATH=$ROOT:$SITE
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0
# NVLink multicast stays off on shared multi-GPU hosts
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

kit() { python3 -c 'import sys; from kit.cli import main; sys.argv[0] = "kit"; main()' "$@"; }
pipi() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$@"; }

case "${1:?stage}" in
  kit-wheels)
    # auto-round travels only when a recipe quantizes
    pipi "${2:-$ROOT/.whl}"/*.whl && python3 -c 'import pydantic, rfc8785, cryptography, jsonschema; print("kit deps ok")'
    ;;
  stage)
    SRC=${2:?stage DIR}
    mkdir -p "$STAGE/parts" "$STAGE/whl"
    cp -f "$SRC"/parts/* "$STAGE/parts/" 2>/dev/null || true
    cp -f "$SRC"/whl/* "$STAGE/whl/" 2>/dev/null || true
    cp -f "$SRC"/install.sh "$SRC"/*.sha256 "$STAGE/" 2>/dev/null || true
    ls -la "$STAGE" "$STAGE/parts"
    ;;
  install-vllm)
    bash "$STAGE/install.sh" "$STAGE/parts" "$STAGE/whl" "$SITE" &&
      python3 -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__, torch.cuda.device_count(), "GPUs")'
    ;;
  host-freeze)
    # the system site-packages only: a peer's venv sees them, not $SITE (PYTHONPATH); in a
    # folder of $OUT, which `wait` brings back from a detached job too
    mkdir -p "$OUT/host"
    env -u PYTHONPATH python3 -m pip list --format=freeze --disable-pip-version-check \
      > "$OUT/host/host-freeze.txt" && echo "host-freeze: $(wc -l < "$OUT/host/host-freeze.txt") packages"
    ;;
  peer-wheels)
    SRC=${2:?peer-wheels DIR}
    mkdir -p "$PEER_WHEELS" && cp -f "$SRC"/*.whl "$SRC"/peer-wheels.txt "$PEER_WHEELS/" || exit 3
    peers_offline
    want=$(sed -n 's/^# wheels: \([0-9]*\).*/\1/p' "$PEER_WHEELS/peer-wheels.txt")
    have=$(find "$PEER_WHEELS" -name '*.whl' | wc -l)
    if [ "$have" -lt "$want" ]; then
      echo "peer-wheels: $have of $want wheels staged; stage the other parts"; exit 0
    fi
    "$0" host-freeze
    python3 -m kit.peers install --engine-python python3 --system-site-packages guidellm aiperf
    ;;
  patch)
    kit patches apply "${2:?patch SERIES}" --site-packages "$SITE" &&
      kit patches verify "$2" --site-packages "$SITE"
    ;;
  gate)
    TAG=${2:?gate TAG}
    # the signature was checked when kit wrote it; the gate only reads the status
    python3 -c 'import sys; from pathlib import Path; from kit.signing import load_payload, open_envelope_file
st = load_payload(open_envelope_file(Path(sys.argv[1])))["status"]; print("gate:", st); sys.exit(st != "complete")' \
      "$OUT/$TAG/report.json"
    ;;
  build)
    kit build "${2:?build RECIPE}"
    ;;
  reproduce)
    RECIPE=${2:?reproduce RECIPE TAG}; TAG=${3:?reproduce RECIPE TAG}; LIMIT=${4:-540}
    shift $(( $# < 4 ? $# : 4 ))  # the rest: more kit options, quoted as given (e.g. --set)
    mkdir -p "$OUT/$TAG" /root/reports
    # SIGTERM at the limit unwinds kit like Ctrl-C: the server is torn down and a partial
    # report marked incomplete is written
    timeout --kill-after=30 "$LIMIT" python3 -c 'import sys; from kit.cli import main; sys.argv[0] = "kit"; main()' \
      reproduce "$RECIPE" --engine-python python3 --key "$KEY" -o /root/reports ${KIT_EXTRA:-} "$@" \
      2> >(tee "$OUT/$TAG/kit.log" >&2)
    rc=$?
    run=$(ls -td /root/reports/*/ 2>/dev/null | head -1)
    if [ -n "$run" ]; then
      # the device returns at most 8 files a call: the report on its own, the rest in one tarball
      [ -f "$run/report.json" ] && cp "$run/report.json" "$OUT/$TAG/"
      (cd "$run" && tar -czf "$OUT/$TAG/extras.tar.gz" --exclude report.json .)
    fi
    echo "reproduce $TAG: exit $rc ($run)"
    ;;
  fidelity)
    RECIPE=${2:?fidelity RECIPE TAG ROUNDS}; TAG=${3:?}; ROUNDS=${4:?}; LIMIT=${5:-540}
    mkdir -p "$OUT/$TAG"; PORT=8000
    kit serve "$RECIPE" --port $PORT --engine-python python3 > "$OUT/$TAG/serve.log" 2>&1 &
    srv=$!; t0=$(date +%s)
    until python3 -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=5)' \
        "http://127.0.0.1:$PORT/v1/models" 2> /dev/null; do
      kill -0 $srv 2>/dev/null || { echo "kit serve exited"; tail -30 "$OUT/$TAG/serve.log"; exit 1; }
      [ $(( $(date +%s) - t0 )) -gt 400 ] && { echo "not healthy in 400 s"; kill -TERM $srv; exit 1; }
      sleep 2
    done
    echo "server healthy after $(( $(date +%s) - t0 )) s"
    timeout --kill-after=20 "$LIMIT" python3 -c 'import sys; from kit.cli import main; sys.argv[0] = "kit"; main()' \
      bench --target "http://127.0.0.1:$PORT" "$RECIPE" --fidelity "$ROUNDS" -o "$OUT/$TAG" ${KIT_EXTRA:-} \
      2> >(tee "$OUT/$TAG/fidelity.log" >&2)
    echo "fidelity $TAG: exit $?"
    # TERM: a background command of a script starts with SIGINT ignored
    kill -TERM $srv; wait $srv
    ;;
  client-bench)
    TAG=${2:?client-bench TAG}; mkdir -p "$OUT/$TAG"
    python3 "$ROOT/experiments/load-client.py" --rounds 5 --out "$OUT/$TAG/load-client.json" > /dev/null &&
      python3 "$ROOT/experiments/load-scaling.py" --out "$OUT/$TAG/load-scaling.json"
    echo "client-bench $TAG: exit $?"
    ;;
  autoround-24gb)
    TAG=${2:?autoround-24gb TAG}; mkdir -p "$OUT/$TAG"
    timeout --kill-after=20 "${3:-560}" python3 "$ROOT/experiments/autoround-24gb.py" \
      --out "$OUT/$TAG/autoround-24gb.json" 2> "$OUT/$TAG/autoround.log"
    echo "autoround-24gb $TAG: exit $?"; cat "$OUT/$TAG/autoround-24gb.json" 2>/dev/null
    ;;
  checkpoint)
    TAG=${2:?checkpoint TAG DIR}; SEED=${3:?checkpoint TAG DIR}; mkdir -p "$OUT/$TAG"
    timeout --kill-after=20 "${4:-500}" python3 "$ROOT/experiments/checkpoint-hosts.py" \
      "$OUT/$TAG/checkpoint-hosts.json" --seed-home "$SEED/home" --reference "$SEED/build.json" \
      --reference-dir "$SEED/reference" --variant cpu-1:cpu --variant cuda-1:cuda \
      --variant cuda-2:cuda 2> "$OUT/$TAG/checkpoint.log"
    echo "checkpoint $TAG: exit $?"; tail -5 "$OUT/$TAG/checkpoint.log"
    ;;
  detach)
    JOB=${2:?detach JOB STAGES...}; shift 2
    mkdir -p "$JOBS/$JOB/out"
    # setsid: the job is not this call's child, so it outlives the call (not the host)
    OUT="$JOBS/$JOB/out" setsid bash -c '
      for st in "$@"; do
        echo "=== $(date -u +%T) $st"; eval "\"$0\" $st"; rc=$?; echo "=== $(date -u +%T) $st: exit $rc"
        [ $rc -ne 0 ] && [ "${st%% *}" = gate ] && { echo "=== gate closed: the stages after it skipped"; break; }
      done; echo "=== job done"' "$0" "$@" > "$JOBS/$JOB/log" 2>&1 < /dev/null &
    echo "detached $JOB (pid $!)"
    ;;
  await)
    JOB=${2:?await JOB}
    [ -f "$JOBS/$JOB/log" ] || { echo "no job $JOB on this host" >&2; exit 3; }
    until grep -q '^=== job done' "$JOBS/$JOB/log"; do sleep 2; done
    # indented: a job's own log must not read "=== job done" before it is
    grep '^===' "$JOBS/$JOB/log" | sed 's/^/  /'
    # done is not ok: a stage of it that failed fails this one
    ! grep -q '^=== .*: exit [1-9]' "$JOBS/$JOB/log"
    ;;
  wait)
    JOB=${2:?wait JOB SECONDS}; LIMIT=${3:?wait JOB SECONDS}; t0=$(date +%s)
    # a host given back between calls comes back bare: say so at once, not after LIMIT
    [ -f "$JOBS/$JOB/log" ] || { echo "no job $JOB on this host (a fresh one?)" >&2; exit 3; }
    mkdir -p "$OUT"
    # copy every 15 s, not only at the end: a call cut short (its device time spent) still
    # brings back what lies under $OUT
    snap() {
      cp "$JOBS/$JOB/log" "$OUT/$JOB.log"
      for d in "$JOBS/$JOB"/out/*/; do
        [ -d "$d" ] && tar -C "$d" -czf "$OUT/.$(basename "$d").tar.gz" . && mv -f "$OUT/.$(basename "$d").tar.gz" "$OUT/$(basename "$d").tar.gz"
      done
    }
    n=0
    until grep -q '^=== job done' "$JOBS/$JOB/log" 2>/dev/null || [ $(( $(date +%s) - t0 )) -ge "$LIMIT" ]; do
      sleep 5; n=$((n + 1)); [ $((n % 3)) -eq 0 ] && snap
    done
    snap
    grep '^===' "$JOBS/$JOB/log"; tail -5 "$JOBS/$JOB/log"
    ;;
  *)
    echo "unknown stage $1" >&2; exit 2
    ;;
esac
