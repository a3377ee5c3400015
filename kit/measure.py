"""Measure stage: the recipe's protocol against a running server while the GPUs and the host
are sampled (a :class:`Measurement`), then what runs while the server is still up (vLLM's own
benchmark, the roofline: the :class:`Extras`). Every runtime measures through here."""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from kit.bench import Bencher, RequestRecord, Watch, model_info
from kit.bench.claims import (
    ClaimClient,
    ContextLadder,
    ContextRung,
    Soak,
    SoakTurn,
    run_context,
    run_soak,
)
from kit.build import Built
from kit.engine import EngineEnv
from kit.errors import KitError
from kit.installer import InstallError
from kit.peers import PEERS, PeerJob, Peers, run_peers, summary_notes
from kit.peers.install import ensure_venv
from kit.probe import GpuSampler, HostLoadSampler
from kit.probe.hostspeed import HostSpeedWitness, WitnessPlan
from kit.probe.schedstat import EngineClock
from kit.progress import Status
from kit.quality import ProbeJob, QualityProbe, find_reference, run_probe
from kit.quality.harness import (
    LM_EVAL,
    LM_EVAL_REQUIREMENTS,
    LM_EVAL_VERSION,
    HarnessJob,
    HarnessRun,
    failed,
    run_harness,
)
from kit.recipe import LoadedRecipe, SyntheticModel
from kit.recipe.traffic import point_levels, point_requests, point_warmups
from kit.report.assemble import Extras, Measurement, Setup
from kit.report.schema import ServerInfo
from kit.roofline import (
    Bandwidth,
    Deployment,
    Roofline,
    bandwidth_source,
    measure_bandwidth,
    model_bytes,
    read_safetensors_header,
    roofline,
)
from kit.runtimes import Runtime, serving
from kit.vllm_bench import VllmBench, VllmBenchJob, run_vllm_bench

log = logging.getLogger(__name__)

GPU_SAMPLE_S = 0.5  # the GPU sampler's interval while measuring


def _progress_line(status: Status, total: int) -> Callable[[RequestRecord], None]:
    count = {"n": 0}

    def on_request(rec: RequestRecord) -> None:
        count["n"] += 1
        tok = rec.completion_tokens if rec.completion_tokens is not None else "-"
        msg = (
            f"bench: {rec.prompt} {rec.phase} #{rec.index}: {tok} tokens"
            + (f", {rec.decode_tps:.1f} decode tok/s" if rec.decode_tps else "")
            + (f" ERROR {rec.error}" if rec.error else "")
        )
        status.done()
        log.info("%s [%d/%d]", msg, count["n"], total)

    return on_request


def planned_requests(loaded: LoadedRecipe) -> int:
    b = loaded.recipe.bench
    if b.load is not None:
        n = sum(point_warmups(b.load, v) + point_requests(b.load, v) for v in point_levels(b.load))
    else:
        n = len(b.prompts) * (b.warmups + b.runs)
    if b.prefill:
        n += len(b.prefill.depths) * (b.prefill.runs + b.prefill.warmups)
    return n


def _pids(witness: HostSpeedWitness | None) -> list[int]:
    pid = witness.pid if witness is not None else None
    return [pid] if pid is not None else []


def _binding(server: ServerInfo | None) -> str | None:
    choices = server.engine_choices if server is not None else None
    return choices.cpu_binding if choices is not None else None


def _runtime(server: ServerInfo | None) -> Runtime:
    return serving(server.runtime if server is not None else None)


def engine_clock(loaded: LoadedRecipe, server: ServerInfo | None) -> EngineClock | None:
    """The scheduler's account of each measured request (kit.probe.schedstat): the sequential
    protocol, where the server's runtime sees the engine's threads (kit.runtimes)."""
    if loaded.recipe.bench.load is not None:
        return None
    return _runtime(server).engine_clock(_binding(server))


def witness_plan(url: str, loaded: LoadedRecipe, server: ServerInfo | None) -> WitnessPlan:
    """Where the host-speed witness runs for this server (its runtime's plan): the sequential
    protocol only, on the engine's cores where its log names them."""
    if loaded.recipe.bench.load is not None:
        return WitnessPlan(None)
    return _runtime(server).witness_plan(url, _binding(server))


