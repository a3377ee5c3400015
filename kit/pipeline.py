"""The whole pipeline: model -> quantize -> engine -> serve -> bench -> report.

Each stage is a function of its own module; this module only sequences them, keeps what was
measured when a later stage fails, and writes the report.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kit import engine as engine_mod
from kit.bench import Bencher, BenchResult, RequestRecord, model_info
from kit.engine import EngineEnv
from kit.enginelog import read_engine_choices
from kit.errors import KitError
from kit.model import ModelManifest, fetch_draft, fetch_model
from kit.paths import display_path
from kit.preflight import preflight
from kit.probe import (
    GpuSampler,
    GpuSampling,
    HostLoad,
    HostLoadSampler,
    HostProbe,
    energy_per_token_j,
    probe_host,
)
from kit.progress import Status
from kit.quantize import QuantManifest, quantize
from kit.recipe import LoadedRecipe
from kit.report import (
    Report,
    ServerInfo,
    base_versions,
    encode_report,
    new_run_id,
    non_canonical_reasons,
    now_utc,
)
from kit.roofline import Bandwidth, Roofline, bandwidth_source, measure_bandwidth, roofline
from kit.serve import NativeRuntime, RunningServer
from kit.validity import Validity, verdict
from kit.vllm_bench import VllmBench, run_vllm_bench

log = logging.getLogger(__name__)


@dataclass
class Built:
    """What the build stages produced."""

    model_dir: Path
    model: ModelManifest
    draft_dir: Path | None
    draft: ModelManifest | None
    served_dir: Path
    quantization: QuantManifest | None


def build(loaded: LoadedRecipe) -> Built:
    """Model (and draft) + quantization, each cached."""
    model_dir, model = fetch_model(loaded)
    log.info(
        "model: %s (%s, %s)",
        display_path(model_dir),
        model.source,
        "cached" if model.cached else f"{model.duration_s:.1f} s",
    )
    draft = fetch_draft(loaded)
    served_dir, qman = quantize(loaded, model_dir, model)
    return Built(
        model_dir=model_dir,
        model=model,
        draft_dir=draft[0] if draft else None,
        draft=draft[1] if draft else None,
        served_dir=served_dir,
        quantization=qman,
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
    p = Path(arg)
    return display_path(p) if p.is_absolute() and p.exists() else arg


def _display_argv(argv: list[str]) -> list[str]:
    """The server's command line without this machine's absolute paths."""
    return [_display_arg(a) for a in argv]


def _host_for_report(host: HostProbe) -> HostProbe:
    """The probe with the interpreter path shown like every other path in reports."""
    exe = Path(host.python.executable)
    if not exe.is_absolute():
        return host
    python = host.python.model_copy(update={"executable": display_path(exe)})
    return host.model_copy(update={"python": python})


def new_report(loaded: LoadedRecipe, run_id: str) -> Report:
    recipe = loaded.recipe
    data = recipe.to_json_dict()
    reasons = non_canonical_reasons(data)
    notes = []
    if recipe.bench.ignore_eos:
        notes.append("ignore_eos was set: figures are not comparable with canonical runs")
    return Report(
        schema_version=1,
        kind="kit.report",
        run_id=run_id,
        created_at=now_utc(),
        kit_version=base_versions()["kit"],
        status="incomplete",
        canonical=not reasons,
        non_canonical=reasons,
        recipe_name=recipe.name,
        recipe_file=loaded.path.name,
        recipe_overrides=list(loaded.overrides),
        recipe=data,
        recipe_sha256=recipe.sha256(),
        versions=base_versions(),
        validity=Validity(valid=False, reasons=[]),
        notes=notes,
    )


def span_tokens(result: BenchResult) -> int:
    """Tokens generated from the first measured request to the last (the energy span)."""
    idx = [i for i, r in enumerate(result.records) if r.phase == "measured"]
    if not idx:
        return 0
    return sum(r.completion_tokens or 0 for r in result.records[idx[0] : idx[-1] + 1])


@dataclass
class Evidence:
    """What was observed about the host and the server while the run happened."""

    host: HostProbe | None = None
    sampling: GpuSampling | None = None
    host_load: HostLoad | None = None
    server: ServerInfo | None = None
    roofline: Roofline | None = None
    vllm_bench: VllmBench | None = None
    notes: list[str] = field(default_factory=list)


def finish_report(
    report: Report,
    *,
    built: Built | None,
    env: EngineEnv | None,
    result: BenchResult | None,
    failure: str | None,
    evidence: Evidence | None = None,
) -> Report:
    ev = evidence or Evidence()
    versions = dict(report.versions)
    if env is not None:
        versions[env.name] = env.version
        versions.update({f"engine.{k}": v for k, v in env.versions.items() if k != env.name})
    if built is not None and built.quantization is not None:
        versions.update({f"build.{k}": v for k, v in built.quantization.versions.items()})
    complete = failure is None and result is not None and result.complete
    reason = failure or (result.incomplete_reason if result else "no bench ran")
    energy = None
    if ev.sampling is not None and result is not None:
        value = energy_per_token_j(ev.sampling, span_tokens(result))
        energy = value if isinstance(value, float) else None
    out = report.model_copy(
        update={
            "created_at": now_utc(),
            "versions": versions,
            "status": "complete" if complete else "incomplete",
            "incomplete_reason": None if complete else reason,
            "engine": env.for_report() if env else None,
            "patches": env.patches if env else None,
            "model": built.model if built else None,
            "draft": built.draft if built else None,
            "quantization": built.quantization if built else None,
            "server": ev.server,
            "bench": result,
            "host": ev.host,
            "gpu_sampling": ev.sampling,
            "host_load": ev.host_load,
            "energy_per_token_j": energy,
            "roofline": ev.roofline,
            "vllm_bench": ev.vllm_bench,
            "notes": [*report.notes, *ev.notes],
        }
    )
    validity = verdict(out.model_dump(mode="json"), ev.host, ev.sampling)
    return out.model_copy(update={"validity": validity})


def server_info(server: RunningServer, runtime: Literal["native", "compose"]) -> ServerInfo:
    return ServerInfo(
        runtime=runtime,
        argv=_display_argv(server.argv),
        env=server.env,
        boot_s=server.boot_s,
        log_file=server.log_path.name,
        engine_choices=read_engine_choices(server.log_path),
    )


def write_report(report: Report, out_dir: Path, private_key: Any = None) -> Path:
    """Write the report envelope (signed when a key is given) as ``out_dir/report.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(encode_report(report, private_key))
    os.replace(tmp, path)
    return path


