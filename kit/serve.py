"""Serve stage: start the recipe's vLLM OpenAI server, wait until healthy, always tear down.

The native runtime runs the engine as a child process group of kit; the compose runtime (a
later stage) implements the same :class:`Runtime` seam with containers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from kit.engine import EngineEnv
from kit.errors import EnvironmentProblem, ServerError
from kit.recipe import Recipe

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 40


def speculative_config(recipe: Recipe, draft_dir: Path | None) -> dict[str, Any] | None:
    """The JSON for ``--speculative-config``, or None without speculative decoding."""
    spec = recipe.speculative
    if spec.method == "none":
        return None
    # vLLM selects DFlash and DFlash2 drafts through one method; the draft's architecture
    # (DFlashDraftModel / DFlash2DraftModel) picks the model class
    method = "dflash" if spec.method in {"dflash", "dflash2"} else spec.method
    cfg: dict[str, Any] = {"method": method, "num_speculative_tokens": spec.num_speculative_tokens}
    if draft_dir is not None:
        cfg["model"] = str(draft_dir)
    if spec.prompt_lookup_min is not None:
        cfg["prompt_lookup_min"] = spec.prompt_lookup_min
    if spec.prompt_lookup_max is not None:
        cfg["prompt_lookup_max"] = spec.prompt_lookup_max
    cfg.update(spec.extra)
    return cfg


def server_args(
    recipe: Recipe, model_dir: Path, draft_dir: Path | None, host: str, port: int
) -> list[str]:
    """vLLM OpenAI-server arguments for a recipe (without the interpreter)."""
    s = recipe.server
    args = [
        "--model",
        str(model_dir),
        "--served-model-name",
        s.served_model_name,
        "--host",
        host,
        "--port",
        str(port),
        "--max-model-len",
        str(s.max_model_len),
        "--dtype",
        s.dtype,
        "--kv-cache-dtype",
        s.kv_cache_dtype,
        "--tensor-parallel-size",
        str(s.tensor_parallel_size),
    ]
    if s.engine.device == "cuda":
        args += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
    if s.enforce_eager:
        args.append("--enforce-eager")
    if s.attention_backend:
        args += ["--attention-backend", s.attention_backend]
    spec = speculative_config(recipe, draft_dir)
    if spec is not None:
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return args + list(s.extra_args)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise EnvironmentProblem(
                f"port {port} on {host} is in use", hint="pick another with --port, or omit it"
            ) from None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


@dataclass
class RunningServer:
    """A server that answered /health."""

    url: str
    argv: list[str]
    log_path: Path
    boot_s: float
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def exit_reason(self) -> str:
        if self.process is None or self.process.poll() is None:
            return ""
        return f"server exited with code {self.process.returncode}"


class Runtime(Protocol):
    """Where the server runs: natively (a child process) or in containers."""

    def start(
        self,
        recipe: Recipe,
        model_dir: Path,
        draft_dir: Path | None,
        log_path: Path,
        port: int | None,
    ) -> contextlib.AbstractContextManager[RunningServer]: ...


def wait_healthy(
    url: str,
    timeout_s: float,
    proc: subprocess.Popen[bytes] | None,
    log_path: Path,
    progress: Any = None,
) -> float:
    """Poll ``/health`` until 200; fail fast if the process dies. Returns seconds waited."""
    t0 = time.monotonic()
    last_note = t0
    with httpx.Client(timeout=5.0) as client:
        while True:
            elapsed = time.monotonic() - t0
            if proc is not None and proc.poll() is not None:
                raise ServerError(
                    f"the server exited with code {proc.returncode} during start-up "
                    f"after {elapsed:.0f} s",
                    log_tail=log_tail(log_path),
                    hint=f"full log: {log_path}",
                )
            try:
                if client.get(url + "/health").status_code == 200:
                    return elapsed
            except httpx.HTTPError:
                pass
            if elapsed > timeout_s:
                raise ServerError(
                    f"the server did not become healthy within {timeout_s:.0f} s",
                    log_tail=log_tail(log_path),
                    hint=f"raise server.health_timeout_s; full log: {log_path}",
                )
            if progress is not None:
                progress(elapsed)
            elif time.monotonic() - last_note > 15:
                log.info("serve: waiting for /health (%.0f s)", elapsed)
                last_note = time.monotonic()
            time.sleep(0.5)


def _terminate(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@dataclass
class NativeRuntime:
    """Runs the engine as a child process group of kit."""

    engine: EngineEnv
    host: str = "127.0.0.1"
    progress: Any = None

    def argv(self, recipe: Recipe, model_dir: Path, draft_dir: Path | None, port: int) -> list[str]:
        return [
            self.engine.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            *server_args(recipe, model_dir, draft_dir, self.host, port),
        ]

    @contextlib.contextmanager
    def start(
        self,
        recipe: Recipe,
        model_dir: Path,
        draft_dir: Path | None,
        log_path: Path,
        port: int | None = None,
    ) -> Iterator[RunningServer]:
        if port is None:
            port = free_port(self.host)
        else:
            check_port(self.host, port)
        argv = self.argv(recipe, model_dir, draft_dir, port)
        env = dict(os.environ)
        env.update(recipe.server.env)
        if self.engine.pythonpath is not None:
            env["PYTHONPATH"] = self.engine.pythonpath
        else:
            env.pop("PYTHONPATH", None)
        env.setdefault("PYTHONUNBUFFERED", "1")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        url = f"http://{self.host}:{port}"
        log.info(
            "serve: starting %s %s on %s (log: %s)",
            self.engine.name,
            self.engine.version,
            url,
            log_path,
        )
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(
                argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        try:
            boot = wait_healthy(url, recipe.server.health_timeout_s, proc, log_path, self.progress)
            log.info("serve: healthy after %.1f s", boot)
            yield RunningServer(
                url=url,
                argv=argv,
                log_path=log_path,
                boot_s=round(boot, 3),
                process=proc,
                env=dict(recipe.server.env),
            )
        finally:
            _terminate(proc)
            log.info("serve: server stopped")


def served_model(url: str) -> str:
    """The first model name a running OpenAI server lists."""
    try:
        data = httpx.get(url.rstrip("/") + "/v1/models", timeout=10).json()
        return str(data["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise EnvironmentProblem(
            f"{url}: cannot list models: {exc}",
            hint="is an OpenAI-compatible server running there?",
        ) from None


def install_sigterm_handler() -> None:
    """Make SIGTERM unwind like Ctrl-C, so context managers tear servers down; and make SIGINT
    do so too where it was ignored when kit started (a script's ``kit serve &``: a shell without
    job control starts background commands with SIGINT ignored, and Python then keeps it so)."""

    def _handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if sys.platform != "win32":
        signal.signal(signal.SIGTERM, _handler)
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