class LogSpans:
    """The server log's byte ranges written inside measured windows: its size read at each
    ``measure_start`` and ``measure_end`` mark (kit.report.jit places compiles in them)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.spans: list[tuple[int, int]] = []
        self._open: int | None = None

    def mark(self, label: str) -> None:
        try:
            size = self.log.stat().st_size
        except OSError:
            return
        if label == "measure_start":
            self._open = size
        elif label == "measure_end" and self._open is not None:
            self.spans.append((self._open, size))
            self._open = None


@dataclass(frozen=True)
class Witnesses:
    """What watches a bench besides the GPU sampler: ``host_load``, how busy the host is with
    other work (the server is kit's child, or in a container); ``host_speed``, the CPUs the
    host-speed witness runs on before each measured request; ``cpu_clock``, the scheduler's
    account of each measured request; ``server_log`` (a server kit started), the log whose
    byte ranges written inside measured windows are kept."""

    host_load: bool = True
    host_speed: frozenset[int] | None = None
    cpu_clock: EngineClock | None = None
    server_log: Path | None = None


def measure(
    url: str,
    loaded: LoadedRecipe,
    alive: Callable[[], str] | None = None,
    witnesses: Witnesses = Witnesses(),
) -> Measurement:
    """Bench a running server with the recipe's protocol while sampling the GPUs and whatever
    ``witnesses`` asks for (the host-speed witness's process left out of the scheduler's
    account)."""
    host_load, host_speed = witnesses.host_load, witnesses.host_speed
    cpu_clock, server_log = witnesses.cpu_clock, witnesses.server_log
    model_name, max_len = model_info(url)
    status = Status()
    progress = _progress_line(status, planned_requests(loaded))
    # "ours" for the host-load sampler: kit and its children (the native server's group)
    witness = HostSpeedWitness(host_speed) if host_speed else contextlib.nullcontext(None)
    with (
        GpuSampler(interval_s=GPU_SAMPLE_S) as sampler,
        HostLoadSampler() as load,
        witness as speed,
    ):
        spans = LogSpans(server_log) if server_log is not None else None
        hooks = (sampler.mark, *((load.mark,) if host_load else ()))
        watch = Watch(
            alive=alive,
            on_request=progress,
            host_speed=speed,
            cpu_clock=replace(cpu_clock, exclude=lambda: _pids(speed)) if cpu_clock else None,
            hooks=(*hooks, *((spans.mark,) if spans is not None else ())),
        )
        bencher = Bencher(
            url,
            loaded.recipe.bench,
            model_name,
            max_model_len=max_len,
            watch=watch,
            recipe_dir=loaded.path.parent,
        )
        run = bencher.measure()
    return Measurement(
        result=run.result,
        sampling=sampler.sampling,
        host_load=load.host_load if host_load else None,
        load_plan=list(run.plan) if run.plan is not None else None,
        log_spans=spans.spans if spans is not None else [],
    )


def measured_bandwidth(loaded: LoadedRecipe, env: EngineEnv) -> tuple[Bandwidth | None, list[str]]:
    """The bandwidth for the roofline, measured before the server takes the GPUs (when the
    recipe asks for the roofline), else the recipe's datasheet figure; and the report's note
    when there is neither."""
    settings = loaded.recipe.bench.roofline
    if settings is None:
        return None, []
    error = "not measured (bench.roofline.measure_bandwidth is false)"
    measured = []
    if settings.measure_bandwidth and loaded.recipe.server.engine.device == "cuda":
        try:
            measured = measure_bandwidth(env.python, env.pythonpath)
            log.info(
                "roofline: copy bandwidth %s GB/s",
                ", ".join(f"{m.median_gbps:.0f}" for m in measured),
            )
        except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
            error = f"bandwidth measurement failed: {exc}"
            log.warning("roofline: %s", error)
    source = bandwidth_source(measured, settings.datasheet_bandwidth_gbps, error)
    if source is None:
        return None, [f"roofline skipped: no bandwidth ({error}) and no datasheet figure"]
    return source, []


def peers_beside(
    loaded: LoadedRecipe, setup: Setup, url: str, measured: Measurement, out_dir: Path
) -> tuple[Peers | None, list[str]]:
    """The tools of ``bench.peers`` against the server after kit's bench (kit.peers), and the
    report's notes on what of them failed: a tool that fails never fails the run."""
    bench = loaded.recipe.bench
    built, env, result = setup.built, setup.env, measured.result
    if not bench.peers or built is None or env is None:
        return None, []
    job = PeerJob(
        url=url,
        model=result.served_model,
        tokenizer=built.served_dir,
        bench=bench,
        out_dir=out_dir,
        python=env.python,
        pythonpath=env.pythonpath,
        engine_version=env.version,
        torch=env.versions.get("torch"),
    )
    try:
        peers = run_peers(job, [PEERS[name] for name in bench.peers], result, measured.load_plan)
    except (KitError, InstallError, OSError, ValueError) as exc:
        log.error("peers failed: %s", exc)
        return None, [f"bench.peers failed: {exc}"]
    for note in peers.notes:
        log.info("peers: %s", note)
    return peers, [f"bench.peers: {note}" for note in summary_notes(peers)]


def quality_beside(
    loaded: LoadedRecipe, setup: Setup, url: str, measured: Measurement
) -> tuple[QualityProbe | None, list[str]]:
    """The quality probe (bench.quality) against the server after the bench (kit.quality),
    and the report's note when it failed: a probe that fails never fails the run."""
    settings, built = loaded.recipe.bench.quality, setup.built
    if settings is None or built is None:
        return None, []
    job = ProbeJob(
        url=url,
        model=measured.result.served_model,
        settings=settings,
        max_model_len=loaded.recipe.server.max_model_len,
        timeout_s=loaded.recipe.bench.request_timeout_s,
    )
    try:
        reference, no_reference = find_reference(loaded, built.model_dir, built.model)
        return run_probe(job, reference, no_reference), []
    except (KitError, OSError, ValueError) as exc:
        log.error("quality probe failed: %s", exc)
        return None, [f"bench.quality failed: {exc}"]


def harness_beside(
    loaded: LoadedRecipe, url: str, measured: Measurement, out_dir: Path
) -> tuple[HarnessRun | None, list[str]]:
    """The task harness (bench.quality.harness) against the server, last, and the report's
    note when it failed: a harness that fails is recorded, never a failed run."""
    quality = loaded.recipe.bench.quality
    settings = quality.harness if quality is not None else None
    if settings is None:
        return None, []
    include = settings.include_path
    try:
        python = ensure_venv(LM_EVAL, LM_EVAL_VERSION, LM_EVAL_REQUIREMENTS)
        job = HarnessJob(
            python=python,
            url=url,
            model=measured.result.served_model,
            settings=settings,
            include_dir=loaded.resolve_path(include) if include is not None else None,
            out_dir=out_dir,
            request_timeout_s=loaded.recipe.bench.request_timeout_s,
        )
        run = run_harness(job)
    except (InstallError, OSError) as exc:
        run = failed(settings, f"lm-eval could not be installed: {exc}")
    return run, [] if run.error is None else [f"bench.quality.harness failed: {run.error}"]


def draft_bytes(loaded: LoadedRecipe, built: Built | None) -> tuple[int | None, int | None]:
    """The draft's weights (every tensor in its safetensors headers) and its KV cache per
    token in the server's KV dtype, bytes; None where there is no draft kit built, or its
    headers cannot be read."""
    if built is None or built.draft_dir is None:
        return None, None
    folder = built.draft_dir
    try:
        shape = model_bytes(folder, "draft", loaded.recipe.server.kv_cache_dtype)
        files = sorted(folder.glob("*.safetensors"))
        weights = sum(t.nbytes for f in files for t in read_safetensors_header(f))
    except (KitError, OSError, ValueError) as exc:
        log.warning("context: the draft's bytes could not be read: %s", exc)
        return None, None
    return weights, shape.kv_bytes_per_token


def _rung_line(rung: ContextRung) -> None:
    x = rung.exchange
    if x is None:
        log.info("context: depth %d not run: %s", rung.depth, rung.not_run)
    elif x.error is not None:
        log.info("context: depth %d FAILED: %s", rung.depth, x.error)
    else:
        log.info(
            "context: depth %d: %s prompt tokens, TTFT %.0f ms, decode %.1f tok/s%s",
            rung.depth,
            rung.prompt_tokens,
            rung.ttft_ms or 0.0,
            rung.decode_tps or 0.0,
            "" if rung.recalled is None else f", key {'recalled' if rung.recalled else 'MISSED'}",
        )


def _turn_line(turn: SoakTurn) -> None:
    x = turn.exchange
    what = (
        f"not run: {turn.not_run}"
        if x is None
        else "EMPTY"
        if turn.empty
        else f"ERROR {x.error}"
        if turn.error
        else f"{turn.prompt_tokens} prompt tokens, {turn.decode_tps or 0.0:.1f} decode tok/s"
    )
    log.info("soak: session %d turn %d: %s", turn.session, turn.turn, what)


def claims_beside(
    loaded: LoadedRecipe, setup: Setup, url: str, measured: Measurement
) -> tuple[ContextLadder | None, Soak | None, list[str]]:
    """The context ladder (bench.context) and the soak (bench.soak) against the server after
    kit's bench (kit.bench.claims). Their failures are their results; anything else that
    breaks them is the report's note, never a failed run."""
    recipe = loaded.recipe
    bench = recipe.bench
    if bench.context is None and bench.soak is None:
        return None, None, []
    try:
        served_len = model_info(url)[1]
    except (KitError, httpx.HTTPError):
        served_len = None
    max_len = served_len or recipe.server.max_model_len
    server = setup.server
    context: ContextLadder | None = None
    soak: Soak | None = None
    notes: list[str] = []
    with ClaimClient(url, bench, measured.result.served_model) as client:
        if bench.context is not None:
            try:
                context = run_context(
                    client,
                    bench.context,
                    max_len,
                    from_server=served_len is not None,
                    judged=not isinstance(recipe.model, SyntheticModel),
                    on_rung=_rung_line,
                )
            except (KitError, OSError, ValueError) as exc:
                log.error("context ladder failed: %s", exc)
                notes.append(f"bench.context failed: {exc}")
            else:
                choices = server.engine_choices if server is not None else None
                weights, kv = draft_bytes(loaded, setup.built)
                context = context.model_copy(
                    update={
                        "kv_cache_tokens": choices.kv_cache_tokens if choices else None,
                        "max_concurrency": choices.max_concurrency if choices else None,
                        "draft_weights_bytes": weights,
                        "draft_kv_bytes_per_token": kv,
                    }
                )
        if bench.soak is not None:
            memory = _runtime(server).memory_probe(recipe.server.engine.device)
            try:
                soak = run_soak(client, bench.soak, max_len, memory, on_turn=_turn_line)
            except (KitError, OSError, ValueError) as exc:
                log.error("soak failed: %s", exc)
                notes.append(f"bench.soak failed: {exc}")
    return context, soak, notes


def after_bench(
    loaded: LoadedRecipe,
    setup: Setup,
    url: str,
    measured: Measurement,
    bandwidth: Bandwidth | None,
    out_dir: Path,
) -> Extras:
    """While the server is still up: the context ladder and the soak (any server), then
    vLLM's own benchmark, the peers (bench.peers), the roofline and the quality probe, for a
    model kit built and an engine it knows (not for a server it was given). None failing fails
    the run; the notes say what failed."""
    recipe = loaded.recipe
    built, env, result = setup.built, setup.env, measured.result
    context, soak, claim_notes = claims_beside(loaded, setup, url, measured)
    if built is None or env is None:
        unrun = ["bench.peers not run: kit did not build the model this server serves"]
        notes_ = (*claim_notes, *(unrun if recipe.bench.peers else []))
        return Extras(notes=notes_, context=context, soak=soak)
    vllm_bench: VllmBench | None = None
    roof: Roofline | None = None
    notes: list[str] = list(claim_notes)
    if recipe.bench.vllm_bench is not None:
        try:
            job = VllmBenchJob(
                python=env.python,
                pythonpath=env.pythonpath,
                url=url,
                model=result.served_model,
                tokenizer=built.served_dir,
                bench=recipe.bench,
                settings=recipe.bench.vllm_bench,
                out_dir=out_dir,
                recipe_dir=loaded.path.parent,
            )
            vllm_bench = run_vllm_bench(job, result, planned=measured.load_plan)
        except (KitError, OSError, ValueError) as exc:
            notes.append(f"vllm bench serve failed: {exc}")
            log.error("vllm bench serve failed: %s", exc)
    peers, peer_notes = peers_beside(loaded, setup, url, measured, out_dir)
    notes += peer_notes
    if bandwidth is not None:
        try:
            deployment = Deployment(
                target_dir=built.served_dir,
                draft_dir=built.draft_dir,
                spec_method=recipe.speculative.method,
                num_speculative_tokens=recipe.speculative.num_speculative_tokens,
                tensor_parallel_size=recipe.server.tensor_parallel_size,
                kv_cache_dtype=recipe.server.kv_cache_dtype,
            )
            roof = roofline(result, deployment, bandwidth)
        except (KitError, OSError, ValueError) as exc:
            notes.append(f"roofline failed: {exc}")
            log.error("roofline failed: %s", exc)
    # last: its one long request is the server's least ordinary (every prompt position scored)
    quality, quality_notes = quality_beside(loaded, setup, url, measured)
    harness, harness_notes = harness_beside(loaded, url, measured, out_dir)
    return Extras(
        vllm_bench=vllm_bench,
        roofline=roof,
        notes=(*notes, *quality_notes, *harness_notes),
        peers=peers,
        quality=quality,
        harness=harness,
        context=context,
        soak=soak,
    )
