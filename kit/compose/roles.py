"""What the containers run: ``python -m kit.compose prepare|server|bench``.

Each role reads the recipe from ``$KIT_RECIPE`` and ``$KIT_SET`` (the env file's values) and
calls the native runtime's stages: ``prepare`` builds into the kit-home volume, ``server``
re-verifies the image's patches and execs the engine, ``bench`` measures and signs the report.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from pydantic import BaseModel, ConfigDict, Field

from kit import engine
from kit.build import Built, build
from kit.compose.env import CONTAINER_PORT, NO_KEY
from kit.compose.nodes import compose_plan, node_info, read_facts, run_node, worker_rank
from kit.console import report_error, setup_logging
from kit.engine import EngineEnv
from kit.errors import BadInputError, EnvironmentProblem
from kit.model import ModelManifest
from kit.nodes import CLI_SERVE, node_args
from kit.paths import from_home_relative, home_relative, kit_home
from kit.probe import probe_host
from kit.quantize import QuantManifest
from kit.recipe import LoadedRecipe, Recipe, load_recipe
from kit.report.schema import ServerInfo
from kit.report.show import summary_table
from kit.runtimes import Compose
from kit.serve import install_sigterm_handler, server_args
from kit.serve.slack import set_timer_slack
from kit.signing import load_private_key

if TYPE_CHECKING:  # the bench's modules load in the bench sidecar only, not in the server's
    from kit.report.assemble import Setup
    from kit.roofline import Bandwidth
    from kit.run import Served

log = logging.getLogger(__name__)


class Prepared(BaseModel):
    """What ``prepare`` built for a recipe, for ``server`` and ``bench`` to use unchanged."""

    model_config = ConfigDict(extra="forbid")

    recipe_sha256: str = Field(description="Resolved recipe this was built for.")
    served_dir: str = Field(description="Directory the server loads, KIT_HOME-relative.")
    draft_dir: str | None = Field(description="Draft directory, KIT_HOME-relative.")
    model: ModelManifest = Field(description="Target model manifest.")
    draft: ModelManifest | None = Field(description="Draft manifest.")
    quantization: QuantManifest | None = Field(description="Quantization manifest.")


def _prepared_path(recipe: Recipe) -> Path:
    return kit_home() / "prepared" / f"{recipe.name}-{recipe.sha256()[:16]}.json"


def container_recipe() -> LoadedRecipe:
    """The recipe a container runs: ``$KIT_RECIPE`` with the ``$KIT_SET`` overrides."""
    path = os.environ.get("KIT_RECIPE")
    if not path:
        raise BadInputError("KIT_RECIPE is not set", hint="run the stack through compose.yaml")
    overrides = json.loads(os.environ.get("KIT_SET") or "[]")
    loaded = load_recipe(path, [str(o) for o in overrides])
    return loaded.model_copy(update={"resolved": os.environ.get("KIT_RESOLVED") == "1"})


def read_prepared(loaded: LoadedRecipe) -> Prepared:
    path = _prepared_path(loaded.recipe)
    if not path.is_file():
        raise EnvironmentProblem(
            f"{loaded.recipe.name}: the model is not prepared in this volume ({path})",
            hint="run the prepare service first (docker compose run --rm prepare)",
        )
    return Prepared.model_validate_json(path.read_text())


def role_prepare() -> int:
    """Build (or find cached) the model, draft and quantization; record where they are."""
    loaded = container_recipe()
    built = build(loaded)
    prepared = Prepared(
        recipe_sha256=loaded.recipe.sha256(),
        served_dir=home_relative(built.served_dir),
        draft_dir=home_relative(built.draft_dir) if built.draft_dir else None,
        model=built.model,
        draft=built.draft,
        quantization=built.quantization,
    )
    path = _prepared_path(loaded.recipe)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(prepared.model_dump_json(indent=2))
    cached = built.model.cached and (built.quantization is None or built.quantization.cached)
    log.info("prepare: %s (%s)", prepared.served_dir, "cache warm, no work" if cached else "built")
    return 0


def baked_series() -> str:
    """The patch series the image was built with ('' for none), as its build wrote it."""
    path = Path(os.environ.get("KIT_PATCHES_DIR", "/opt/kit/patches")).parent / "patch-series"
    return path.read_text().strip() if path.is_file() else ""


def verify_engine(loaded: LoadedRecipe) -> EngineEnv:
    """The image's engine, its patch series proved byte for byte (:func:`kit.engine.resolve`).
    Refuses an image built with another series than the recipe's."""
    recipe = loaded.recipe
    baked = baked_series()
    if baked != (recipe.server.patches or ""):
        raise EnvironmentProblem(
            f"the image carries patch series {baked or 'none'}, the recipe asks for "
            f"{recipe.server.patches or 'none'}",
            hint="rebuild the image for this recipe: kit image build RECIPE",
        )
    return engine.resolve(recipe.server.engine, recipe.server.patches)


