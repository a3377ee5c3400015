"""The seed's published figures against the roofline bound on its own rig (2x RTX 3090): from
the seed recipe's files and its models' config.json in kit's hub cache, by hand; in `kit report
compare --reference`, in the reproduction verdict's notes, and for a GPU kit has no figure for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.recipe import load_recipe
from kit.report import Report
from kit.report.files import read_report, write_report
from kit.report.reference import compare_with_reference
from kit.report.reproduction import judge

SEED = Path("recipes") / "club3090-qwen3.8-27b-2x3090-dflash2.yaml"
RTX3090_GBPS = 936.0  # the GA102 whitepaper's figure for the RTX 3090


@pytest.fixture
def a(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports/cpu-tiny-a.json", allow_unsigned=True)[0]


@pytest.fixture
def seed_run(a: Report, fixtures_dir: Path, seed_pins: list[str]) -> Report:
    """A run of the seed recipe, pinned as `kit reproduce` pins it (its records: cpu-tiny's)."""
    pinned = load_recipe(fixtures_dir / SEED, seed_pins).recipe
    return a.model_copy(
        update={"recipe": pinned.to_json_dict(), "model": None, "quantization": None}
    )


def mean_context(run: Report, prompt: str) -> tuple[float, float]:
    """The run's mean context (prompt + completion / 2) and completion tokens of ``prompt``."""
    assert run.bench is not None
    done = [
        r for r in run.bench.records if r.prompt == prompt and r.phase == "measured" and r.usable
    ]
    context = sum((r.prompt_tokens or 0) + (r.completion_tokens or 0) / 2 for r in done)
    return context / len(done), sum(r.completion_tokens or 0 for r in done) / len(done)


def cached(cache: Path, repo: str, rev: str) -> dict[str, Any]:
    """A config.json in kit's hub cache, as the hub client stores it."""
    path = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / rev / "config.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def seed_step_s(cache: Path, context: float) -> float:
    """T for the seed by hand: its model's cached config.json at the recipe's AutoRound W4 g128,
    TP=2, int8 KV, plus one pass of its bf16 DFlash2 draft and the shared lm_head, at 936 GB/s."""
    cfg = cached(cache, "Qwen/Qwen3.8-27B", "a" * 40)
    draft_cfg = cached(cache, "incoai/Qwen3.8-27B-DFlash2", "b" * 40)
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, kv_heads, head_dim = (
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
    )
    layer = h * head_dim * (heads + 2 * kv_heads) + heads * head_dim * h + 3 * h * inter
    weights = layers * layer
    packed = weights / 2  # 4 bits a weight
    meta = weights * (2 + 0.5) / 128  # an fp16 scale and a 4-bit zero point per 128 weights
    norms, final = layers * 2 * h * 2, h * 2
    lm_head = cfg["vocab_size"] * h * 2
    replicated = norms + final
    kv = 2 * layers * kv_heads * head_dim * 1  # int8_per_token_head
    target = (packed + meta + norms + lm_head + final - replicated) / 2 + replicated
    target += h * 2 * 8 / 2 + kv * context / 2  # 8 embedding rows (1 + 7 verified), the KV
    d_layers = draft_cfg["num_hidden_layers"]
    d_norms = d_layers * 2 * h * 2
    d_replicated = d_norms + final
    draft = (d_layers * layer * 2 + d_norms + final - d_replicated) / 2 + d_replicated  # bf16
    draft += lm_head / 2 + 2 * d_layers * kv_heads * head_dim * context / 2  # shared head, KV
    return (target + draft) / (RTX3090_GBPS * 1e9)


def test_the_seed_bound_from_its_own_files(
    seed_run: Report, fixtures_dir: Path, cached_models: Path
) -> None:
    check = compare_with_reference(seed_run, fixtures_dir / SEED).plausibility
    assert check is not None and check.missing == []
    assert check.rig is not None and (check.rig.gpu, check.rig.gpus) == ("RTX 3090", 2)
    assert check.rig.bandwidth_gbps == RTX3090_GBPS and check.rig.tensor_parallel_size == 2
    length = 1 + 50512 / 15088  # the reference's counters: 4.35 tokens per step
    assert check.acceptance_length == pytest.approx(length)
    assert (check.spec_method, check.num_speculative_tokens) == ("dflash2", 7)
    assert check.bytes_from is not None and check.bytes_from.startswith(
        "estimated from the config.json of Qwen/Qwen3.8-27B@aaaaaaaaaaaa and "
        "incoai/Qwen3.8-27B-DFlash2@bbbbbbbbbbbb"
    )
    published = {"narrative": 120.08, "code": 218.33}
    steps, tokens = {}, {}
    for p in check.prompts:
        context, tokens[p.prompt] = mean_context(seed_run, p.prompt)
        step = steps[p.prompt] = seed_step_s(cached_models, context)
        assert p.published_tps == published[p.prompt]
        assert p.context_tokens == pytest.approx(context)
        assert p.step_ms == pytest.approx(step * 1000)
        assert p.bound_tps == pytest.approx(length / step)
        assert p.fraction_pct == pytest.approx(published[p.prompt] * step / length * 100)
        assert p.ceiling_tps == pytest.approx(8 / step)
        assert not p.above_bound
    # the narrative/code gap at one efficiency: L pooled over both prompts' draft steps
    e = sum(tokens.values()) / (
        length * sum(tokens[n] / (published[n] * steps[n]) for n in published)
    )
    assert check.efficiency_pct == pytest.approx(e * 100)
    by = {p.prompt: p for p in check.prompts}
    for name, tps in published.items():
        assert by[name].needed_length == pytest.approx(tps * steps[name] / e)
    code_l, narrative_l = by["code"].needed_length, by["narrative"].needed_length
    assert code_l is not None and narrative_l is not None
    assert code_l / narrative_l == pytest.approx(
        218.33 / 120.08 * steps["code"] / steps["narrative"]
    )
    assert check.flags == []


def test_compare_reference_prints_the_bound_and_fraction(
    seed_run: Report, fixtures_dir: Path, cached_models: Path, tmp_path: Path
) -> None:
    path = write_report(seed_run, tmp_path / "run")
    args = ["report", "compare", str(path), "--reference", str(fixtures_dir / SEED)]
    out = CliRunner().invoke(main, [*args, "--allow-unsigned"])
    # a CPU run against the published 2x3090 figures: DIFFERENT (exit 4), the bound beside it
    assert out.exit_code == 4, out.output
    check = compare_with_reference(seed_run, fixtures_dir / SEED).plausibility
    assert check is not None
    text = out.stdout
    assert (
        "roofline bound on the reference's rig (kit.roofline.plausible)\n  a model, not a" in text
    )
    for p in check.prompts:
        line = (
            f"  {p.prompt}: published {p.published_tps:,.2f} tok/s; bound {p.bound_tps:,.1f} "
            f"tok/s (T = {p.step_ms:.2f} ms"
        )
        assert line in text
        assert f"; {p.fraction_pct:.1f} % of the bound; ceiling " in text
    assert "  rig: 2x RTX 3090, TP=2, 936 GB/s per GPU (datasheet: NVIDIA Ampere GA102" in text
    assert "  formula: T = (B_target + B_draft) per GPU / BW per GPU" in text
    assert "(docs/roofline.md)" in text


def test_a_reference_above_its_bound_is_flagged(
    seed_run: Report, fixtures_dir: Path, cached_models: Path, tmp_path: Path
) -> None:
    seed = compare_with_reference(seed_run, fixtures_dir / SEED).plausibility
    assert seed is not None
    narrative, code = seed.prompts
    above = round(code.bound_tps * 1.2, 2)  # above the bound at L = 4.35, below all 7 accepted
    impossible = round(narrative.ceiling_tps * 1.1, 2)  # above the bound at every token accepted
    fast = tmp_path / "fast.yaml"
    text = (fixtures_dir / SEED).read_text()
    text = text.replace("decode_tps: 218.33", f"decode_tps: {above}")
    fast.write_text(text.replace("decode_tps: 120.08", f"decode_tps: {impossible}"))
    check = compare_with_reference(seed_run, fast).plausibility
    assert check is not None
    flagged = {p.prompt: p for p in check.prompts}
    assert flagged["code"].above_bound and not flagged["code"].above_ceiling
    assert flagged["narrative"].above_ceiling
    assert check.flags[:2] == [
        f"narrative: {impossible:,.2f} tok/s is above the bound at every draft token accepted "
        f"({narrative.ceiling_tps:,.1f} tok/s): impossible on this rig by this model",
        f"code: {above:,.2f} tok/s is above its bound at the stated L = 4.35 "
        f"({code.bound_tps:,.1f} tok/s, 120 %)",
    ]
    assert check.flags[2].startswith("the stated acceptance explains the published figures only")
    assert f"  ABOVE ITS BOUND: {check.flags[1]}" in check.lines()
    # the verdict on a re-run of a report whose recipe published such figures says so too
    published = load_recipe(fast).recipe.to_json_dict()["reference"]
    original = seed_run.model_copy(update={"recipe": {**seed_run.recipe, "reference": published}})
    assert f"  note: ABOVE ITS BOUND: {check.flags[1]}" in judge(original, seed_run).text()


def test_an_unknown_gpu_is_said_not_a_crash(
    seed_run: Report, fixtures_dir: Path, cached_models: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-rig.yaml"
    text = (
        (fixtures_dir / SEED)
        .read_text()
        .replace("2x RTX 3090 (24 GB), PCIe", "2x Foo 9000 (24 GB), PCIe")
    )
    other.write_text(text)
    check = compare_with_reference(seed_run, other, force=True).plausibility
    assert check is not None and check.prompts == []
    (why,) = check.missing
    assert why.startswith("no bandwidth figure for GPU Foo 9000 (kit's table: RTX 3090, ")
    assert check.lines()[2] == f"  not computed: {why}"
    path = write_report(seed_run, tmp_path / "run")
    out = CliRunner().invoke(
        main, ["report", "compare", str(path), "--reference", str(other), "--allow-unsigned"]
    )
    assert out.exit_code == 4, out.output  # DIFFERENT from the published figures
    assert "  not computed: no bandwidth figure for GPU Foo 9000" in out.stdout


def test_no_config_says_where_to_get_it(
    seed_run: Report, fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "empty"))
    check = compare_with_reference(seed_run, fixtures_dir / SEED).plausibility
    assert check is not None
    assert check.missing == [
        "no bytes for the model: config.json of Qwen/Qwen3.8-27B@aaaaaaaaaaaa is not in kit's "
        "hub cache (kit preflight RECIPE fetches it, a few KB)"
    ]


def test_the_reproduction_verdict_notes_the_bound(
    seed_run: Report, a: Report, fixtures_dir: Path, cached_models: Path
) -> None:
    verdict = judge(seed_run, seed_run)
    check = compare_with_reference(seed_run, fixtures_dir / SEED).plausibility
    assert check is not None
    narrative, code = check.prompts
    assert verdict.notes[0] == (
        "roofline bound on the reference's rig (a model, not a measurement): narrative 120.08 "
        f"tok/s is {narrative.fraction_pct:.1f} % of {narrative.bound_tps:,.1f}; code 218.33 "
        f"tok/s is {code.fraction_pct:.1f} % of {code.bound_tps:,.1f} (2x RTX 3090 at 936 GB/s "
        "datasheet, TP=2, L = 4.35)"
    )
    assert verdict.notes[1].startswith(
        f"at one efficiency for every prompt (e = {check.efficiency_pct:.1f} %) the published "
        f"figures need L = {narrative.needed_length:.2f} (narrative), "
    )
    assert "  note: roofline bound on the reference's rig" in verdict.text()
    # a recipe without published figures: no notes, and none written
    plain = judge(a, a)
    assert plain.notes == [] and "notes" not in plain.model_dump()
