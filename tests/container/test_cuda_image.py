"""The GPU engine image without a registry, built for real (make test-container, and alone:
make test-cuda-image).

The seed's engine, vllm 0.28.0, with its CUDA torch and nvidia-* runtime wheels from PyPI,
onto kit's debootstrapped CUDA base, with the seed's patch series baked in. No GPU is needed
to build it or to prove what is in it: ``kit patches verify`` and ``import vllm`` run inside.

It downloads about 5 GB and unpacks to 9 GB (about 5 min here). It is skipped, saying why, where
the daemon stores layers with vfs (a full copy per layer: ~90 GB), where the daemon's disk has
less than 40 GiB free, or with KIT_CUDA_IMAGE=0. Its figures go to build/cuda-image.json; the
images are removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from kit import image
from kit.recipe import load_recipe

pytestmark = [pytest.mark.container, pytest.mark.cuda_image]
NEED_FREE_GIB = 40


def _room_for_it() -> str | None:
    """Why the daemon cannot hold a 9 GB image, or None."""
    if os.environ.get("KIT_CUDA_IMAGE") == "0":
        return "KIT_CUDA_IMAGE=0"
    info = image.docker(["info", "--format", "{{.Driver}} {{.DockerRootDir}}"]).stdout.split()
    driver, root = info[0], Path(info[1])
    if driver == "vfs":
        return "the daemon stores layers with vfs: a full copy of the 9 GB tree per layer"
    free = shutil.disk_usage(root).free / 1024**3
    if free < NEED_FREE_GIB:
        return f"{free:.0f} GiB free under {root}, {NEED_FREE_GIB} GiB needed"
    return None


PROBE = """\
import importlib.metadata as m, json, torch, vllm
print(json.dumps({
    "vllm": vllm.__version__,
    "torch": torch.__version__,
    "torch_cuda": torch.version.cuda,
    "nvidia_wheels": sorted(d.metadata["Name"] for d in m.distributions()
                            if d.metadata["Name"].lower().startswith("nvidia-")),
}))
"""


def _in_image(tag: str, *argv: str) -> str:
    out = image.docker(["run", "--rm", "--network", "none", tag, *argv], check=False, timeout=900)
    assert out.returncode == 0, f"{' '.join(argv)} in {tag}: exit {out.returncode}\n{out.stderr}"
    return out.stdout


def test_gpu_image_from_pypi_carries_the_patched_engine(
    docker_engine: None, gpu_recipe: Path, repo_root: Path
) -> None:
    why = _room_for_it()
    if why:
        pytest.skip(f"the GPU image from PyPI is not built: {why}")
    try:
        _build_and_probe(gpu_recipe, repo_root)
    finally:  # 9 GB the rest of the container tests do not need
        for ref in (
            image.plan(load_recipe(gpu_recipe), engine_from="pypi").tag,
            image.CUDA_BASE_IMAGE,
        ):
            image.docker(["image", "rm", "-f", ref], check=False)


def _build_and_probe(gpu_recipe: Path, repo_root: Path) -> None:
    figures: dict[str, object] = {}
    t0 = time.monotonic()
    base = image.bootstrap_base(image.CUDA_BASE_IMAGE, packages=image.CUDA_BOOTSTRAP_PACKAGES)
    figures["base_s"] = round(time.monotonic() - t0, 1)
    figures["base_bytes"] = base.size

    loaded = load_recipe(gpu_recipe)
    plan = image.plan(loaded, engine_from="pypi")
    assert plan.base_image == image.CUDA_BASE_IMAGE
    assert plan.build_args["ENGINE_PYTHON"] == image.CPU_ENGINE_PYTHON
    t0 = time.monotonic()
    info = image.build(loaded, engine_from="pypi", ca_bundle=image.host_ca_bundle())
    figures["build_s"] = round(time.monotonic() - t0, 1)
    figures["image_bytes"] = info.size
    labels = info.labels
    assert labels["io.kit.engine.from"] == "pypi"
    assert labels["io.kit.engine.version"] == "0.28.0"
    assert labels["io.kit.patches.series"] == "vllm-0.28.0"

    verify = _in_image(
        plan.tag, "kit", "patches", "verify", "vllm-0.28.0", "--python", image.CPU_ENGINE_PYTHON
    )
    figures["patches_verify"] = verify.strip().splitlines()
    probe = json.loads(_in_image(plan.tag, image.CPU_ENGINE_PYTHON, "-c", PROBE))
    figures.update(probe)
    assert probe["vllm"] == "0.28.0"
    assert probe["torch"].split("+")[0] == "2.13.0"
    assert "+cpu" not in probe["torch"], "a CPU torch got into the GPU image"
    assert probe["torch_cuda"], "torch in the image has no CUDA"
    assert any(n.startswith("nvidia-cublas") for n in probe["nvidia_wheels"])

    out = repo_root / "build" / "cuda-image.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
