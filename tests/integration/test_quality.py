"""The quality probe (bench.quality) on real vLLM CPU servers: the session's server on the
intact AutoRound-INT4 checkpoint passes, and a copy of that checkpoint with every quantization
scale zeroed, served by a server of its own, is flagged as garbage by the verdict. The intact
run goes through the post-bench step into a report that ``kit report verify`` checks."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.bench import Bencher, model_info
from kit.build import Built
from kit.engine import EngineEnv
from kit.measure import after_bench
from kit.quality import ProbeJob, QualityProbe, quality_diff, quality_findings, run_probe
from kit.quality.measures import parse_top
from kit.quality.reference import ReferenceJob, reference_job
from kit.quality.scorer import score
from kit.recipe import LoadedRecipe, load_recipe
from kit.report.assemble import Measurement, Setup, finish_report, new_report, server_info
from kit.report.files import encode_report
from kit.report.verify import verify_report
from kit.serve import NativeRuntime, RunningServer

pytestmark = pytest.mark.integration

SHORT = ["bench.warmups=0", "bench.runs=1", "bench.prefill=null"]
SHORT += [f"bench.prompts.{i}.max_tokens=8" for i in (0, 1)]
# the report test runs every step after the bench: of them only the quality probe here
# (test_claims has the context ladder and the soak)
SHORT += ["bench.context=null", "bench.soak=null"]


def zero_scales(src: Path, dst: Path) -> int:
    """A copy of a quantized checkpoint with every ``*.scales`` tensor zeroed (every quantized
    weight then dequantizes to 0); how many tensors were zeroed."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    path = dst / "model.safetensors"
    tensors = load_file(str(path))
    scales = [name for name in tensors if name.endswith(".scales")]
    for name in scales:
        tensors[name] = tensors[name].clone().zero_()
    save_file(tensors, str(path), metadata={"format": "pt"})
    return len(scales)


def _job(loaded: LoadedRecipe, url: str) -> ProbeJob:
    settings = loaded.recipe.bench.quality
    assert settings is not None  # on by default
    name, max_len = model_info(url)
    return ProbeJob(url, name, settings, max_len or 0, loaded.recipe.bench.request_timeout_s)


@pytest.fixture(scope="module")
def intact(cpu_recipe: LoadedRecipe, built: Built, server: RunningServer) -> QualityProbe:
    assert built.reference is not None  # the build stage scored the unquantized model
    return run_probe(_job(cpu_recipe, server.url), built.reference, None)


@pytest.fixture(scope="module")
def broken_server(
    cpu_recipe: LoadedRecipe,
    built: Built,
    engine_env: EngineEnv,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningServer]:
    work = tmp_path_factory.mktemp("broken")
    assert zero_scales(built.served_dir, work / "model") == 14  # 7 linear layers x 2 layers
    runtime = NativeRuntime(engine_env)
    log = work / "server.log"
    with runtime.start(cpu_recipe.recipe, work / "model", built.draft_dir, log) as srv:
        yield srv


def test_the_scorer_gives_the_cached_reference_again(
    cpu_recipe: LoadedRecipe, built: Built
) -> None:
    """The reference the build stage cached, scored again in this process: the same tokens and
    the same scores (float32 on one host; 4 decimals may round apart)."""
    cached = built.reference
    job = reference_job(cpu_recipe, built.model_dir, built.model)
    assert cached is not None and isinstance(job, ReferenceJob)
    again = score({"model": str(built.model_dir), "key": job.key, **job.inputs})
    assert again.token_ids == cached.token_ids and len(again.token_ids) == 2047
    assert again.vocab_size == 1024 and again.provenance == cached.provenance
    pairs = zip(again.scores.logprobs, cached.scores.logprobs, strict=True)
    assert max(abs(a - b) for a, b in pairs) <= 1e-3
    same = [
        parse_top(a)[0][0] == parse_top(b)[0][0]
        for a, b in zip(again.scores.top, cached.scores.top, strict=True)
    ]
    assert sum(same) >= 0.99 * len(same)


def test_the_intact_checkpoint_passes(intact: QualityProbe, built: Built) -> None:
    s = intact.summary
    assert intact.reference is not None and intact.no_reference is None
    assert intact.reference.provenance.model_identity == built.model.identity
    assert s.positions == len(intact.token_ids) - 1 == 2046  # max_model_len 2048, one generated
    assert s.agreement is not None and s.chance is not None and s.perplexity_ratio is not None
    assert s.agreement > intact.settings.garbage_over_chance * s.chance
    assert s.agreement >= intact.settings.min_agreement
    assert s.perplexity_ratio < intact.settings.max_perplexity_ratio
    assert s.kl is not None and s.kl >= 0
    assert quality_findings(intact) == []


def test_a_zeroed_quantization_is_garbage(
    cpu_recipe: LoadedRecipe, built: Built, broken_server: RunningServer, intact: QualityProbe
) -> None:
    broken = run_probe(_job(cpu_recipe, broken_server.url), built.reference, None)
    s = broken.summary
    assert s.agreement is not None and s.chance is not None
    assert s.agreement <= broken.settings.garbage_over_chance * s.chance
    findings = quality_findings(broken)
    assert [(f.code, f.severity) for f in findings] == [("quality-garbage", "error")]
    assert "top-1 agreement" in findings[0].message
    # against the intact run: the figures differ beyond their band
    diff = quality_diff(intact, broken)
    assert diff and diff[0].startswith(("perplexity", "top-1 agreement")), diff


def test_the_report_holds_the_probe_and_verify_recomputes_it(
    cpu_recipe: LoadedRecipe,
    built: Built,
    engine_env: EngineEnv,
    server: RunningServer,
    tmp_path: Path,
) -> None:
    short = load_recipe(cpu_recipe.path, SHORT)
    name, max_len = model_info(server.url)
    result = Bencher(server.url, short.recipe.bench, name, max_model_len=max_len).run()
    setup = Setup(built=built, env=engine_env, server=server_info(server, "native"))
    measured = Measurement(result=result)
    extras = after_bench(short, setup, server.url, measured, None, tmp_path)
    report = finish_report(new_report(short, "q"), setup, measured, extras, failure=None)
    assert report.quantization is not None and len(report.quantization.identity) == 64
    assert report.quality is not None and report.quality.reference is not None
    assert not [f for f in report.validity.reasons if f.code.startswith("quality")]
    checklist = verify_report(encode_report(report), allow_unsigned=True)
    assert checklist.ok, checklist.render()
    assert "quality probe (2046 positions)" in checklist.item("summaries").detail
