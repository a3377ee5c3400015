"""The container tier's images, built ahead: the CPU base and cpu-tiny's engine image as
conftest.py's fixtures build them, and the GPU image from PyPI where test_cuda_image.py would
build it, with the same inputs, so that the tests then find every layer in the daemon's cache.

``make container-images`` runs this against ci-docker.sh's private daemon, its data kept in
KIT_DOCKER_DATA for ``make test-container``; .ci/run does it beside the unit tests, which leave
a core idle. Nothing here is tested: a build that fails here fails again in the tests, which
say why.

usage: python tests/container/images.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kit import image
from kit.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # as pytest imports the test modules

from container.test_cuda_image import _room_for_it  # noqa: E402


def main() -> None:
    t0 = time.monotonic()
    image.bootstrap_base()
    # the small recipe of conftest.py asks for the same image as cpu-tiny (engine, series)
    cpu = load_recipe(ROOT / "recipes" / "cpu-tiny.yaml")
    image.build(cpu, ca_bundle=image.host_ca_bundle(), wheelhouse=image.host_wheelhouse())
    print(f"images: CPU base and engine image in {time.monotonic() - t0:.0f} s", flush=True)
    why = _room_for_it()
    if why:
        print(f"images: no GPU image from PyPI: {why}", flush=True)
        return
    t0 = time.monotonic()
    image.bootstrap_base(image.CUDA_BASE_IMAGE, packages=image.CUDA_BOOTSTRAP_PACKAGES)
    gpu = load_recipe(ROOT / "recipes" / "club3090-qwen3.8-27b-2x3090-dflash2.yaml")
    image.build(gpu, engine_from="pypi", ca_bundle=image.host_ca_bundle())
    print(f"images: GPU base and image from PyPI in {time.monotonic() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
