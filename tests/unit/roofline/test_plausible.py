"""The GPU bandwidth table, bytes estimated from a config.json shape, and a published figure
against the bound on its rig (kit.roofline.gpus, .estimate, .plausible), by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_roofline import CONFIG, target_tensors, write_safetensors

from kit.roofline import (
    GPUS,
    BoundSetup,
    GpuBandwidth,
    ModelBytes,
    Quant,
    bandwidth_source,
    config_bytes,
    find_gpu,
    model_bytes,
)
from kit.roofline.plausible import Published, ReferenceModel, plausibility, rig_bandwidth


@pytest.mark.parametrize(
    ("name", "gpu", "gbps"),
    [
        ("NVIDIA GeForce RTX 3090", "RTX 3090", 936),
        ("2x RTX 3090 (24 GB), PCIe Gen4 x16/x16, no NVLink", "RTX 3090", 936),
        ("NVIDIA GeForce RTX 3090 Ti", "RTX 3090 Ti", 1008),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 1008),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB", 1555),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB", 1555),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 1935),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM", 2039),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 3350),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2000),
        ("NVIDIA H200", "H200", 4800),
        ("NVIDIA L40S", "L40S", 864),
        ("NVIDIA A10G", "A10G", 600),
        ("NVIDIA A10", "A10", 600),
        ("NVIDIA L4", "L4", 300),
    ],
)
def test_gpu_names_find_their_datasheet_figure(name: str, gpu: str, gbps: float) -> None:
    found = find_gpu(name)
    assert found is not None and (found.name, found.bandwidth_gbps) == (gpu, gbps)


def test_every_gpu_has_a_source_and_a_bare_family_name_matches_none() -> None:
    assert len({g.name for g in GPUS}) == len(GPUS)
    assert all(g.bandwidth_gbps > 0 and g.source for g in GPUS)
    for bare in ("NVIDIA A100", "H100", "4x Foo 9000", "PCIe Gen4 x16"):
        assert find_gpu(bare) is None, bare


def test_a_measurement_records_the_tables_datasheet_figure_when_the_recipe_has_none() -> None:
    h200 = GpuBandwidth(
        gpu=0, name="NVIDIA H200", buffer_bytes=2 << 30, copies=20, median_gbps=4200, max_gbps=4250
    )
    src = bandwidth_source([h200], None)
    assert src is not None and (src.datasheet_gbps, src.used_gbps) == (4800.0, 4200)
    other = h200.model_copy(update={"name": "Foo 9000"})
    unknown = bandwidth_source([other], None)
    assert unknown is not None and unknown.datasheet_gbps is None


def test_rig_bandwidth_names_an_unknown_gpu() -> None:
    rig = rig_bandwidth("2x RTX 3090 (24 GB), PCIe Gen4", 2)
    assert not isinstance(rig, str)
    assert (rig.gpu, rig.gpus, rig.bandwidth_gbps, rig.tensor_parallel_size) == (
        "RTX 3090",
        2,
        936.0,
        2,
    )
    why = rig_bandwidth("4x Foo 9000 (48 GB), NVLink", 4)
    assert isinstance(why, str) and why.startswith("no bandwidth figure for GPU Foo 9000 (")
    assert rig_bandwidth(None, 1) == "the reference states no rig: no GPU to take a bandwidth from"


def test_the_estimate_from_the_shape_matches_the_headers(tmp_path: Path) -> None:
    """The 2-layer AutoRound checkpoint of test_roofline, estimated from its config.json alone:
    packed weights, scales and zero points, lm_head and KV exactly; the layer norms without the
    q/k norms the config does not announce."""
    config = {**CONFIG, "intermediate_size": 512}
    (tmp_path / "config.json").write_text(json.dumps(config))
    write_safetensors(tmp_path / "model.safetensors", target_tensors())
    headers = model_bytes(tmp_path)
    estimate = config_bytes(config, "target", Quant(bits=4, group_size=128))
    for field in ("quantized_bytes", "quant_meta_bytes", "lm_head_bytes", "other_bytes"):
        assert getattr(estimate, field) == getattr(headers, field), field
    assert estimate.embedding_row_bytes == headers.embedding_row_bytes
    assert estimate.kv_bytes_per_token == headers.kv_bytes_per_token
    assert headers.dense_layer_bytes - estimate.dense_layer_bytes == 2 * 2 * 64 * 2  # q/k norms
    assert estimate.per_pass_bytes / headers.per_pass_bytes == pytest.approx(1, abs=1e-3)


def test_a_hybrid_keeps_kv_in_its_attention_layers_only() -> None:
    hybrid = {
        **CONFIG,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "attn_output_gate": True,
    }
    mb = config_bytes(hybrid, "target", None, "int8_per_token_head")
    assert mb.kv_bytes_per_token == 2 * 1 * 2 * 64 * 1  # one attention layer, int8
    h = 256
    attn = h * 64 * (4 * 2 + 2 * 2) + 4 * 64 * h
    gdn = h * (2 * 2 * 32 + 2 * 4 * 32) + h * 2 * 4 + 4 * 32 * h
    mlp = 3 * h * 512
    mb = config_bytes(hybrid, "target", None)
    assert mb.dense_layer_bytes == 2 * (attn + mlp + 3 * (gdn + mlp)) + 4 * 2 * h * 2


# A model of round numbers: a step reads 1 GB per GPU without the draft, 0.25 GB with it
TARGET = ModelBytes(
    role="target",
    files=0,
    tensors=0,
    quantized_bytes=2 * 10**9,
    quant_meta_bytes=0,
    dense_layer_bytes=0,
    lm_head_bytes=0,
    embedding_bytes=0,
    embedding_row_bytes=0,
    other_bytes=0,
    replicated_bytes=0,
    layers=1,
    kv_heads=1,
    head_dim=1,
    kv_bytes_per_token=0,
)
DRAFT = TARGET.model_copy(update={"role": "draft", "quantized_bytes": 5 * 10**8})


def reference(length: float | None) -> ReferenceModel:
    rig = rig_bandwidth("2x RTX 3090", 2)
    assert not isinstance(rig, str)
    return ReferenceModel(
        setup=BoundSetup(TARGET, DRAFT, passes=1, k=7, tp=2, bandwidth_gbps=rig.bandwidth_gbps),
        rig=rig,
        bytes_from="by hand",
        spec_method="dflash2",
        acceptance_length=length,
        acceptance_from="by hand" if length else None,
    )


def test_the_bound_fraction_and_needed_acceptance_by_hand() -> None:
    step = (10**9 + 2.5 * 10**8) / 936e9  # target and draft bytes per GPU over its bandwidth
    check = plausibility(
        reference(4.0),
        [Published("narrative", 120.0, 500, "x", 1000), Published("code", 240.0, 400, "x", 800)],
    )
    narrative, code = check.prompts
    assert narrative.step_ms == pytest.approx(step * 1000)
    assert narrative.bound_tps == pytest.approx(4.0 / step)
    assert narrative.ceiling_tps == pytest.approx(8.0 / step)
    assert narrative.fraction_pct == pytest.approx(120.0 * step / 4.0 * 100)
    assert narrative.needed_at_bound == pytest.approx(120.0 * step)
    # one efficiency for both, at which L = 4 pooled over their draft steps gives both figures
    e = 1800 / (4.0 * (1000 / (120.0 * step) + 800 / (240.0 * step)))
    assert check.efficiency_pct == pytest.approx(e * 100)
    assert narrative.needed_length == pytest.approx(120.0 * step / e)
    assert code.needed_length == pytest.approx(2 * narrative.needed_length)
    steps = 1000 / narrative.needed_length + 800 / code.needed_length  # type: ignore[operator]
    assert 1800 / steps == pytest.approx(4.0)  # pooled back, the stated L
    assert check.flags == [] and not narrative.above_bound
    text = "\n".join(check.lines())
    assert "a model, not a measurement" in text
    assert f"narrative: published 120.00 tok/s; bound {4.0 / step:,.1f} tok/s" in text


def test_a_figure_above_its_bound_or_its_ceiling_is_flagged() -> None:
    step = (10**9 + 2.5 * 10**8) / 936e9
    bound, ceiling = 2.0 / step, 8.0 / step
    check = plausibility(
        reference(2.0),
        [
            Published("fits", bound * 0.5, 500, "x", 1000),
            Published("above", bound * 1.5, 500, "x", 1000),
            Published("impossible", ceiling * 1.1, 500, "x", 1000),
        ],
    )
    fits, above, impossible = check.prompts
    assert not fits.above_bound and above.above_bound and not above.above_ceiling
    assert impossible.above_bound and impossible.above_ceiling
    assert check.flags[0] == (
        f"above: {bound * 1.5:,.2f} tok/s is above its bound at the stated L = 2.00 "
        f"({bound:,.1f} tok/s, 150 %)"
    )
    assert check.flags[1].startswith(f"impossible: {ceiling * 1.1:,.2f} tok/s is above the bound")
    assert check.flags[1].endswith("impossible on this rig by this model")
    assert check.flags[2].startswith("the stated acceptance explains the published figures only")
    assert "ABOVE ITS BOUND: above: " in "\n".join(check.lines())


def test_without_a_stated_acceptance_the_bound_is_the_ceiling() -> None:
    check = plausibility(reference(None), [Published("p", 100.0, 500, "x", 1000)])
    (p,) = check.prompts
    assert p.bound_tps == pytest.approx(p.ceiling_tps)
    assert check.acceptance_length == 8.0 and check.efficiency_pct is None
    assert check.acceptance_from == "none stated: every draft token accepted, the ceiling"