def signing_key(path: str | None, sign: bool = True) -> Any:
    """The private key to sign with: ``path``, else $KIT_SIGNING_KEY, else the default key
    when it exists; None (an unsigned report) when there is none or signing is off."""
    from kit.paths import default_private_key_path
    from kit.sign import load_private_key

    if not sign:
        return None
    if path:
        return load_private_key(Path(path))
    default = default_private_key_path()
    if default.exists():
        return load_private_key(default)
    log.warning(
        "report: no signing key at %s: the report will be unsigned "
        "(create one with `kit keys generate`)",
        default,
    )
    return None


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
    n = len(b.prompts) * (b.warmups + b.runs)
    if b.prefill:
        n += len(b.prefill.depths) * (b.prefill.runs + b.prefill.warmups)
    return n


def measure(
    url: str,
    loaded: LoadedRecipe,
    ev: Evidence,
    alive: Callable[[], str] | None = None,
    sample_interval_s: float = 0.5,
    host_load: bool = True,
) -> BenchResult:
    """Bench a running server with the recipe's protocol while sampling the GPUs and, when
    ``host_load`` (the server is kit's child, or in a container), how busy the host is with
    other work; the samples go into ``ev``."""
    model_name, max_len = model_info(url)
    status = Status()
    bencher = Bencher(
        url,
        loaded.recipe.bench,
        model_name,
        max_model_len=max_len,
        alive=alive,
        on_request=_progress_line(status, planned_requests(loaded)),
    )
    # "ours" for the host-load sampler: kit and its children (the native server's group)
    with GpuSampler(interval_s=sample_interval_s) as sampler, HostLoadSampler() as load:
        bencher.hooks.append(sampler.mark)
        if host_load:
            bencher.hooks.append(load.mark)
        result = bencher.run()
    ev.sampling = sampler.sampling
    ev.host_load = load.host_load if host_load else None
    return result


