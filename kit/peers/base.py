"""What every peer is (:class:`Peer`), what one run of them is given (:class:`PeerJob`), and
the one way a peer's command runs (:func:`invoke`)."""

from __future__ import annotations

import json
import os
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from kit.paths import display_path
from kit.peers.install import Host, system_site_packages
from kit.peers.traffic import TrafficPoint
from kit.recipe import Bench, PeerName
from kit.recipe.figures import Definition, PointFigure

# what a peer's process needs, above its requests' own limit: starting, reading its data
STARTUP_S = 300.0


@dataclass(frozen=True)
class PeerJob:
    """The server kit measured at ``url`` serving ``model`` (its tokenizer read from
    ``tokenizer``), the recipe's ``bench``, the engine's interpreter (``python``, with
    ``pythonpath``), version and torch, and the run's folder (``out_dir``: each tool's files go in
    ``peers/<tool>/`` there)."""

    url: str
    model: str
    tokenizer: Path
    bench: Bench
    out_dir: Path
    python: str
    pythonpath: str | None = None
    engine_version: str | None = None
    torch: str | None = None  # the engine's torch version, for a tool that needs torch too

    def tool_dir(self, tool: str) -> Path:
        return self.out_dir / "peers" / tool

    @property
    def host(self) -> Host:
        """The engine's side, where a tool is installed (raises BadInputError for a
        KIT_PEERS_SYSTEM_SITE_PACKAGES that is neither yes nor no)."""
        return Host(
            python=self.python,
            pythonpath=self.pythonpath,
            engine_version=self.engine_version,
            torch=self.torch,
            site_packages=system_site_packages(self.bench.peers_system_site_packages),
        )


@dataclass(frozen=True)
class Env:
    """The interpreter a tool runs with, its version, where it came from (in words), and the
    packages its venv takes from the host's Python (``name==version``; none: its own)."""

    python: str
    version: str | None
    source: str
    environ: dict[str, str] = field(default_factory=dict)
    host_packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Invocation:
    """One point of one tool: its command, the files it reads and writes, its result file."""

    argv: list[str]
    result: Path
    log: Path
    inputs: tuple[Path, ...] = ()


class Peer(ABC):
    """One benchmark tool beside kit: how it is installed, how one of kit's points becomes its
    command, and how its points run (one process each, unless the tool says otherwise)."""

    tool: ClassVar[PeerName]
    name: ClassVar[str]
    # how the tool defines its figures against kit's: its importer's (kit.importers)
    definitions: ClassVar[Mapping[PointFigure, Definition]]

    def environment(self, job: PeerJob) -> Env:
        """Its interpreter for ``job``, installed if need be (raises InstallError or a
        KitError): :meth:`install` on the job's host."""
        return self.install(job.host)

    def install(self, host: Host) -> Env:
        """Its interpreter beside ``host``, installed if need be (raises InstallError or a
        KitError); by default the engine's own."""
        extra = {"PYTHONPATH": host.pythonpath} if host.pythonpath else {}
        return Env(host.python, host.engine_version, "the engine's Python", tool_environ(extra))

    @abstractmethod
    def prepare(self, point: TrafficPoint, job: PeerJob, where: Path) -> Invocation:
        """Write the point's inputs under ``where`` and return its command (after the
        interpreter)."""

    def notes(self, point: TrafficPoint) -> list[str]:
        """How the tool sends the point unlike kit, if it does."""
        if point.pacing.rate is not None and point.pacing.arrival == "poisson":
            return [f"{self.name} draws its Poisson arrivals with its own seed, not kit's"]
        return []

    def timeout_s(self, point: TrafficPoint, job: PeerJob) -> float:
        """The limit of one point's process: every request in turn at its limit, and more."""
        return STARTUP_S + job.bench.request_timeout_s * len(point.rows)

    def run(
        self, env: Env, plan: dict[str, tuple[TrafficPoint, Invocation]], job: PeerJob
    ) -> dict[str, str | None]:
        """Run each point's command, one after the other; label -> why it failed, or None."""
        return {
            label: invoke([env.python, *inv.argv], env.environ, self.timeout_s(point, job), inv.log)
            for label, (point, inv) in plan.items()
        }


def tool_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """kit's environment for a tool's process, without kit's own Python paths."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **(extra or {})}


def invoke(argv: list[str], environ: dict[str, str], timeout_s: float, log: Path) -> str | None:
    """Run ``argv`` with its output into ``log``; why it failed, or None."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("w") as fh:
            proc = subprocess.run(
                argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=environ or None,
                timeout=timeout_s,
                check=False,
            )
    except subprocess.TimeoutExpired:
        return f"no result in {timeout_s:.0f} s (killed)"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    if proc.returncode != 0:
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        return f"exit {proc.returncode}: " + " | ".join(tail[-2:])[-300:]
    return None


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    """A JSON-lines file of ``rows``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def shown(argv: list[str], out_dir: Path) -> list[str]:
    """A command as a report shows it: files of the run's folder by their path there, other
    files (the interpreter, the tokenizer) as every path in a report is written
    (kit.paths.display_path)."""
    out = []
    for arg in argv:
        path = Path(arg)
        if path.is_absolute() and path.is_relative_to(out_dir):
            out.append(str(path.relative_to(out_dir)))
        elif path.is_absolute() and path.exists():  # not a URL's path (/v1/chat/completions)
            out.append(display_path(path))
        else:
            out.append(arg)
    return out
