"""Building a report: started before the run, finished after it (or after its failure).

Reports are built here and only here, by :func:`kit.run.run_and_report` (every runtime's run)
and by the compose host for a stack that failed before its sidecar wrote one: :func:`new_report`
when the run starts, :func:`finish_report` when it ends (its ``failure``: :func:`failure_text`).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import os
import platform
import secrets
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kit import __version__
from kit.bench import BenchResult
from kit.bench.claims import ContextLadder, Soak
from kit.enginelog import read_engine_choices
from kit.errors import InternalError, KitError, Terminated, to_kit_error
from kit.nodes import NodeProcess, read_transport, shown_address
from kit.patches import series_named
from kit.paths import display_path
from kit.peers.schema import Peers
from kit.probe import GpuSampling, HostLoad, HostProbe, energy_per_token_j
from kit.quality import QualityProbe
from kit.quality.harness import HarnessRun
from kit.recipe import LoadedRecipe, recipe_sha256, shown_override, shown_recipe
from kit.recipe.lock import pin_sources
from kit.recipe.protocol import departures
from kit.report.causes import synthetic_check
from kit.report.schema import EngineInfo, KitSource, NodeInfo, Report, ServerInfo
from kit.report.validity import RULES, verdict
from kit.report.verdict import Validity
from kit.roofline import Roofline
from kit.runtimes import RuntimeName
from kit.vllm_bench import VllmBench

if TYPE_CHECKING:
    from kit.bench.load import Planned
    from kit.build import Built
    from kit.engine import EngineEnv
    from kit.serve import RunningServer

INTERRUPTED = "interrupted by the user"
TERMINATED = "stopped by SIGTERM (a time limit, a service manager or kill)"


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def base_versions() -> dict[str, str]:
    return {
        "kit": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
    }


UNKNOWN_COMMIT = "unknown"


@functools.cache
def kit_commit() -> tuple[str, bool | None]:
    """kit's :func:`git_commit`, read once a process from the folder that holds the kit
    package."""
    return git_commit(Path(__file__).resolve().parents[2])


def git_commit(root: Path) -> tuple[str, bool | None]:
    """The git commit checked out at ``root`` and whether tracked files differ from it;
    (``unknown``, None) where ``root`` is not the top of a git checkout (an installed wheel, a
    folder inside another repository) or git cannot say."""
    root = root.resolve()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # a status that writes nothing, not even the index's stat

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(root), *args],
                capture_output=True, text=True, timeout=10, env=env, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    head = git("rev-parse", "--verify", "HEAD") if top else None
    if top is None or head is None or Path(top).resolve() != root:
        return UNKNOWN_COMMIT, None
    status = git("status", "--porcelain", "--untracked-files=no")
    return head, None if status is None else bool(status)


def series_sha256(name: str, patches: Iterable[tuple[str, str]]) -> str:
    """One digest for a patch series: sha256 of the JSON of its name and each patch's (file,
    sha256), in order."""
    data = {"series": name, "patches": [[file, sha] for file, sha in patches]}
    return hashlib.sha256(json.dumps(data, separators=(",", ":")).encode()).hexdigest()


def kit_source(series: str | None) -> KitSource:
    """The code writing a report: kit's commit (:func:`kit_commit`) and the digest of the patch
    series ``series`` as kit holds it (None where kit cannot find it)."""
    commit, dirty = kit_commit()
    digest = None
    if series is not None:
        try:
            held = series_named(series)
        except KitError:
            held = None
        if held is not None:
            digest = series_sha256(held.name, ((p.meta.file, p.sha256) for p in held.patches))
    return KitSource(commit=commit, dirty=dirty, patch_series=series, patch_series_sha256=digest)


def new_report(loaded: LoadedRecipe, run_id: str) -> Report:
    recipe = loaded.recipe
    data = shown_recipe(recipe)
    reasons = departures(recipe.bench)
    notes = []
    if recipe.bench.ignore_eos:
        notes.append("ignore_eos was set: figures are not comparable with canonical runs")
    return Report(
        schema_version=3,
        kind="kit.report",
        run_id=run_id,
        created_at=now_utc(),
        kit_version=base_versions()["kit"],
        kit_source=kit_source(recipe.server.patches),
        status="incomplete",
        canonical=not reasons,
        non_canonical=reasons,
        recipe_name=recipe.name,
        recipe_file=loaded.path.name,
        recipe_overrides=[shown_override(o) for o in loaded.overrides],
        recipe=data,
        recipe_sha256=recipe_sha256(data),
        pins=pin_sources(recipe, loaded.locked, loaded.overrides, loaded.resolved),
        versions=base_versions(),
        validity=Validity(valid=False, reasons=[], rules=RULES),
        notes=notes,
    )


def span_tokens(result: BenchResult) -> int:
    """Tokens generated from the first measured request to the last (the energy span)."""
    idx = [i for i, r in enumerate(result.records) if r.phase == "measured"]
    if not idx:
        return 0
    return sum(r.completion_tokens or 0 for r in result.records[idx[0] : idx[-1] + 1])


def energy_of(sampling: GpuSampling | None, result: BenchResult | None) -> float | None:
    """GPU energy per token generated over the measured span; None when not measured."""
    if sampling is None or result is None:
        return None
    value = energy_per_token_j(sampling, span_tokens(result))
    return value if isinstance(value, float) else None


@dataclass(frozen=True)
class Setup:
    """What a run ran on, for its report: the host as probed when it started, the server, the
    model as built, the engine and the image (compose). What a runtime does not have is None."""

    host: HostProbe | None = None
    server: ServerInfo | None = None
    built: Built | None = None
    env: EngineEnv | None = None
    image: ImageRef | None = None


@dataclass(frozen=True)
class Measurement:
    """What the measure stage returns (:func:`kit.measure.measure`): the bench result and what
    was sampled while it ran."""

    result: BenchResult
    sampling: GpuSampling | None = None
    host_load: HostLoad | None = None
    # a load run's requests as kit drew them (kit.bench.Bencher.plan), for vLLM's side
    load_plan: list[Planned] | None = None
    # the server log's byte ranges written inside measured windows (kit.measure.LogSpans)
    log_spans: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Extras:
    """What the post-bench step returns (:func:`kit.measure.after_bench`): the context ladder
    and the soak, vLLM's own benchmark, the roofline, the quality probe, and notes on what of
    them failed."""

    vllm_bench: VllmBench | None = None
    roofline: Roofline | None = None
    notes: tuple[str, ...] = ()
    peers: Peers | None = None  # bench.peers: the other tools beside kit (kit.peers)
    quality: QualityProbe | None = None  # bench.quality: the quality probe (kit.quality)
    harness: HarnessRun | None = None  # bench.quality.harness: lm-eval (kit.quality.harness)
    context: ContextLadder | None = None  # bench.context: the context ladder (kit.bench.claims)
    soak: Soak | None = None  # bench.soak: the soak (kit.bench.claims)


def finish_report(
    report: Report,
    setup: Setup,
    measured: Measurement | None,
    extras: Extras | None = None,
    *,
    failure: str | None,
) -> Report:
    """The report of a run that ended, from what the stages returned: what it ran on, what was
    measured, the status (incomplete when ``failure`` is given, as when the run did not end
    well, or when the bench did not finish) and the verdict."""
    extras = extras or Extras()
    result = measured.result if measured else None
    sampling = measured.sampling if measured else None
    built, env, image = setup.built, setup.env, setup.image
    versions = dict(report.versions)
    if env is not None:
        versions[env.name] = env.version
        versions.update({f"engine.{k}": v for k, v in env.versions.items() if k != env.name})
    if built is not None and built.quantization is not None:
        versions.update({f"build.{k}": v for k, v in built.quantization.versions.items()})
    complete = failure is None and result is not None and result.complete
    reason = failure or (result.incomplete_reason if result else "no bench ran")
    engine = engine_info(env, image) if env else None
    if image is not None:
        versions.update({"image": image.ref, "image.id": image.id})
    out = report.model_copy(
        update={
            "created_at": now_utc(),
            "versions": versions,
            "status": "complete" if complete else "incomplete",
            "incomplete_reason": None if complete else reason,
            "engine": engine,
            "patches": env.patches if env else None,
            "model": built.model if built else None,
            "draft": built.draft if built else None,
            "quantization": built.quantization if built else None,
            "server": setup.server,
            "bench": result,
            "host": setup.host,
            "gpu_sampling": sampling,
            "host_load": measured.host_load if measured else None,
            "energy_per_token_j": energy_of(sampling, result),
            "roofline": extras.roofline,
            "vllm_bench": extras.vllm_bench,
            "peers": extras.peers,
            "quality": extras.quality,
            "harness": extras.harness,
            "context": extras.context,
            "soak": extras.soak,
            "notes": [*report.notes, *extras.notes],
        }
    )
    out = out.model_copy(update={"synthetic_acceptance": synthetic_check(out)})
    validity = verdict(out, setup.host, sampling)
    return out.model_copy(update={"validity": validity})


def engine_info(env: EngineEnv, image: ImageRef | None = None) -> EngineInfo:
    """The engine section of a report: the environment with its paths shown like every other
    path in reports, and the image it ran from in containers."""
    pythonpath = env.pythonpath
    if pythonpath:
        pythonpath = ":".join(display_path(Path(p)) for p in pythonpath.split(os.pathsep))
    return EngineInfo(
        kind=env.kind,
        name=env.name,
        version=env.version,
        python=display_path(Path(env.python)),
        python_version=env.python_version,
        site_packages=display_path(Path(env.site_packages)),
        pythonpath=pythonpath,
        versions=env.versions,
        patch_series=env.patch_series,
        image=image.ref if image else None,
        image_id=image.id if image else None,
    )


def local_utc_offset_s() -> int:
    """Seconds this host's local time is ahead of UTC, now."""
    offset = dt.datetime.now().astimezone().utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def server_info(server: RunningServer, runtime: RuntimeName) -> ServerInfo:
    return ServerInfo(
        runtime=runtime,
        argv=display_argv(server.argv),
        env=server.env,
        boot_s=server.boot_s,
        log_file=server.log_path.name,
        # kit started it on this host: its log prints this host's local time
        engine_choices=read_engine_choices(server.log_path, utc_offset_s=local_utc_offset_s()),
        nodes=[node_info(n) for n in server.nodes] or None,
    )


