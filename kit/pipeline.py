"""The native runtime: model -> quantize -> engine -> serve -> bench -> report.

Each stage is a function of its own module; this module only sequences them. The bench and the
report are :func:`kit.run.run_and_report`'s (the path every runtime takes), so a failure after
the build still writes a report, marked incomplete. ``kit bench --target`` takes it too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kit import engine as engine_mod
from kit.build import Built, build
from kit.engine import EngineEnv
from kit.errors import BadInputError
from kit.measure import measured_bandwidth
from kit.preflight import serve_checks, settle
from kit.probe import probe_host
from kit.progress import Status
from kit.recipe import LoadedRecipe
from kit.report.assemble import Setup, host_for_report, new_run_id, server_info
from kit.report.schema import Report, ServerInfo
from kit.rerun import Rerun
from kit.roofline import Bandwidth
from kit.run import RunJob, Served, run_and_report
from kit.runtimes import External, MultiNode, Native, Place
from kit.serve import RunningServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NativeTarget:
    """A server kit starts here as its child (``runtime``: on one host, or over the recipe's
    nodes), on the engine installed while the model was built; the bandwidth is measured
    before it takes the GPUs."""

    loaded: LoadedRecipe
    built: Built
    engine_job: Future[EngineEnv]
    log_path: Path
    port: int | None
    setup: Setup
    runtime: Native
    notes: tuple[str, ...] = ()

    def engine(self) -> EngineEnv:
        return self.engine_job.result()  # re-raises what the install raised

    def bandwidth(self) -> tuple[Bandwidth | None, list[str]]:
        return measured_bandwidth(self.loaded, self.engine())

    @contextlib.contextmanager
    def serve(self) -> Iterator[Served]:
        status = Status()
        starter = self.runtime.server(
            self.engine(), progress=lambda s: status(f"serve: booting ({s:.0f} s)")
        )
        try:
            with starter.start(
                self.loaded.recipe,
                self.built.served_dir,
                self.built.draft_dir,
                self.log_path,
                self.port,
            ) as server:
                status.done()
                yield Served(
                    server.url,
                    lambda: server_info(server, self.runtime.name),
                    server.exit_reason,
                    log=server.log_path,
                )
        finally:
            status.done()


def reproduce(
    loaded: LoadedRecipe,
    out_root: Path,
    *,
    engine_python: str | None = None,
    port: int | None = None,
    private_key: Ed25519PrivateKey | None = None,
    rerun: Rerun | None = None,
) -> tuple[Report, Path]:
    """Run every stage natively and write the report (with the verdict of ``rerun``, a re-run
    of a shared report); returns it and its path.

    A failure after the build still writes a report marked incomplete (with the runs made so
    far) before the error propagates.
    """
    runtime = Native().for_recipe(loaded.recipe)
    runtime.preflight(loaded, Place(port, out_root, engine_python))
    run_id = new_run_id()
    out_dir = out_root / f"{loaded.recipe.name}-{run_id}"
    host = host_for_report(probe_host(redact=True))
    server_recipe = loaded.recipe.server
    # the engine's venv is installed (downloads, unpacking) while the model is built and
    # quantized (compute); a build failure waits for the install to end before propagating
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kit-engine") as pool:
        engine_job = pool.submit(
            engine_mod.resolve, server_recipe.engine, server_recipe.patches, engine_python
        )
        built = build(loaded)
    setup = Setup(host=host, built=built)
    target = NativeTarget(loaded, built, engine_job, out_dir / "server.log", port, setup, runtime)
    return run_and_report(RunJob(loaded, run_id, out_dir, private_key, rerun), target)


@dataclass(frozen=True)
class ExternalTarget:
    """A server kit did not start (``kit bench --target``): nothing is known of its engine or
    model, so nothing runs after the bench, and its CPU would count as another process's."""

    url: str
    setup: Setup
    runtime: External = field(default_factory=External)

    @property
    def notes(self) -> tuple[str, ...]:
        return (f"benchmarked a server kit did not start ({self.url})",)

    def engine(self) -> None:
        return None

    def bandwidth(self) -> tuple[Bandwidth | None, list[str]]:
        return None, []

    @contextlib.contextmanager
    def serve(self) -> Iterator[Served]:
        info = ServerInfo(runtime=self.runtime.name, argv=[], env={}, boot_s=None)
        yield Served(self.url, lambda: info)


def bench_target(
    url: str, loaded: LoadedRecipe, out_root: Path, private_key: Ed25519PrivateKey | None = None
) -> tuple[Report, Path]:
    """Bench an already running OpenAI server with the recipe's protocol."""
    for check in External().checks(loaded):  # a wrong dataset file before any request
        if not check.ok:
            raise BadInputError(check.detail, hint=check.hint)
    run_id = new_run_id()
    out_dir = out_root / f"{loaded.recipe.name}-{run_id}"
    target = ExternalTarget(url, Setup(host=host_for_report(probe_host(redact=True))))
    return run_and_report(RunJob(loaded, run_id, out_dir, private_key), target)


@contextlib.contextmanager
def serve(
    loaded: LoadedRecipe,
    log_path: Path,
    *,
    engine_python: str | None = None,
    port: int | None = None,
) -> Iterator[RunningServer]:
    """Check the engine and the port (:func:`kit.preflight.serve_checks`), build (cached),
    resolve the engine and serve the recipe's model natively until the block ends; the server
    is always torn down."""
    settle(loaded.recipe.name, serve_checks(loaded, port, engine_python))
    built = build(loaded)
    server_recipe = loaded.recipe.server
    env = engine_mod.resolve(server_recipe.engine, server_recipe.patches, engine_python)
    with (
        Native()
        .for_recipe(loaded.recipe)
        .server(env)
        .start(loaded.recipe, built.served_dir, built.draft_dir, log_path, port) as server
    ):
        yield server


def serve_node(
    loaded: LoadedRecipe, rank: int, log_path: Path, *, engine_python: str | None = None
) -> int:
    """Build (cached) and run worker node ``rank`` of a multi-node recipe on this host until
    it exits or Ctrl-C; returns its exit code."""
    built = build(loaded)
    server_recipe = loaded.recipe.server
    env = engine_mod.resolve(server_recipe.engine, server_recipe.patches, engine_python)
    return (
        MultiNode()
        .server(env)
        .run_node(loaded.recipe, built.served_dir, built.draft_dir, rank, log_path)
    )
