"""Container preflight (``--runtime compose``): a Docker engine this user may talk to, and for a
GPU recipe the NVIDIA runtime that compose.yaml's GPU reservation needs: ``docker info``
answers both (:func:`engine_info`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kit.errors import EnvironmentProblem
from kit.image.docker import docker
from kit.preflight.check import Check

HINT_PERMISSION = (
    "let this user use Docker (sudo usermod -aG docker $USER, then log in again), or run "
    "rootless Docker and set DOCKER_HOST; or use --runtime native"
)
HINT_ENGINE = "start the Docker daemon (or set DOCKER_HOST to its socket), or use --runtime native"
HINT_NVIDIA = (
    "install the NVIDIA Container Toolkit, then sudo nvidia-ctk runtime configure --runtime=docker "
    "and restart Docker (or generate a CDI spec: sudo nvidia-ctk cdi generate --output "
    "/etc/cdi/nvidia.yaml); or use --runtime native"
)
DEFAULT_CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


def engine_info() -> tuple[dict[str, Any] | None, str]:
    """``docker info`` as JSON, or why there is none."""
    try:
        proc = docker(["info", "--format", "{{json .}}"], timeout=30, check=False)
    except EnvironmentProblem as exc:  # no docker CLI
        return None, exc.message
    text = (proc.stdout or "").strip()
    info: dict[str, Any] | None = None
    if text:
        try:
            loaded = json.loads(text)
            info = loaded if isinstance(loaded, dict) else None
        except ValueError:
            info = None
    errors = (proc.stderr or "").strip()
    if info is not None and info.get("ServerErrors"):
        errors = "; ".join(str(e) for e in info["ServerErrors"])
    if proc.returncode != 0 or info is None or not info.get("ServerVersion"):
        return None, (errors.splitlines() or ["no answer"])[-1]
    return info, ""


def docker_check(info: dict[str, Any] | None, why: str) -> Check:
    """The engine as ``docker info`` answered: a socket this user may not open fails with
    "permission denied" (the user is not in the ``docker`` group)."""
    if info is not None:
        return Check(
            "docker",
            True,
            f"Docker engine {info.get('ServerVersion')} answers this user "
            f"({info.get('Driver', '?')} storage)",
        )
    if "permission denied" in why.lower():
        return Check(
            "docker",
            False,
            f"this user may not use the Docker engine: {why}",
            HINT_PERMISSION,
        )
    return Check("docker", False, f"no Docker engine answers: {why}", HINT_ENGINE)


def _cdi_has_nvidia(dirs: list[str]) -> str | None:
    for folder in dirs:
        path = Path(folder)
        if not path.is_dir():
            continue
        for spec in sorted([*path.glob("*.yaml"), *path.glob("*.json")]):
            try:
                if "nvidia.com/gpu" in spec.read_text(errors="replace"):
                    return str(spec)
            except OSError:
                continue
    return None


def nvidia_runtime_check(info: dict[str, Any]) -> Check:
    """Whether the engine can give a container the GPUs: the nvidia runtime, or a CDI spec.
    ``Runtimes`` lists ``nvidia`` where the NVIDIA Container Toolkit has configured the engine;
    Docker 25 and newer can also hand GPUs to a container through CDI: a spec for
    ``nvidia.com/gpu`` in one of the engine's ``CDISpecDirs`` (``nvidia-ctk cdi generate``)."""
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    if "nvidia" in runtimes:
        default = info.get("DefaultRuntime") or "runc"
        return Check(
            "nvidia runtime",
            True,
            f"the engine has the nvidia runtime (runtimes: {', '.join(runtimes)}; default "
            f"{default})",
        )
    spec = _cdi_has_nvidia(list(info.get("CDISpecDirs") or DEFAULT_CDI_DIRS))
    if spec is not None:
        return Check("nvidia runtime", True, f"a CDI spec for nvidia.com/gpu: {spec}")
    return Check(
        "nvidia runtime",
        False,
        f"the Docker engine cannot give containers GPUs: no nvidia runtime (runtimes: "
        f"{', '.join(runtimes) or 'none'}) and no CDI spec for nvidia.com/gpu",
        HINT_NVIDIA,
    )


def container_checks(gpu: bool) -> list[Check]:
    """The engine, and for a GPU recipe its NVIDIA runtime."""
    info, why = engine_info()
    out = [docker_check(info, why)]
    if gpu and info is not None:
        out.append(nvidia_runtime_check(info))
    return out
