"""A running server, however it runs: waiting for /health, its log, ports, teardown."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from kit.errors import EnvironmentProblem, ServerError, Terminated
from kit.nodes import NodeProcess
from kit.recipe import Recipe

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 40


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
    # a multi-node server's nodes, the head (node 0) first; empty on one host
    nodes: list[NodeProcess] = field(default_factory=list)

    def alive(self) -> bool:
        return not self.exit_reason()

    def exit_reason(self) -> str:
        if self.process is not None and self.process.poll() is not None:
            return f"server exited with code {self.process.returncode}"
        return next((r for n in self.nodes[1:] if (r := n.exit_reason())), "")


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
    workers: Sequence[NodeProcess] = (),
) -> float:
    """Poll ``/health`` until 200; fail fast if the process, or a worker node started here,
    dies. Returns seconds waited."""
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
            for node in workers:
                if dead := node.exit_reason():
                    where = node.log_path or log_path
                    raise ServerError(
                        f"{dead} during start-up after {elapsed:.0f} s",
                        log_tail=log_tail(where),
                        hint=f"full log: {where}",
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


def terminate(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
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
        raise Terminated

    if sys.platform != "win32":
        signal.signal(signal.SIGTERM, _handler)
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