def node_info(node: NodeProcess) -> NodeInfo:
    """A node of a native multi-node server: the head and the nodes kit started here carry
    their log and the transport read from it; one started elsewhere, its rank and address."""
    return NodeInfo(
        rank=node.rank,
        role="worker" if node.rank else "head",
        address=shown_address(node.address),
        started_by="elsewhere" if node.log_path is None else "kit",
        log_file=node.log_path.name if node.log_path else None,
        transport=read_transport(node.log_path) if node.log_path else None,
    )


def _display_arg(arg: str) -> str:
    if arg.startswith("{"):  # a JSON argument (--speculative-config) may hold paths
        try:
            data = json.loads(arg)
        except ValueError:
            return arg
        if isinstance(data, dict):
            shown = {k: _display_arg(v) if isinstance(v, str) else v for k, v in data.items()}
            return json.dumps(shown, separators=(",", ":"))
        return arg
    flag, eq, value = arg.partition("=")
    if eq and flag.startswith("-") and value.startswith("/"):  # --flag=/a/path
        return f"{flag}={_display_arg(value)}"
    p = Path(arg)
    return display_path(p) if p.is_absolute() else arg


def display_argv(argv: list[str]) -> list[str]:
    """The server's command line without this machine's absolute paths."""
    return [_display_arg(a) for a in argv]


def host_for_report(host: HostProbe) -> HostProbe:
    """The probe with the interpreter path shown like every other path in reports."""
    exe = Path(host.python.executable)
    if not exe.is_absolute():
        return host
    python = host.python.model_copy(update={"executable": display_path(exe)})
    return host.model_copy(update={"python": python})


def failure_text(exc: BaseException) -> str:
    """What a report says about the failure that ended its run: the CLI's message for it
    (:func:`kit.errors.to_kit_error`), a bug as ``Type: message``."""
    if isinstance(exc, Terminated):
        return TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    err = to_kit_error(exc)
    return err.detail if isinstance(err, InternalError) else err.message


@dataclass(frozen=True)
class ImageRef:
    """The container image a compose run served from."""

    ref: str
    id: str
