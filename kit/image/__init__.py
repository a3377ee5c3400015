"""Image stage: the engine image (``docker build`` of the top-level Dockerfile), its offline base.

- :mod:`kit.image.build`: :func:`plan` (build arguments from a recipe) and :func:`build`;
- :mod:`kit.image.base`: :func:`bootstrap_base`, the CPU and CUDA bases without a registry;
- :mod:`kit.image.docker`: the ``docker`` command, :func:`inspect`, :func:`engine_version`.
"""

from kit.image.base import BOOTSTRAP_PACKAGES, CUDA_BOOTSTRAP_PACKAGES, bootstrap_base
from kit.image.build import (
    CPU_ENGINE_PYTHON,
    GPU_ENGINE_PYTHON,
    ImagePlan,
    build,
    build_command,
    engine_source,
    fill_extra,
    host_ca_bundle,
    host_wheelhouse,
    image_tag,
    is_pinned,
    patch_sha256,
    plan,
    require,
)
from kit.image.docker import (
    ImageInfo,
    describe,
    docker,
    docker_env,
    engine_version,
    inspect,
    project_dir,
)
from kit.recipe.serving import CPU_BASE_IMAGE, CUDA_BASE_IMAGE, EngineFrom, base_image_for

__all__ = [
    "BOOTSTRAP_PACKAGES",
    "CPU_BASE_IMAGE",
    "CPU_ENGINE_PYTHON",
    "CUDA_BASE_IMAGE",
    "CUDA_BOOTSTRAP_PACKAGES",
    "GPU_ENGINE_PYTHON",
    "EngineFrom",
    "ImageInfo",
    "ImagePlan",
    "base_image_for",
    "bootstrap_base",
    "build",
    "build_command",
    "describe",
    "docker",
    "docker_env",
    "engine_source",
    "engine_version",
    "fill_extra",
    "host_ca_bundle",
    "host_wheelhouse",
    "image_tag",
    "inspect",
    "is_pinned",
    "patch_sha256",
    "plan",
    "project_dir",
    "require",
]
