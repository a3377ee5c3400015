"""Roofline: bytes per decode step from safetensors headers, and the bound, by hand."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from kit.errors import BadInputError
from kit.metrics import spec_decode_from_counts
from kit.roofline import (
    BoundSetup,
    GpuBandwidth,
    bandwidth_source,
    draft_passes,
    model_bytes,
    prompt_bound,
    read_safetensors_header,
)

BYTES = {"BF16": 2, "F16": 2, "I32": 4}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A real safetensors file (zeros) with the given names, dtypes and shapes."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(offset))


# A 2-layer Qwen3 (hidden 256, intermediate 512, 4 heads / 2 KV heads of 64, vocab 1024) in
# AutoRound's auto_gptq packing: qweight I32 [in/8, out], qzeros I32 [in/128, out/8],
# scales F16 [in/128, out].
PROJ = {  # name: (in, out)
    "self_attn.q_proj": (256, 256),
    "self_attn.k_proj": (256, 128),
    "self_attn.v_proj": (256, 128),
    "self_attn.o_proj": (256, 256),
    "mlp.gate_proj": (256, 512),
    "mlp.up_proj": (256, 512),
    "mlp.down_proj": (512, 256),
}


def target_tensors() -> dict[str, tuple[str, list[int]]]:
    t: dict[str, tuple[str, list[int]]] = {}
    for layer in range(2):
        p = f"model.layers.{layer}."
        for name, (i, o) in PROJ.items():
            t[p + name + ".qweight"] = ("I32", [i // 8, o])
            t[p + name + ".qzeros"] = ("I32", [i // 128, o // 8])
            t[p + name + ".scales"] = ("F16", [i // 128, o])
        t[p + "input_layernorm.weight"] = ("BF16", [256])
        t[p + "post_attention_layernorm.weight"] = ("BF16", [256])
        t[p + "self_attn.q_norm.weight"] = ("BF16", [64])
        t[p + "self_attn.k_norm.weight"] = ("BF16", [64])
    t["model.embed_tokens.weight"] = ("BF16", [1024, 256])
    t["lm_head.weight"] = ("BF16", [1024, 256])
    t["model.norm.weight"] = ("BF16", [256])
    return t


CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 1024,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "quantization_config": {
        "quant_method": "auto-round",
        "bits": 4,
        "group_size": 128,
        "sym": True,
        "packing_format": "auto_round:auto_gptq",
    },
}

# by hand, per layer: qweight 32768+16384+16384+32768+65536+65536+65536 = 294912;
# scales 1024+512+512+1024+2048+2048+2048 = 9216; qzeros 256+128+128+256+512+512+512 = 2304;
# norms 512+512+128+128 = 1280
QUANTIZED = 2 * 294912
META = 2 * (9216 + 2304)
DENSE = 2 * 1280
LM_HEAD = 1024 * 256 * 2
FINAL_NORM = 512
PER_PASS = QUANTIZED + META + DENSE + LM_HEAD + FINAL_NORM  # 1,140,224
KV_TOKEN = 2 * 2 * 2 * 64 * 2  # K and V x layers x kv heads x head_dim x bf16


@pytest.fixture
def target_dir(tmp_path: Path) -> Path:
    d = tmp_path / "target"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    write_safetensors(d / "model.safetensors", target_tensors())
    return d


@pytest.fixture
def draft_dir(tmp_path: Path) -> Path:
    """A 1-layer DFlash draft as kit synthesises it: bf16, no embedding, no lm_head."""
    d = tmp_path / "draft"
    d.mkdir()
    cfg = {k: v for k, v in CONFIG.items() if k != "quantization_config"}
    cfg.update(architectures=["DFlashDraftModel"], num_hidden_layers=1)
    (d / "config.json").write_text(json.dumps(cfg))
    t: dict[str, tuple[str, list[int]]] = {}
    for name, (i, o) in PROJ.items():
        t["layers.0." + name + ".weight"] = ("BF16", [o, i])
    for n in ("input_layernorm", "post_attention_layernorm"):
        t[f"layers.0.{n}.weight"] = ("BF16", [256])
    t["layers.0.self_attn.q_norm.weight"] = ("BF16", [64])
    t["layers.0.self_attn.k_norm.weight"] = ("BF16", [64])
    t["fc.weight"] = ("BF16", [256, 256])
    t["hidden_norm.weight"] = ("BF16", [256])
    t["norm.weight"] = ("BF16", [256])
    write_safetensors(d / "model.safetensors", t)
    return d


def test_target_bytes_by_hand(target_dir: Path) -> None:
    mb = model_bytes(target_dir)
    assert mb.quantized_bytes == QUANTIZED == 589824
    assert mb.quant_meta_bytes == META == 23040
    assert mb.dense_layer_bytes == DENSE
    assert mb.lm_head_bytes == LM_HEAD
    assert mb.embedding_bytes == 1024 * 256 * 2
    assert mb.embedding_row_bytes == 512
    assert mb.other_bytes == FINAL_NORM
    assert mb.per_pass_bytes == PER_PASS == 1140224
    assert mb.replicated_bytes == DENSE + FINAL_NORM  # the 1-D norms
    assert mb.kv_bytes_per_token == KV_TOKEN == 1024
    assert mb.quantization == {
        "quant_method": "auto-round",
        "bits": 4,
        "group_size": 128,
        "sym": True,
        "packing_format": "auto_round:auto_gptq",
    }
    # fp8 KV cache halves the KV bytes
    assert model_bytes(target_dir, kv_cache_dtype="fp8").kv_bytes_per_token == 512


def test_plain_bound_by_hand(target_dir: Path) -> None:
    mb = model_bytes(target_dir)
    r = prompt_bound(
        "narrative",
        100.0,
        400.0,
        None,
        BoundSetup(target=mb, draft=None, passes=0, k=0, tp=1, bandwidth_gbps=1000.0),
    )
    step_bytes = PER_PASS + 512 + KV_TOKEN * 100  # weights + one embedding row + KV of 100
    assert r.target_pass_bytes_per_gpu == step_bytes == 1243136
    assert r.bound_tps == pytest.approx(1e12 / step_bytes)
    assert r.plain_bound_tps == pytest.approx(1e12 / step_bytes)
    assert r.efficiency_pct == pytest.approx(400.0 / (1e12 / step_bytes) * 100)
    assert r.acceptance_length is None


def test_speculative_bound_by_hand(target_dir: Path, draft_dir: Path) -> None:
    target, draft = model_bytes(target_dir), model_bytes(draft_dir, "draft")
    draft_tensors = (131072 + 65536 + 65536 + 131072 + 3 * 262144) + 1280 + 131072 + 1024
    assert draft.per_pass_bytes == draft_tensors == 1313024
    assert draft.lm_head_bytes == 0  # shares the target's
    assert draft.kv_bytes_per_token == 2 * 1 * 2 * 64 * 2
    assert draft.replicated_bytes == 131072 + 1280 + 1024  # fc + the 1-D norms
    spec = spec_decode_from_counts(drafts=100, draft_tokens=700, accepted=50, per_pos=[50])
    assert spec.acceptance_length == 1.5
    r = prompt_bound(
        "code",
        100.0,
        200.0,
        spec,
        BoundSetup(
            target=target,
            draft=draft,
            passes=draft_passes("dflash", 7),
            k=7,
            tp=1,
            bandwidth_gbps=1000.0,
        ),
    )
    b_target = PER_PASS + 512 * 8 + KV_TOKEN * 100  # verifies 1 + 7 tokens
    b_draft = 1313024 + LM_HEAD + 512 * 100  # draft tensors + shared lm_head + draft KV
    assert r.target_pass_bytes_per_gpu == b_target
    assert r.draft_step_bytes_per_gpu == b_draft
    assert r.step_bound_ms == pytest.approx((b_target + b_draft) / 1e12 * 1000)
    assert r.bound_tps == pytest.approx(1.5 * 1e12 / (b_target + b_draft))
    assert r.plain_bound_tps == pytest.approx(1e12 / (PER_PASS + 512 + KV_TOKEN * 100))


def test_tensor_parallel_halves_sharded_bytes(target_dir: Path) -> None:
    mb = model_bytes(target_dir)
    replicated = DENSE + FINAL_NORM
    assert mb.per_gpu_pass_bytes(2) == (PER_PASS - replicated) / 2 + replicated
    r1 = prompt_bound(
        "p", 100.0, None, None, BoundSetup(mb, None, passes=0, k=0, tp=1, bandwidth_gbps=1000)
    )
    r2 = prompt_bound(
        "p", 100.0, None, None, BoundSetup(mb, None, passes=0, k=0, tp=2, bandwidth_gbps=1000)
    )
    assert (
        r2.target_pass_bytes_per_gpu
        == (PER_PASS - replicated) / 2 + replicated + (512 + KV_TOKEN * 100) / 2
    )
    assert 1.9 < r2.bound_tps / r1.bound_tps < 2.0  # replicated norms keep it under 2x
    assert r1.efficiency_pct is None


def test_draft_passes() -> None:
    assert draft_passes("dflash", 7) == 1
    assert draft_passes("dflash2", 7) == 1
    assert draft_passes("draft_model", 7) == 7
    assert draft_passes("ngram", 7) == 0
    assert draft_passes("none", 0) == 0


def test_bandwidth_source_prefers_the_slowest_measured_gpu() -> None:
    gpus = [
        GpuBandwidth(
            gpu=i,
            name="NVIDIA H200",
            buffer_bytes=2 << 30,
            copies=20,
            median_gbps=v,
            max_gbps=v + 10,
        )
        for i, v in enumerate((4300.0, 4250.0))
    ]
    src = bandwidth_source(gpus, 4800.0)
    assert src is not None
    assert (src.used_gbps, src.used_source, src.datasheet_gbps) == (4250.0, "measured", 4800.0)
    fallback = bandwidth_source([], 4800.0, "no GPU")
    assert fallback is not None
    assert (fallback.used_source, fallback.measure_error) == ("datasheet", "no GPU")
    assert bandwidth_source([], None) is None


def test_header_errors(tmp_path: Path) -> None:
    bad = tmp_path / "x.safetensors"
    bad.write_bytes(b"\x01")
    with pytest.raises(BadInputError, match="too short"):
        read_safetensors_header(bad)
    with pytest.raises(BadInputError, match=r"config\.json"):
        model_bytes(tmp_path)


def test_the_efficiency_is_of_the_headline(target_dir: Path, fixtures_dir: Path) -> None:
    """The measured figure set against the bound is the prompt's headline (the median of the
    runs it uses), the figure kit leads with, not the mean of every run."""
    from kit.report.files import read_report
    from kit.roofline import Bandwidth, Deployment, roofline

    report = read_report(fixtures_dir / "reports" / "cpu-tiny-a.json", allow_unsigned=True)[0]
    assert report.bench is not None
    bw = Bandwidth(
        method="datasheet",
        measured=[],
        datasheet_gbps=1000.0,
        used_gbps=1000.0,
        used_source="datasheet",
    )
    d = Deployment(target_dir, None, "none", 0, 1, "auto")
    roof = roofline(report.bench, d, bw)
    for p, row in zip(report.bench.prompts, roof.prompts, strict=True):
        assert p.headline is not None and p.headline.value is not None
        assert p.headline.value != p.decode_tps.mean  # the fixture tells the two apart
        assert row.measured_decode_tps == p.headline.value
        assert row.efficiency_pct == pytest.approx(p.headline.value / row.bound_tps * 100)


SWEEP = "h100-acceptance-sweep-2026-12-07"


def test_the_step_model_predicts_the_sweeps_speedup(fixtures_dir: Path) -> None:
    """The 2026-12-07 H100 sweep (signed reports): from the no-draft baseline's step the step
    model predicts each DFlash2 point's speed-up within 10 %, where the bytes alone fall short
    by more than 10 %; each report's own step model predicts the baseline's speed within 10 %."""
    from kit.report.files import read_report
    from kit.roofline.model import Pass, predicted_speedup, step_model
    from kit.signing import load_public_key

    key = load_public_key(fixtures_dir / "examples" / "keys" / "h100-2026-12-07.pub")

    def run(name: str) -> tuple[Any, dict[str, Any]]:
        report = read_report(fixtures_dir / "results" / SWEEP / name / "report.json", key)[0]
        assert report.bench is not None and report.roofline is not None
        assert report.host is not None and "H100" in report.host.gpus[0].name
        return report, {p.prompt: p for p in report.roofline.prompts}

    base, base_roof = run("nodraft")
    assert base.bench is not None
    plain_tps = {p.prompt: p.headline.value for p in base.bench.prompts if p.headline}
    for name in ("acc-0", "seed", "acc-7"):
        report, roof = run(name)
        assert report.roofline is not None and report.roofline.draft is not None
        layers = report.roofline.target.layers
        draft_layers = report.roofline.draft.layers * report.roofline.draft_passes_per_step
        for p in report.bench.prompts if report.bench else []:
            sd, h, r = p.spec_decode, p.headline, roof[p.prompt]
            assert sd is not None and sd.acceptance_length and h is not None and h.value
            measured = h.value / plain_tps[p.prompt]
            plain_step_ms = 1000 / plain_tps[p.prompt]
            predicted = predicted_speedup(
                sd.acceptance_length,
                plain_step_ms,
                Pass(layers, base_roof[p.prompt].target_pass_bytes_per_gpu),
                Pass(
                    layers + draft_layers, r.target_pass_bytes_per_gpu + r.draft_step_bytes_per_gpu
                ),
                base.roofline.bandwidth.used_gbps if base.roofline else 0.0,
            )
            assert abs(predicted.speedup / measured - 1) < 0.10, (name, p.prompt)
            assert predicted.bytes_only / measured - 1 < -0.10, (name, p.prompt)
            # the run's own model (as the roofline of a report written now carries it): the
            # no-draft speed it predicts from this run alone, against the baseline's
            bw = report.roofline.bandwidth.used_gbps
            own = step_model(
                sd.acceptance_length / h.value * 1000,
                sd.acceptance_length,
                Pass(
                    layers + draft_layers, r.target_pass_bytes_per_gpu + r.draft_step_bytes_per_gpu
                ),
                Pass(layers, base_roof[p.prompt].target_pass_bytes_per_gpu),
                draft_layers,
                bw,
            )
            assert abs(own.predicted_plain_tps / plain_tps[p.prompt] - 1) < 0.10, (name, p.prompt)
            assert own.predicted_speedup is not None
            assert abs(own.predicted_speedup / measured - 1) < 0.10, (name, p.prompt)