def server_argv(loaded: LoadedRecipe, prepared: Prepared, python: str, rank: int = 0) -> list[str]:
    """The engine's command line in the ``server`` container, or in a ``server-worker`` one
    for node ``rank`` of a multi-node recipe (kit.compose.nodes)."""
    port = int(os.environ.get("KIT_PORT", CONTAINER_PORT))
    served = from_home_relative(prepared.served_dir)
    draft = from_home_relative(prepared.draft_dir) if prepared.draft_dir else None
    args = server_args(loaded.recipe, served, draft, "0.0.0.0", port)
    nodes = compose_plan(loaded.recipe)
    if nodes is None:
        return [python, "-m", "vllm.entrypoints.openai.api_server", *args]
    return [python, *CLI_SERVE, *args, *node_args(nodes, rank)]


def _engine_environ(loaded: LoadedRecipe, env: EngineEnv) -> dict[str, str]:
    environ = dict(os.environ)
    environ.update(loaded.recipe.server.engine_env)
    if env.pythonpath:
        environ["PYTHONPATH"] = env.pythonpath
    return environ


def _own_slack(loaded: LoadedRecipe) -> None:
    """The recipe's timer slack on this process, which the engine inherits (kit.serve.slack)."""
    if (ns := loaded.recipe.server.timer_slack_ns) is not None:
        set_timer_slack(ns)


def role_server() -> int:
    """Re-verify the patches, then exec the engine's OpenAI server (never returns); the head of
    a multi-node recipe runs it as a child instead, to record its node's facts."""
    loaded = container_recipe()
    prepared = read_prepared(loaded)
    env = verify_engine(loaded)
    argv = server_argv(loaded, prepared, env.python)
    environ = _engine_environ(loaded, env)
    _own_slack(loaded)
    log.info("serve: %s", " ".join(argv))
    if loaded.recipe.server.nodes is not None:
        return _run_node(loaded, argv, environ, 0)
    sys.stderr.flush()
    os.execve(argv[0], argv, environ)
    return 0  # pragma: no cover


def role_server_worker() -> int:
    """A headless node of a multi-node recipe: its rank from its replica number, the patches
    re-verified, the engine run until it exits."""
    loaded = container_recipe()
    nodes = loaded.recipe.server.nodes
    if nodes is None:
        raise BadInputError(
            f"{loaded.recipe.name} sets no server.nodes: it has no worker nodes",
            hint="the server-worker service is for recipes served across nodes",
        )
    rank = worker_rank(nodes.count)
    prepared = read_prepared(loaded)
    env = verify_engine(loaded)
    argv = server_argv(loaded, prepared, env.python, rank)
    log.info("serve: node %d of %d: %s", rank, nodes.count, " ".join(argv))
    _own_slack(loaded)
    return _run_node(loaded, argv, _engine_environ(loaded, env), rank)


def _run_node(loaded: LoadedRecipe, argv: list[str], environ: dict[str, str], rank: int) -> int:
    # lazy: the bench side (kit.run, kit.report.assemble) loads only in the roles using it
    from kit.report.assemble import host_for_report  # noqa: PLC0415

    plan = compose_plan(loaded.recipe)
    assert plan is not None
    info = node_info(rank, plan, host_for_report(probe_host(redact=True)))
    return run_node(argv, environ, info)


def _health(url: str) -> str:
    try:
        httpx.get(url + "/health", timeout=5).raise_for_status()
        return ""
    except httpx.HTTPError as exc:
        return f"the server stopped answering /health ({type(exc).__name__})"


