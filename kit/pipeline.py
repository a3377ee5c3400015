"""The native runtime: model -> quantize -> engine -> serve -> bench -> report.

Each stage is a function of its own module; this module only sequences them. The report is
built by :mod:`kit.report.assemble` (the same path the compose runtime takes), and a failure
after the build still writes one, marked incomplete.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kit import engine as engine_mod
from kit.bench import BenchResult
from kit.build import build
from kit.engine import EngineEnv
from kit.errors import BadInputError, KitError
from kit.measure import after_bench, measure, measured_bandwidth
from kit.preflight import preflight
from kit.probe import probe_host
from kit.progress import Status
from kit.recipe import LoadedRecipe
from kit.report.assemble import (
    Evidence,
    failure_text,
    finish_report,
    host_for_report,
    new_report,
    new_run_id,
    server_info,
)
from kit.report.files import write_report
from kit.report.schema import Report, ServerInfo
from kit.serve import NativeRuntime, RunningServer

log = logging.getLogger(__name__)


def reproduce(
    loaded: LoadedRecipe,
    out_root: Path,
    *,
    engine_python: str | None = None,
    port: int | None = None,
    private_key: Ed25519PrivateKey | None = None,
) -> tuple[Report, Path]:
    """Run every stage natively and write the report; returns it and its path.

    A failure after the build still writes a report marked incomplete (with the runs made so
    far) before the error propagates.
    """
    preflight(loaded, engine_python=engine_python)
    run_id = new_run_id()
    out_dir = out_root / f"{loaded.recipe.name}-{run_id}"
    report = new_report(loaded, run_id)
    ev = Evidence(host=host_for_report(probe_host(redact=True)))
    server_recipe = loaded.recipe.server
    # the engine's venv is installed (downloads, unpacking) while the model is built and
    # quantized (compute); a build failure waits for the install to end before propagating
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kit-engine") as pool:
        engine_job = pool.submit(
            engine_mod.resolve, server_recipe.engine, server_recipe.patches, engine_python
        )
        built = build(loaded)
    env: EngineEnv | None = None
    result: BenchResult | None = None
    status = Status()
    try:
        env = engine_job.result()  # re-raises what the install raised
        bandwidth = measured_bandwidth(loaded, env, ev)
        runtime = NativeRuntime(env, progress=lambda s: status(f"serve: booting ({s:.0f} s)"))
        with runtime.start(
            loaded.recipe, built.served_dir, built.draft_dir, out_dir / "server.log", port
        ) as server:
            status.done()
            ev.server = server_info(server, "native")
            try:
                result = measure(server.url, loaded, ev, alive=server.exit_reason)
                after_bench(loaded, built, env, server.url, result, bandwidth, ev, out_dir)
            finally:  # read again: what the engine logged while it served (kernels it compiled)
                ev.server = server_info(server, "native")
    except (KitError, KeyboardInterrupt) as exc:
        status.done()
        report = finish_report(
            report, built=built, env=env, result=result, failure=failure_text(exc), evidence=ev
        )
        path = write_report(report, out_dir, private_key)
        log.error("partial report kept: %s", path)
        raise
    report = finish_report(report, built=built, env=env, result=result, failure=None, evidence=ev)
    return report, write_report(report, out_dir, private_key)


def bench_target(
    url: str, loaded: LoadedRecipe, out_root: Path, private_key: Ed25519PrivateKey | None = None
) -> tuple[Report, Path]:
    """Bench an already running OpenAI server with the recipe's protocol."""
    from kit.preflight.pins import dataset_checks

    for check in dataset_checks(loaded):  # a wrong dataset file before any request
        if not check.ok:
            raise BadInputError(check.detail, hint=check.hint)
    run_id = new_run_id()
    report = new_report(loaded, run_id)
    ev = Evidence(
        host=host_for_report(probe_host(redact=True)),
        server=ServerInfo(runtime="external", argv=[], env={}, boot_s=None),
    )
    # the server is not kit's: its CPU would count as another process's
    result = measure(url, loaded, ev, host_load=False)
    report = report.model_copy(
        update={"notes": [*report.notes, f"benchmarked a server kit did not start ({url})"]}
    )
    report = finish_report(report, built=None, env=None, result=result, failure=None, evidence=ev)
    return report, write_report(report, out_root / f"{loaded.recipe.name}-{run_id}", private_key)


@contextlib.contextmanager
def serve(
    loaded: LoadedRecipe,
    log_path: Path,
    *,
    engine_python: str | None = None,
    port: int | None = None,
) -> Iterator[RunningServer]:
    """Build (cached), resolve the engine and serve the recipe's model natively until the
    block ends; the server is always torn down."""
    built = build(loaded)
    server_recipe = loaded.recipe.server
    env = engine_mod.resolve(server_recipe.engine, server_recipe.patches, engine_python)
    with NativeRuntime(env).start(
        loaded.recipe, built.served_dir, built.draft_dir, log_path, port
    ) as server:
        yield server


def serve_node(
    loaded: LoadedRecipe, rank: int, log_path: Path, *, engine_python: str | None = None
) -> int:
    """Build (cached) and run worker node ``rank`` of a multi-node recipe on this host until
    it exits or Ctrl-C; returns its exit code."""
    built = build(loaded)
    server_recipe = loaded.recipe.server
    env = engine_mod.resolve(server_recipe.engine, server_recipe.patches, engine_python)
    return NativeRuntime(env).run_node(
        loaded.recipe, built.served_dir, built.draft_dir, rank, log_path
    )
