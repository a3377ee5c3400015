"""Talking to the Docker engine: the ``docker`` command, images, streamed build output."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kit.errors import BadInputError, EnvironmentProblem

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 30


class ImageInfo(BaseModel):
    """An image as ``docker image inspect`` describes it."""

    model_config = ConfigDict(extra="forbid")

    ref: str = Field(description="The reference asked for (tag or id).")
    id: str = Field(description="Image id: sha256 of its config.")
    repo_digests: list[str] = Field(description="Registry digests, when pulled or pushed.")
    labels: dict[str, str] = Field(description="Image labels.")
    created: str = Field(description="When it was built.")
    size: int = Field(description="Size in bytes.")


def project_dir() -> Path:
    """The directory holding Dockerfile and compose.yaml: ``$KIT_PROJECT_DIR``, else the
    current directory when it has them, else the checkout kit runs from."""
    if env := os.environ.get("KIT_PROJECT_DIR"):
        return Path(env).resolve()
    cwd = Path.cwd()
    if (cwd / "Dockerfile").is_file() and (cwd / "compose.yaml").is_file():
        return cwd
    here = Path(__file__).resolve().parent.parent
    if (here / "Dockerfile").is_file():
        return here
    raise BadInputError(
        "no Dockerfile and compose.yaml here",
        hint="run from kit's checkout, or set KIT_PROJECT_DIR",
    )


def docker_env() -> dict[str, str]:
    """Environment for docker commands: the classic builder (there may be no buildx)."""
    env = dict(os.environ)
    env.setdefault("DOCKER_BUILDKIT", "0")
    return env


def docker(
    args: list[str], *, timeout: float | None = 60, check: bool = True, input: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS`` and capture its output; a failure raises EnvironmentProblem."""
    try:
        proc = subprocess.run(
            ["docker", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=docker_env(),
            check=False,
        )
    except FileNotFoundError:
        raise EnvironmentProblem(
            "no Docker engine: the docker command is not installed",
            hint="install Docker (docs/containers.md), or use --runtime native",
        ) from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(
            f"docker {' '.join(args[:2])} did not answer within {timeout:.0f} s",
            hint="is the Docker daemon responsive? (docker info)",
        ) from None
    if check and proc.returncode != 0:
        raise EnvironmentProblem(
            f"docker {' '.join(args[:3])} failed: {proc.stderr.strip()[-600:]}",
            hint="check the Docker daemon (docker info)",
        )
    return proc


def engine_version() -> str:
    """The Docker engine's version; raises EnvironmentProblem (exit 3) when none answers."""
    try:
        proc = docker(["version", "--format", "{{.Server.Version}}"], timeout=30, check=False)
    except EnvironmentProblem as exc:
        raise EnvironmentProblem(exc.message, hint=exc.hint) from None
    version = proc.stdout.strip()
    if proc.returncode != 0 or not version:
        detail = (proc.stderr.strip().splitlines() or ["no answer"])[-1]
        raise EnvironmentProblem(
            f"no Docker engine: {detail}",
            hint="start the Docker daemon (or set DOCKER_HOST to its socket), "
            "or use --runtime native",
        )
    return version


def inspect(ref: str) -> ImageInfo | None:
    """The image ``ref`` names, or None when the engine has no such image."""
    proc = docker(["image", "inspect", ref], check=False)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)[0]
    return ImageInfo(
        ref=ref,
        id=data["Id"],
        repo_digests=list(data.get("RepoDigests") or []),
        labels=dict((data.get("Config") or {}).get("Labels") or {}),
        created=data.get("Created", ""),
        size=int(data.get("Size", 0)),
    )


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def stream(argv: list[str], log_path: Path, what: str, stdin: int | None = None) -> int:
    """Run a command with its output into ``log_path``, logging its steps; returns the code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            env=docker_env(),
            text=True,
            errors="replace",
        )
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                log_file.write(line)
                if line.startswith("Step ") or line.startswith("I: Retrieving"):
                    log.info("%s: %s", what, line.strip()[:120])
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait(timeout=30)
            raise
        return proc.wait()


def describe(info: ImageInfo) -> dict[str, object]:
    """An image as reports and ``kit image build`` print it."""
    return {
        "image": info.ref,
        "id": info.id,
        "repo_digests": info.repo_digests,
        "labels": {k: v for k, v in sorted(info.labels.items()) if k.startswith("io.kit.")},
        "size_mib": round(info.size / 2**20),
    }