@dataclass(frozen=True)
class SidecarTarget:
    """The compose stack's server, benched from the sidecar: the image's engine, verified
    before the run, and a server the sidecar watches through /health."""

    loaded: LoadedRecipe
    prepared: Prepared
    env: EngineEnv
    url: str
    setup: Setup
    runtime: Compose = field(default_factory=Compose)
    notes: tuple[str, ...] = ("ran in containers: the host probed from the sidecar",)

    def engine(self) -> EngineEnv:
        return self.env

    def bandwidth(self) -> tuple[Bandwidth | None, list[str]]:
        if self.loaded.recipe.bench.roofline is None:
            return None, []
        return None, [
            "roofline skipped: the compose runtime does not measure bandwidth before the "
            "server starts"
        ]

    @contextlib.contextmanager
    def serve(self) -> Iterator[Served]:
        # lazy: the bench side (kit.run, kit.report.assemble) loads only in the roles using it
        from kit.report.assemble import display_argv  # noqa: PLC0415
        from kit.run import Served  # noqa: PLC0415

        boot = os.environ.get("KIT_SERVER_BOOT_S")
        nodes = self.loaded.recipe.server.nodes
        info = ServerInfo(
            runtime=self.runtime.name,
            argv=display_argv(server_argv(self.loaded, self.prepared, self.env.python)),
            env=self.loaded.recipe.server.engine_env,
            boot_s=float(boot) if boot else None,
            log_file="server.log",
            nodes=read_facts(nodes.count) if nodes else None,
        )
        yield Served(self.url, lambda: info, lambda: _health(self.url))


def role_bench() -> int:
    """The sidecar: the recipe's protocol against the server, the host sampled, the report
    signed with the mounted key and written to ``$KIT_REPORTS``; exit 3 when incomplete."""
    # lazy: the bench side (kit.run, kit.report.assemble) loads only in the roles using it
    from kit.report.assemble import ImageRef, Setup, host_for_report, new_run_id  # noqa: PLC0415
    from kit.run import RunJob, run_and_report  # noqa: PLC0415

    install_sigterm_handler()
    loaded = container_recipe()
    prepared = read_prepared(loaded)
    url = os.environ.get("KIT_SERVER_URL", f"http://server:{CONTAINER_PORT}").rstrip("/")
    key_path = Path(os.environ.get("KIT_SIGNING_KEY", NO_KEY))
    key = load_private_key(key_path) if key_path.is_file() and key_path.stat().st_size else None
    if key is None:
        log.warning("report: no signing key mounted: the report will be unsigned")
    run_id = os.environ.get("KIT_RUN_ID") or new_run_id()
    out_dir = Path(os.environ.get("KIT_REPORTS", "/reports")) / f"{loaded.recipe.name}-{run_id}"
    env = verify_engine(loaded)
    built = Built(
        model_dir=from_home_relative(prepared.model.directory),
        model=prepared.model,
        draft_dir=from_home_relative(prepared.draft_dir) if prepared.draft_dir else None,
        draft=prepared.draft,
        served_dir=from_home_relative(prepared.served_dir),
        quantization=prepared.quantization,
    )
    image = ImageRef(ref=os.environ.get("KIT_IMAGE", ""), id=os.environ.get("KIT_IMAGE_ID", ""))
    setup = Setup(host=host_for_report(probe_host(redact=True)), built=built, image=image)
    target = SidecarTarget(loaded, prepared, env, url, setup)
    final, path = run_and_report(RunJob(loaded, run_id, out_dir, key), target)
    log.info("report: %s", path)
    sys.stderr.write(summary_table(final) + "\n")
    return 0 if final.status == "complete" else 3


ROLES = {
    "prepare": role_prepare,
    "server": role_server,
    "server-worker": role_server_worker,
    "bench": role_bench,
}


def container_main(argv: list[str]) -> int:
    """``python -m kit.compose ROLE``: what each service of compose.yaml runs."""
    setup_logging(logging.INFO)
    if len(argv) != 1 or argv[0] not in ROLES:
        sys.stderr.write(f"usage: python -m kit.compose {{{','.join(ROLES)}}}\n")
        return 2
    try:
        return ROLES[argv[0]]()
    except (Exception, KeyboardInterrupt) as exc:  # the CLI's one boundary, in the containers
        return report_error(exc)