def measured_bandwidth(loaded: LoadedRecipe, env: EngineEnv, ev: Evidence) -> Bandwidth | None:
    """The bandwidth for the roofline, measured before the server takes the GPUs (when the
    recipe asks for the roofline), else the recipe's datasheet figure."""
    settings = loaded.recipe.bench.roofline
    if settings is None:
        return None
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
        ev.notes.append(f"roofline skipped: no bandwidth ({error}) and no datasheet figure")
    return source


def after_bench(
    loaded: LoadedRecipe,
    built: Built,
    env: EngineEnv,
    url: str,
    result: BenchResult,
    bandwidth: Bandwidth | None,
    ev: Evidence,
    out_dir: Path,
) -> None:
    """While the server is still up: vLLM's own benchmark, then the roofline. Neither failing
    fails the run; the report says what failed."""
    recipe = loaded.recipe
    if recipe.bench.vllm_bench is not None:
        try:
            ev.vllm_bench = run_vllm_bench(
                python=env.python,
                pythonpath=env.pythonpath,
                url=url,
                model=result.served_model,
                tokenizer=built.served_dir,
                bench=recipe.bench,
                settings=recipe.bench.vllm_bench,
                kit_result=result,
                out_dir=out_dir,
            )
        except (KitError, OSError, ValueError) as exc:
            ev.notes.append(f"vllm bench serve failed: {exc}")
            log.error("vllm bench serve failed: %s", exc)
    if bandwidth is not None:
        try:
            ev.roofline = roofline(
                result,
                target_dir=built.served_dir,
                draft_dir=built.draft_dir,
                spec_method=recipe.speculative.method,
                num_speculative_tokens=recipe.speculative.num_speculative_tokens,
                tensor_parallel_size=recipe.server.tensor_parallel_size,
                kv_cache_dtype=recipe.server.kv_cache_dtype,
                bandwidth=bandwidth,
            )
        except (KitError, OSError, ValueError) as exc:
            ev.notes.append(f"roofline failed: {exc}")
            log.error("roofline failed: %s", exc)


def reproduce(
    loaded: LoadedRecipe,
    out_root: Path,
    *,
    engine_python: str | None = None,
    port: int | None = None,
    private_key: Any = None,
) -> tuple[Report, Path]:
    """Run every stage natively and write the report; returns it and its path.

    A failure after the build still writes a report marked incomplete (with the runs made so
    far) before the error propagates.
    """
    preflight(loaded)
    run_id = new_run_id()
    out_dir = out_root / f"{loaded.recipe.name}-{run_id}"
    report = new_report(loaded, run_id)
    ev = Evidence(host=_host_for_report(probe_host(redact=True)))
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
            result = measure(server.url, loaded, ev, alive=server.exit_reason)
            after_bench(loaded, built, env, server.url, result, bandwidth, ev, out_dir)
    except (KitError, KeyboardInterrupt) as exc:
        status.done()
        failure = (
            "interrupted by the user"
            if isinstance(exc, KeyboardInterrupt)
            else str(getattr(exc, "message", exc))
        )
        report = finish_report(
            report, built=built, env=env, result=result, failure=failure, evidence=ev
        )
        path = write_report(report, out_dir, private_key)
        log.error("partial report kept: %s", path)
        raise
    report = finish_report(report, built=built, env=env, result=result, failure=None, evidence=ev)
    return report, write_report(report, out_dir, private_key)


def bench_target(
    url: str, loaded: LoadedRecipe, out_root: Path, private_key: Any = None
) -> tuple[Report, Path]:
    """Bench an already running OpenAI server with the recipe's protocol."""
    run_id = new_run_id()
    report = new_report(loaded, run_id)
    ev = Evidence(
        host=_host_for_report(probe_host(redact=True)),
        server=ServerInfo(runtime="external", argv=[], env={}, boot_s=None),
    )
    # the server is not kit's: its CPU would count as another process's
    result = measure(url, loaded, ev, host_load=False)
    report = report.model_copy(
        update={"notes": [*report.notes, f"benchmarked a server kit did not start ({url})"]}
    )
    report = finish_report(report, built=None, env=None, result=result, failure=None, evidence=ev)
    return report, write_report(report, out_root / f"{loaded.recipe.name}-{run_id}", private_key)
