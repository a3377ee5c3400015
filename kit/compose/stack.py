"""The stack for real: ``docker compose`` driven from kit, the runtime seam, the whole run.

:class:`ComposeRuntime` is the :class:`kit.serve.Runtime` seam with the ``server`` container;
:func:`reproduce` runs ``prepare`` -> ``server`` (healthy) -> ``bench`` and always ``down``.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit import image
from kit.compose.env import StackEnv, render, signing_key_file, write_env
from kit.compose.nodes import WORKER_SERVICE
from kit.compose.project import ComposeProject, compose_command
from kit.errors import BadInputError, EnvironmentProblem, ServerError
from kit.probe import probe_host
from kit.probe.redaction import secret_file
from kit.recipe import LoadedRecipe, Recipe
from kit.report.files import read_report, write_report
from kit.report.schema import Report, ServerInfo
from kit.runtimes import Compose, Place
from kit.serve import RunningServer, check_port, free_port
from kit.signing import load_private_key

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# the runtime seam


@dataclass
class ContainerServer(RunningServer):
    """A server container that answered /health."""

    project: ComposeProject | None = None

    def alive(self) -> bool:
        return not self.exit_reason()

    def exit_reason(self) -> str:
        if self.project is None:
            return ""
        state = self.project.state("server")
        if state.get("Running"):
            return ""
        return f"the server container exited with code {state.get('ExitCode', '?')}"


@dataclass
class ComposeRuntime:
    """Serves from the ``server`` container of a project whose ``prepare`` has run (the
    model directories given to :meth:`start` are the native runtime's; the container serves
    what ``prepare`` put into the kit-home volume)."""

    project: ComposeProject
    progress: Any = None

    @contextlib.contextmanager
    def start(
        self,
        recipe: Recipe,
        model_dir: Path | None,
        draft_dir: Path | None,
        log_path: Path,
        port: int | None = None,
    ) -> Iterator[ContainerServer]:
        host_port = int(self.project.values["KIT_HOST_PORT"])
        if port is not None and port != host_port:
            raise BadInputError(f"port {port}: the env file publishes the server on {host_port}")
        check_port("127.0.0.1", host_port)
        url = f"http://127.0.0.1:{host_port}"
        log.info("serve: starting the server container of %s on %s", self.project.name, url)
        services = ["server"]
        if recipe.server.nodes is not None:
            # the head and one headless container per further node (kit.compose.nodes)
            workers = recipe.server.nodes.count - 1
            services = ["--scale", f"{WORKER_SERVICE}={workers}", "server", WORKER_SERVICE]
            log.info("serve: with %d %s container(s)", workers, WORKER_SERVICE)
        t0 = time.monotonic()
        try:
            proc = self.project.run("up", "-d", "--no-deps", *services, check=False)
            if proc.returncode != 0:
                err = proc.stderr.strip()
                if "address already in use" in err or "port is already allocated" in err:
                    raise EnvironmentProblem(
                        f"port {host_port} on 127.0.0.1 is in use", hint="pick another with --port"
                    )
                raise EnvironmentProblem(f"docker compose up server failed: {err[-800:]}")
            boot = self._wait_healthy(recipe.server.health_timeout_s, log_path, t0)
            log.info("serve: healthy after %.1f s", boot)
            yield ContainerServer(
                url=url,
                argv=self.project.argv("up", "server"),
                log_path=log_path,
                boot_s=round(boot, 3),
                env=recipe.server.engine_env,
                project=self.project,
            )
        finally:
            self.project.save_logs("server", log_path)
            stop = ["server"]
            if recipe.server.nodes is not None:
                self.project.save_logs(WORKER_SERVICE, log_path.with_name(f"{WORKER_SERVICE}.log"))
                stop.append(WORKER_SERVICE)
            self.project.run("stop", "--timeout", "30", *stop, check=False)
            log.info("serve: server container stopped")

    def _wait_healthy(self, timeout_s: float, log_path: Path, t0: float) -> float:
        last_note = t0
        while True:
            elapsed = time.monotonic() - t0
            state = self.project.state("server")
            health = (state.get("Health") or {}).get("Status")
            if state and not state.get("Running") and state.get("Status") != "created":
                raise ServerError(
                    f"the server container exited with code {state.get('ExitCode')} during "
                    f"start-up after {elapsed:.0f} s",
                    log_tail=self.project.save_logs("server", log_path),
                    hint=f"full log: {log_path}",
                )
            if health == "healthy":
                return elapsed
            if health == "unhealthy" or elapsed > timeout_s + 30:
                raise ServerError(
                    f"the server container did not become healthy within {timeout_s:.0f} s",
                    log_tail=self.project.save_logs("server", log_path),
                    hint=f"raise server.health_timeout_s; full log: {log_path}",
                )
            if self.progress is not None:
                self.progress(elapsed)
            elif time.monotonic() - last_note > 15:
                log.info("serve: waiting for the server container (%.0f s)", elapsed)
                last_note = time.monotonic()
            time.sleep(1.0)


# ---------------------------------------------------------------------------------------------
# the whole stack


def require_gpus(recipe: Recipe) -> None:
    """A GPU recipe needs NVIDIA GPUs and the NVIDIA Container Toolkit on this host."""
    need = recipe.server.tensor_parallel_size
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        gpus = [line for line in out.stdout.splitlines() if line.startswith("GPU ")]
    except (OSError, subprocess.TimeoutExpired):
        gpus = []
    if len(gpus) < need:
        raise EnvironmentProblem(
            f"{recipe.name} needs {need} NVIDIA GPU(s); this host shows {len(gpus)}",
            hint="run it on a GPU host (docs/containers.md), or run recipes/cpu-tiny.yaml",
        )
    runtimes = image.docker(["info", "--format", "{{json .Runtimes}}"], check=False).stdout
    hook = shutil.which("nvidia-container-cli") or shutil.which("nvidia-container-runtime-hook")
    if "nvidia" not in runtimes and hook is None:
        raise EnvironmentProblem(
            "the Docker engine cannot give containers GPUs: no NVIDIA Container Toolkit",
            hint="install nvidia-container-toolkit and run `nvidia-ctk runtime configure "
            "--runtime=docker` (docs/containers.md)",
        )


def _image_for(
    loaded: LoadedRecipe, build: bool, build_options: dict[str, Any] | None
) -> image.ImageInfo:
    """The recipe's image: built (the host's CA bundle, and its wheels for a CPU build, unless
    ``build_options`` says otherwise), or the one already there."""
    if not build:
        return image.require(loaded)
    # the host's wheels go into CPU builds only: a GPU build takes its CUDA torch from PyPI
    cpu = loaded.recipe.server.engine.device == "cpu"
    options = {
        "ca_bundle": image.host_ca_bundle(),
        "wheelhouse": image.host_wheelhouse() if cpu else None,
    }
    return image.build(loaded, **{**options, **(build_options or {})})


@dataclass(frozen=True)
class StackOptions:
    """How the stack runs: the key the sidecar signs with (``key_path``, else kit's; none with
    ``sign`` false), the host port (None: a free one), and the image: built (with
    :func:`kit.image.build`'s ``build_options``) or the one there."""

    key_path: str | None = None
    sign: bool = True
    port: int | None = None
    build: bool = True
    build_options: dict[str, Any] | None = None


def reproduce(
    loaded: LoadedRecipe, out_root: Path, options: StackOptions = StackOptions()
) -> tuple[Report, Path]:
    """prepare -> server (healthy) -> bench in containers; always ``down``. Returns the report
    the bench sidecar wrote and its path. A failure keeps a report marked incomplete (the
    sidecar's partial one, else one written here) before the error propagates."""
    # lazy: every container loads kit.compose; the bench side loads only where used
    from kit.report.assemble import new_run_id  # noqa: PLC0415

    Compose().preflight(loaded, Place(options.port, out_root))
    image.engine_version()
    command = compose_command()
    if loaded.recipe.server.engine.device == "cuda":
        require_gpus(loaded.recipe)
    key_file = signing_key_file(options.key_path, options.sign)
    if options.sign and key_file is None:
        log.warning("report: no signing key: the report will be unsigned (kit keys generate)")
    host_port = options.port or free_port()
    check_port("127.0.0.1", host_port)
    info = _image_for(loaded, options.build, options.build_options)
    run_id = new_run_id()
    out_dir = out_root / f"{loaded.recipe.name}-{run_id}"
    values = render(
        loaded,
        StackEnv(
            image_ref=info.ref,
            image_id=info.id,
            reports_dir=out_root,
            signing_key=key_file,
            redaction_key=secret_file(),
            host_port=host_port,
            run_id=run_id,
        ),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    project = ComposeProject(
        write_env(loaded, values, out_dir / "compose.env"), values, command=command
    )
    project.down()
    boot: float | None = None
    serving = False
    report_path = out_dir / "report.json"
    try:
        code = project.run_service("prepare", out_dir / "prepare.log")
        if code != 0:
            raise EnvironmentProblem(
                f"the prepare container failed (exit {code}):\n" + _tail(out_dir / "prepare.log"),
                hint=f"full log: {out_dir / 'prepare.log'}",
            )
        serving = True
        runtime = ComposeRuntime(project)
        with runtime.start(loaded.recipe, None, None, out_dir / "server.log", host_port) as server:
            boot = server.boot_s
            code = project.run_service(
                "bench", out_dir / "bench.log", env={"KIT_SERVER_BOOT_S": str(boot)}
            )
            if dead := server.exit_reason():
                raise ServerError(
                    dead + " during the bench",
                    log_tail=project.save_logs("server", out_dir / "server.log"),
                    hint=f"full log: {out_dir / 'server.log'}",
                )
            if code not in (0, 3) or not report_path.exists():
                raise EnvironmentProblem(
                    f"the bench container failed (exit {code}):\n" + _tail(out_dir / "bench.log"),
                    hint=f"full log: {out_dir / 'bench.log'}",
                )
    except (Exception, KeyboardInterrupt) as exc:  # the rule of kit.run.run_and_report
        if serving and not report_path.exists():
            _failure_report(loaded, _Attempt(run_id, out_dir, key_file, info, boot), exc)
        if report_path.exists():
            log.error("partial report kept: %s", report_path)
        raise
    finally:
        project.down()
    # the sidecar signed with key_file: its public half checks the signature
    public = load_private_key(key_file).public_key() if key_file else None
    report, _ = read_report(report_path, public, allow_unsigned=key_file is None)
    return report, report_path


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").rstrip().splitlines()[-lines:])
    except OSError:
        return ""


@dataclass(frozen=True)
class _Attempt:
    """A compose run so far: its id and folder, the signing key, the image and the server's
    boot time (None before it was healthy)."""

    run_id: str
    out_dir: Path
    key_file: Path | None
    info: image.ImageInfo
    boot: float | None


def _failure_report(loaded: LoadedRecipe, attempt: _Attempt, exc: BaseException) -> None:
    """The report of a run that failed before the sidecar wrote one: marked incomplete."""
    run_id, out_dir, key_file = attempt.run_id, attempt.out_dir, attempt.key_file
    info, boot = attempt.info, attempt.boot
    # lazy: every container loads kit.compose; the bench side loads only where used
    from kit.report.assemble import (  # noqa: PLC0415
        ImageRef,
        Setup,
        failure_text,
        finish_report,
        host_for_report,
        new_report,
    )

    setup = Setup(
        host=host_for_report(probe_host(redact=True)),
        server=ServerInfo(
            runtime=Compose.name, argv=[], env={}, boot_s=boot, log_file="server.log"
        ),
        image=ImageRef(ref=info.ref, id=info.id),
    )
    report = finish_report(new_report(loaded, run_id), setup, None, failure=failure_text(exc))
    key = load_private_key(key_file) if key_file else None
    write_report(report, out_dir, key)
