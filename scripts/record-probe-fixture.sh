#!/usr/bin/env bash
# Record the probe's test fixtures on a machine with NVIDIA GPUs and PyTorch.
#
#   scripts/record-probe-fixture.sh OUTDIR [PREFIX]
#
# Writes, with host name, user, home, GPU UUIDs and serials replaced by placeholders:
#   PREFIX-nvml-dump.json   the raw dump (kit.probe.collect_nvml_dump, then anonymize_dump)
#   PREFIX-probe.json       the HostProbe built from it (redacted)
#   PREFIX-sampling.json    a GpuSampler session: idle, ~10 s of bf16 matmuls on every GPU, post
# and record.log. Python packages kit.probe needs and the machine lacks can sit as wheels in
# .whl/ (installed into a temporary folder, never into the system).
set -euo pipefail

out=${1:?usage: record-probe-fixture.sh OUTDIR [PREFIX]}
prefix=${2:-gpu}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"

site=$(mktemp -d)
if ! python3 -c 'import pydantic' 2>/dev/null && compgen -G "$repo/.whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
    "$repo"/.whl/pydantic*.whl "$repo"/.whl/annotated_types*.whl \
    "$repo"/.whl/typing_inspection*.whl "$repo"/.whl/typing_extensions*.whl
fi
if ! python3 -c 'import pynvml' 2>/dev/null && compgen -G "$repo/.whl/nvidia_ml_py*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
    "$repo"/.whl/nvidia_ml_py*.whl
fi
export PYTHONPATH="$repo:$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

python3 - "$out" "$prefix" <<'PY' 2>&1 | tee "$out/record.log"
import json
import logging
import sys
import time
import traceback
from pathlib import Path

from kit.probe import (
    GpuSampler,
    anonymize_dump,
    collect_nvml_dump,
    host_probe_from_dump,
    probe_findings,
    probe_to_json,
)

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
out, prefix = Path(sys.argv[1]), sys.argv[2]


def write(name: str, text: str, secrets: list[str]) -> None:
    leaked = [s for s in secrets if s and s in text]
    if leaked:
        raise SystemExit(f"refusing to write {name}: it still holds {len(leaked)} identifier(s)")
    (out / name).write_text(text + "\n", encoding="utf-8")
    print(f"wrote {name} ({len(text)} chars)")


raw = collect_nvml_dump()
secrets = [str(raw["host"].get("hostname") or "")]
for device in raw["nvml"].get("devices", []):
    for key in ("nvmlDeviceGetUUID", "nvmlDeviceGetSerial"):
        secrets.append(str(device.get("calls", {}).get(key, {}).get("value") or ""))
secrets = [s for s in secrets if len(s) >= 4]
dump = anonymize_dump(raw)
write(f"{prefix}-nvml-dump.json", json.dumps(dump, indent=1, sort_keys=True), secrets)
host = host_probe_from_dump(dump)
write(f"{prefix}-probe.json", probe_to_json(host), secrets)
print("nvml_error:", host.nvml_error, "gpus:", [g.name for g in host.gpus])

try:
    import torch

    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    print("torch", torch.__version__, "devices", len(devices))
    n = 8192
    weights = {d: torch.empty(10 * 2**30, dtype=torch.uint8, device=d) for d in devices}
    a = {d: torch.randn(n, n, dtype=torch.bfloat16, device=d) for d in devices}
    b = {d: torch.randn(n, n, dtype=torch.bfloat16, device=d) for d in devices}
    for d in devices:
        torch.cuda.synchronize(d)
    with GpuSampler(interval_s=0.25) as sampler:
        time.sleep(1.0)
        sampler.mark("idle")
        time.sleep(1.0)
        sampler.mark("measure_start")
        scratch = {d: torch.empty(6 * 2**30, dtype=torch.uint8, device=d) for d in devices}
        end = time.monotonic() + 10.0
        products = 0
        while time.monotonic() < end:
            for _ in range(8):
                for d in devices:
                    a[d] @ b[d]
            for d in devices:
                torch.cuda.synchronize(d)
            products += 8 * len(devices)
        sampler.mark("measure_end")
        del scratch
        torch.cuda.empty_cache()
        time.sleep(2.0)
        sampler.mark("post")
        time.sleep(0.5)
    sampling = sampler.sampling
    tflops = products * 2 * n**3 / 10.0 / 1e12
    print(f"{products} products of {n}^3 bf16 in 10 s: {tflops:.0f} TFLOP/s over all GPUs")
    write(f"{prefix}-sampling.json", sampling.model_dump_json(indent=1), secrets)
    for summary in sampling.summaries:
        print(summary.model_dump_json())
    print("energy_j:", sampling.energy_j)
    for finding in probe_findings(host, sampling):
        print("finding:", finding.model_dump_json())
    del weights
except Exception:
    traceback.print_exc()
    print("sampling under load failed; the dump above is still good")
PY

if command -v nvidia-smi >/dev/null; then
  nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1 || true
fi
rm -rf "$site"
