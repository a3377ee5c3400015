"""One path from a server to a written report, whatever the runtime: :func:`run_and_report`.

The native pipeline (:mod:`kit.pipeline`), ``kit bench --target`` and the compose bench sidecar
(:mod:`kit.compose.roles`) each describe their side of a run as a :class:`Target`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kit.engine import EngineEnv
from kit.measure import Witnesses, after_bench, engine_clock, measure, witness_plan
from kit.recipe import LoadedRecipe
from kit.report.assemble import (
    Extras,
    Measurement,
    Setup,
    failure_text,
    finish_report,
    new_report,
)
from kit.report.files import write_report
from kit.report.schema import Report, ServerInfo
from kit.rerun import Rerun
from kit.roofline import Bandwidth
from kit.runtimes import Runtime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    """A server being benched: where it answers, what the report says of it (read again after
    the bench: what the engine logged while it served), and whether it still serves (``""``
    while it does, else why not; None: not watched)."""

    url: str
    info: Callable[[], ServerInfo]
    alive: Callable[[], str] | None = None
    log: Path | None = None  # the server's log, where kit started it (kit.measure.LogSpans)


class Target(Protocol):
    """A runtime's side of one run: a server kit starts here, one it was given (``kit bench
    --target``), or the compose stack's (the bench sidecar)."""

    @property
    def runtime(self) -> Runtime:
        """The runtime (kit.runtimes): what the report calls it, how the host is probed."""

    @property
    def setup(self) -> Setup:
        """What is known before the engine: the host as probed, the model as built, the image."""

    @property
    def notes(self) -> tuple[str, ...]:
        """What the report says of this run's server."""

    def engine(self) -> EngineEnv | None:
        """The engine that serves (None: not kit's to know)."""

    def bandwidth(self) -> tuple[Bandwidth | None, list[str]]:
        """The bandwidth for the roofline, and the report's notes when there is none."""

    def serve(self) -> AbstractContextManager[Served]:
        """The server, for the bench and the post-bench step; torn down after them if kit's."""


@dataclass(frozen=True)
class RunJob:
    """What a run is asked for: the recipe, its run id, where its report goes and the key that
    signs it, and the report it re-runs (``kit reproduce REPORT.json``), if any."""

    loaded: LoadedRecipe
    run_id: str
    out_dir: Path
    private_key: Ed25519PrivateKey | None = None
    rerun: Rerun | None = None


def _noted(report: Report, notes: tuple[str, ...] | list[str]) -> Report:
    return report.model_copy(update={"notes": [*report.notes, *notes]}) if notes else report


def with_spans(info: ServerInfo, measured: Measurement | None) -> ServerInfo:
    """The server's facts with the log's byte ranges written inside measured windows."""
    choices = info.engine_choices
    if measured is None or not measured.log_spans or choices is None:
        return info
    spans = {"measured_log_spans": measured.log_spans}
    return info.model_copy(update={"engine_choices": choices.model_copy(update=spans)})


def run_and_report(job: RunJob, target: Target) -> tuple[Report, Path]:
    """Bench the target's server with the recipe's protocol, run the post-bench step, attach a
    re-run's verdict, and write the report once; returns it and its path.

    The one failure rule: every failure of the run, a ``KitError``, a plain bug (any
    ``Exception``) or a ``KeyboardInterrupt`` (Ctrl-C, and SIGTERM as ``Terminated``), writes
    the report marked incomplete, with what was made so far and the failure as its reason, then
    propagates unchanged, so the exit code is the one it would have been (also when the
    partial report cannot be written: that is logged). ``SystemExit`` and
    ``GeneratorExit`` pass without a report: they are the interpreter being asked to leave, not
    the run failing, and no stage of a run raises them.
    """
    loaded = job.loaded
    started = _noted(new_report(loaded, job.run_id), target.notes)
    setup = target.setup
    measured: Measurement | None = None
    extras = Extras()
    try:
        setup = replace(setup, env=target.engine())
        bandwidth, notes = target.bandwidth()
        started = _noted(started, notes)
        with target.serve() as served:
            setup = replace(setup, server=served.info())
            speed = witness_plan(served.url, loaded, setup.server)
            started = _noted(started, [speed.note] if speed.note else [])
            try:
                watch = Witnesses(
                    host_load=target.runtime.host_load,
                    host_speed=speed.cpus,
                    cpu_clock=engine_clock(loaded, setup.server),
                    server_log=served.log,
                )
                measured = measure(served.url, loaded, served.alive, watch)
                extras = after_bench(loaded, setup, served.url, measured, bandwidth, job.out_dir)
            finally:
                setup = replace(setup, server=with_spans(served.info(), measured))
        report = finish_report(started, setup, measured, extras, failure=None)
        if job.rerun is not None:
            report = job.rerun.attach(report)
    except (Exception, KeyboardInterrupt) as exc:  # not SystemExit, GeneratorExit: see above
        partial = finish_report(started, setup, measured, extras, failure=failure_text(exc))
        try:
            path = write_report(partial, job.out_dir, job.private_key)
        except OSError as lost:  # a full disk: said here, and the run's own failure raised
            log.error("partial report not written: %s", failure_text(lost))
        else:
            log.error("partial report kept: %s", path)
        raise
    return report, write_report(report, job.out_dir, job.private_key)
