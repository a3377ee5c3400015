"""``kit reproduce`` as one stage: a :class:`ReproduceRequest` in, a :class:`ReproduceResult` out.

The recipe (or a shared report's), locked first with ``resolve``, runs on the runtime asked for
(kit.runtimes; natively kit.pipeline, in containers kit.compose) and ends with its verdicts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kit import compose, pipeline
from kit.errors import EXIT_ENVIRONMENT, EXIT_OK, BadInputError
from kit.lock import lock_recipe
from kit.preflight import place_checks, settle
from kit.recipe import LoadedRecipe, load_recipe
from kit.report.points import PointsVerdict, compare_points
from kit.report.reproduction import Reproduction
from kit.report.schema import Report
from kit.report.verdict import FailOn, verdict_exit
from kit.rerun import Rerun, is_report_file, prepare_rerun
from kit.runtimes import BY_NAME, Compose, Native, Runtime
from kit.signing import signing_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportTrust:
    """Who a shared report must be signed by (``kit reproduce REPORT.json``): the public key
    ``key``, else a trusted key (``kit keys trust``); or anyone (``allow_untrusted``), or no one
    (``allow_unsigned``)."""

    key: Path | None = None
    allow_untrusted: bool = False
    allow_unsigned: bool = False

    @property
    def given(self) -> bool:
        return self.key is not None or self.allow_untrusted or self.allow_unsigned


@dataclass(frozen=True)
class ReproduceRequest:
    """What ``kit reproduce`` is asked: the recipe or shared report at ``path`` with its
    ``--set`` overrides, the runtime, where the run folder goes, the port and engine to serve
    with, how the report is signed, whether the recipe is locked first, the trust a shared
    report needs, and which DIFFERENT verdict fails the run (``--fail-on``)."""

    path: str  # as given: messages name it so
    overrides: tuple[str, ...] = ()
    runtime: Literal["native", "compose"] = "native"
    out_dir: Path = Path("reports")
    port: int | None = None
    engine_python: str | None = None
    key_path: str | None = None
    sign: bool = True
    resolve: bool = False
    trust: ReportTrust = ReportTrust()
    fail_on: FailOn = "different"


@dataclass(frozen=True)
class ReproduceResult:
    """The report written and its path, the verdict per point against an imported reference
    (``kit import``; None without one), and the exit code: 3 for an incomplete report, else
    the verdict's (kit.report.verdict.verdict_exit), else 0."""

    report: Report
    path: Path
    points: PointsVerdict | None
    exit_code: int

    @property
    def verdict(self) -> Reproduction | PointsVerdict | None:
        """A re-run's verdict on the shared report, else the verdict per point."""
        return self.report.reproduction or self.points


def _native(
    loaded: LoadedRecipe, request: ReproduceRequest, rerun: Rerun | None
) -> tuple[Report, Path]:
    key = signing_key(request.key_path, request.sign)
    return pipeline.reproduce(
        loaded,
        request.out_dir,
        engine_python=request.engine_python,
        port=request.port,
        private_key=key,
        rerun=rerun,
    )


def _compose(
    loaded: LoadedRecipe, request: ReproduceRequest, rerun: Rerun | None
) -> tuple[Report, Path]:
    options = compose.StackOptions(key_path=request.key_path, sign=request.sign, port=request.port)
    return compose.reproduce(loaded, request.out_dir, options)


# how each runtime kit reproduce offers runs a recipe
RUNS: dict[str, Callable[[LoadedRecipe, ReproduceRequest, Rerun | None], tuple[Report, Path]]] = {
    Native.name: _native,
    Compose.name: _compose,
}


def _lock(request: ReproduceRequest, runtime: Runtime) -> None:
    """``--resolve``: the recipe's lock written (the image's pin only where the runtime serves
    the image), after the port and the output folder are checked: the lock may pull an image."""
    settle(request.path, place_checks(request.port, request.out_dir))
    locked = lock_recipe(request.path, images=runtime.images)
    if locked.removed is not None:
        log.warning("removed %s: it locked an earlier version of the recipe", locked.removed)
    log.info("reproduce: %s", f"locked {locked.written}" if locked.written else "nothing to lock")


def _shared(request: ReproduceRequest, runtime: Runtime) -> tuple[Rerun, LoadedRecipe]:
    """A shared report's re-run and its embedded recipe; refused before any work where the
    request does not fit one."""
    path = request.path
    if request.resolve:
        raise BadInputError(
            "--resolve is for a recipe: a report carries the pins it ran with",
            hint=f"kit reproduce {path} (without --resolve)",
        )
    if not runtime.reruns:
        # the sidecar runs the embedded recipe from no file it could mount (kit.compose.env)
        raise BadInputError(
            f"a re-run of a report runs natively: --runtime {runtime.name} takes a recipe",
            hint=f"kit reproduce {path} (without --runtime {runtime.name})",
        )
    trust = request.trust
    return prepare_rerun(
        Path(path),
        request.overrides,
        report_key=trust.key,
        allow_untrusted=trust.allow_untrusted,
        allow_unsigned=trust.allow_unsigned,
    )


def _recipe(request: ReproduceRequest, runtime: Runtime) -> tuple[Rerun | None, LoadedRecipe]:
    """The recipe to run, and the shared report it re-runs, if any."""
    if is_report_file(request.path):
        return _shared(request, runtime)
    if request.trust.given:
        raise BadInputError(
            "--report-key, --allow-untrusted and --allow-unsigned are for kit reproduce "
            "REPORT.json",
            hint="name a report file, or drop them",
        )
    if request.resolve:
        _lock(request, runtime)
    loaded = load_recipe(request.path, request.overrides)
    return None, loaded.model_copy(update={"resolved": True}) if request.resolve else loaded


def _points(report: Report, loaded: LoadedRecipe) -> PointsVerdict | None:
    """An imported result (``kit import``): this run's points against the file's, one by one."""
    reference = loaded.recipe.reference
    if report.reproduction is not None or reference is None or not reference.points:
        return None
    return compare_points(report, reference)


def reproduce(request: ReproduceRequest) -> ReproduceResult:
    """Check the request, then build, serve, bench and report on its runtime; returns the
    report, its path, its verdicts and the exit code they give."""
    runtime = BY_NAME[request.runtime]
    rerun, loaded = _recipe(request, runtime)
    if request.engine_python and not runtime.takes_engine_python:
        raise BadInputError(
            f"--engine-python is for --runtime {Native.name}",
            hint=f"the {runtime.name} runtime serves the engine baked into the image",
        )
    report, path = RUNS[request.runtime](loaded, request, rerun)
    points = _points(report, loaded)
    verdict = report.reproduction or points
    if report.status != "complete":
        code = EXIT_ENVIRONMENT
    else:
        code = verdict_exit(verdict, request.fail_on) if verdict is not None else EXIT_OK
    return ReproduceResult(report, path, points, code)
