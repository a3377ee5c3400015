"""kit.model.dflash2: the synthetic DFlash2 draft, built for real on CPU beside a tiny target,
and the algebra of its deterministic variants, checked with a small pure-torch re-implementation
of the pieces of vLLM 0.28.0's DFlash2 draft that decide what it drafts
(``model_executor/models/qwen3_dflash2.py``: ``_grouped_conv``, the decoder layer's order,
``_score_edges``; ``dflash2/speculator.py``: the greedy walk). Nothing here runs vLLM.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kit.model import dflash2
from kit.model.synthetic import SYNTH_VERSION, draft_spec, spec_key, synthesise_draft, target_spec
from kit.recipe import DFlash2Draft, SyntheticDraft, SyntheticModel, SyntheticShape, load_recipe

torch = pytest.importorskip("torch")  # kit[build]: the model stage's own dependencies
F = torch.nn.functional
load_file = pytest.importorskip("safetensors.torch").load_file

SHAPE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 3,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "vocab_size": 512,
    "max_position_embeddings": 512,
}
PLAIN = SyntheticModel(source="synthetic", shape=SyntheticShape(**SHAPE))
TOKEN0_TARGET = PLAIN.model_copy(update={"zero_final_norm": True, "mask_picks_token0": True})
V1_NAMES = {
    "fc.weight",
    "hidden_norm.weight",
    "norm.weight",
    *(
        f"layers.0.{n}.weight"
        for n in (
            "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
            "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj", "mlp.up_proj",
            "mlp.down_proj", "input_layernorm", "post_attention_layernorm",
        )
    ),
}  # fmt: skip
STEPS = 7  # num_speculative_tokens: the query is the bonus token and 7 mask tokens


def draft(**d2: Any) -> SyntheticDraft:
    return SyntheticDraft(source="synthetic", dflash2=DFlash2Draft(**d2) if d2 else None)


@pytest.fixture(scope="module")
def kit_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("kit-home")
        mp.setenv("KIT_HOME", str(home))
        yield home


def build(target: SyntheticModel, d: SyntheticDraft, method: str = "dflash2") -> Path:
    return synthesise_draft(target, d, method)[0]


def target_dir(kit_home: Path, target: SyntheticModel) -> Path:
    return kit_home / "models" / f"synthetic-{spec_key(target_spec(target))}"


def config(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((path / "config.json").read_text())
    return data


# ---------------------------------------------------------------------------------------------
# the checkpoint


def test_config_keys_are_v1_plus_dflash2(kit_home: Path) -> None:
    v1, v2 = build(PLAIN, draft(), "dflash"), build(PLAIN, draft())
    c1, c2 = config(v1), config(v2)
    assert c1["architectures"] == ["DFlashDraftModel"]
    assert c2["architectures"] == ["DFlash2DraftModel"]
    assert c2["dflash_config"] == {
        **c1["dflash_config"],
        "conv_kernel_size": 2,
        "conv_group_size": 16,
        "selector_rank": 256,
        "selector_top_k": 16,
    }
    assert set(c1["dflash_config"]) == {"mask_token_id", "target_layer_ids"}
    rest = ("architectures", "dflash_config")
    assert {k: v for k, v in c2.items() if k not in rest} == {
        k: v for k, v in c1.items() if k not in rest
    }
    assert v1.name.startswith("dflash-draft-") and v2.name.startswith("dflash2-draft-")


@pytest.mark.parametrize(
    ("settings", "taps", "groups", "rank"),
    [({}, 2, 128 // 16, 256), ({"conv_kernel_size": 3, "conv_group_size": 32, "selector_rank": 8,
      "selector_top_k": 4}, 3, 128 // 32, 8)],
)  # fmt: skip
def test_tensor_names_and_shapes(
    kit_home: Path, settings: dict[str, Any], taps: int, groups: int, rank: int
) -> None:
    tensors = load_file(str(build(PLAIN, draft(**settings)) / "model.safetensors"))
    h, v = SHAPE["hidden_size"], SHAPE["vocab_size"]
    added = {
        "layers.0.attention_conv.base_kernel": [2, taps, h],
        "layers.0.attention_conv.kernel_projection.weight": [2 * taps * groups, h],
        "layers.0.mlp_conv.base_kernel": [2, taps, h],
        "layers.0.mlp_conv.kernel_projection.weight": [2 * taps * groups, h],
        "candidate_selector.predecessor_codebook": [v, rank],
        "candidate_selector.successor_codebook": [v, rank],
        "candidate_selector.hidden_projection.weight": [rank, h],
    }
    assert set(tensors) == V1_NAMES | set(added)
    assert {k: list(tensors[k].shape) for k in added} == added
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}


@pytest.mark.parametrize("weights", ["random", "as_v1", "token0"])
def test_v1_tensors_are_those_of_the_v1_draft_of_the_same_seed(
    kit_home: Path, weights: str
) -> None:
    target = TOKEN0_TARGET if weights == "token0" else PLAIN
    v1 = load_file(str(build(target, draft(), "dflash") / "model.safetensors"))
    v2 = load_file(str(build(target, draft(weights=weights)) / "model.safetensors"))
    silenced = {"layers.0.self_attn.o_proj.weight", "layers.0.mlp.down_proj.weight"}
    for name in sorted(V1_NAMES):
        if weights == "token0" and name in silenced:
            assert not v2[name].any(), name
        else:
            assert torch.equal(v1[name], v2[name]), name
    conv = v2["layers.0.attention_conv.kernel_projection.weight"]
    selector = v2["candidate_selector.hidden_projection.weight"]
    assert bool(conv.any()) == bool(selector.any()) == (weights == "random")


# ---------------------------------------------------------------------------------------------
# cache keys


def test_v1_cache_keys_are_unchanged(fixtures_dir: Path) -> None:
    # committed reports name the H200 Llama-shaped target's directory (experiments/results/
    # h200-llama8b-bf16-sweep-2026-12-02*/vllm-bench-*.json, tokenizer_id); the cpu-tiny target
    # and its draft are the keys kit gave them before DFlash2 existed
    def recipe(name: str) -> Any:
        return load_recipe(fixtures_dir / "recipes" / f"{name}.yaml").recipe

    llama = recipe("h200-synthetic-llama8b-bf16-concurrency")
    assert spec_key(target_spec(llama.model)) == "be54685a05be2842"
    tiny = recipe("cpu-tiny")
    assert spec_key(target_spec(tiny.model)) == "57bb8edc6b0ecf63"
    identity = "dc49d2c92af2d18c43add1e879307cd433ecdf1e7de4f552358da4574d48fda5"
    kind, data, d2 = draft_spec(tiny.speculative.draft, identity, tiny.speculative.method)
    assert (kind, spec_key(data), d2) == ("dflash-draft", "2d374ac9b495c3e9", None)
    assert data == {
        "generator": SYNTH_VERSION, "target": identity, "source": "synthetic",
        "num_hidden_layers": 1, "block_size": 8, "target_layer_ids": None, "seed": 1,
        "zero_final_norm": False,
    }  # fmt: skip


def test_dflash2_cache_key_follows_every_setting() -> None:
    def key(d: SyntheticDraft, method: str = "dflash2") -> str:
        return spec_key(draft_spec(d, "t", method)[1])

    default = key(draft())
    assert key(draft(**DFlash2Draft().model_dump())) == default  # none means the defaults
    assert key(draft(), "dflash") != default
    changed = [
        key(draft(**{field: value}))
        for field, value in [
            ("conv_kernel_size", 3), ("conv_group_size", 32), ("selector_rank", 128),
            ("selector_top_k", 8), ("weights", "as_v1"), ("weights", "token0"),
        ]
    ]  # fmt: skip
    assert len({default, *changed}) == 1 + len(changed)
    assert draft_spec(draft(), "t", "dflash2")[0] == "dflash2-draft"


def test_mask_picks_token0_changes_the_target_key_and_only_when_set() -> None:
    assert "mask_picks_token0" not in target_spec(PLAIN)
    assert target_spec(TOKEN0_TARGET)["mask_picks_token0"] is True
    zero = PLAIN.model_copy(update={"zero_final_norm": True})
    assert spec_key(target_spec(zero)) != spec_key(target_spec(TOKEN0_TARGET))


# ---------------------------------------------------------------------------------------------
# a pure-torch DFlash2 draft, at one request's query (bonus token + 7 mask tokens)


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    y = x.float()
    return (y * (y.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * weight.float()).to(x.dtype)


def grouped_conv(
    x: torch.Tensor, delta: torch.Tensor, base: torch.Tensor, block: int, groups: int
) -> torch.Tensor:
    """vLLM 0.28.0 ``_grouped_conv``: tap 0 scales the position, tap t the one t before it
    within the block; coefficients = per-channel base + per-group delta."""
    taps = base.shape[0]
    blocks = x.unflatten(-1, (groups, x.shape[-1] // groups))
    coef = base.view(1, taps, groups, -1) + delta.unsqueeze(-1)
    out = coef[:, 0] * blocks
    position = torch.arange(x.shape[0]) % block
    for tap in range(1, taps):
        shifted = F.pad(blocks[:-tap], (0, 0, 0, 0, tap, 0))
        out = out + coef[:, tap] * shifted * (position >= tap).view(-1, 1, 1)
    return out.flatten(-2)


class Draft:
    """The draft's forward at the query positions (attention without RoPE: position encoding
    changes what attention adds, never whether a zero o_proj removes it)."""

    def __init__(self, path: Path, tdir: Path, dtype: torch.dtype) -> None:
        self.cfg = config(path)
        self.w = {k: v.to(dtype) for k, v in load_file(str(path / "model.safetensors")).items()}
        target = load_file(str(tdir / "model.safetensors"))
        self.embed = target["model.embed_tokens.weight"].to(dtype)
        self.lm_head = target["lm_head.weight"].to(dtype)
        self.target_norm = target["model.norm.weight"]
        self.dflash2 = self.cfg["architectures"] == [dflash2.ARCHITECTURE]
        self.dtype = dtype

    def conv(self, name: str, x: torch.Tensor, side: int, coef: torch.Tensor) -> torch.Tensor:
        d = self.cfg["dflash_config"]
        groups = self.cfg["hidden_size"] // d["conv_group_size"]
        base = self.w[name + ".base_kernel"][side]
        return grouped_conv(x, coef, base, 1 + STEPS, groups)

    def prepare(self, name: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        taps = self.cfg["dflash_config"]["conv_kernel_size"]
        coef = (x @ self.w[name + ".kernel_projection.weight"].T).reshape(x.shape[0], 2, taps, -1)
        return self.conv(name, x, 0, coef[:, 0]), coef[:, 1]

    def attention(self, p: str, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        c, w = self.cfg, self.w
        d, heads, kv_heads = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
        both = torch.cat([context, x])
        q = rms((x @ w[p + "q_proj.weight"].T).view(-1, heads, d), w[p + "q_norm.weight"])
        k = rms((both @ w[p + "k_proj.weight"].T).view(-1, kv_heads, d), w[p + "k_norm.weight"])
        v = (both @ w[p + "v_proj.weight"].T).view(-1, kv_heads, d)
        k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
        att = torch.einsum("qhd,khd->hqk", q, k).float().div(d**0.5).softmax(-1).to(x.dtype)
        out = torch.einsum("hqk,khd->qhd", att, v).reshape(x.shape[0], heads * d)
        return out @ w[p + "o_proj.weight"].T

    def mlp(self, p: str, x: torch.Tensor) -> torch.Tensor:
        w = self.w
        gate = F.silu(x @ w[p + "gate_proj.weight"].T)
        return (gate * (x @ w[p + "up_proj.weight"].T)) @ w[p + "down_proj.weight"].T

    def hidden(self, bonus: int, target_hidden: torch.Tensor) -> torch.Tensor:
        """The normed hidden states at the 7 mask positions (the ones sampled)."""
        w, mask = self.w, self.cfg["dflash_config"]["mask_token_id"]
        context = rms(target_hidden.to(self.dtype) @ w["fc.weight"].T, w["hidden_norm.weight"])
        x = self.embed[torch.tensor([bonus] + [mask] * STEPS)]
        residual: torch.Tensor | None = None
        for n in range(self.cfg["num_hidden_layers"]):
            p = f"layers.{n}."
            residual = x if residual is None else x + residual
            x = rms(residual, w[p + "input_layernorm.weight"])
            x, coef = self.prepare(p + "attention_conv", x) if self.dflash2 else (x, x)
            x = self.attention(p + "self_attn.", x, context)
            x = self.conv(p + "attention_conv", x, 1, coef) if self.dflash2 else x
            residual = x + residual
            x = rms(residual, w[p + "post_attention_layernorm.weight"])
            x, coef = self.prepare(p + "mlp_conv", x) if self.dflash2 else (x, x)
            x = self.mlp(p + "mlp.", x)
            x = self.conv(p + "mlp_conv", x, 1, coef) if self.dflash2 else x
        assert residual is not None
        return rms(x + residual, w["norm.weight"])[1:]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return (hidden @ self.lm_head.T).float()

    def walk(self, hidden: torch.Tensor, bonus: int) -> tuple[torch.Tensor, torch.Tensor]:
        """DFlash2's greedy draft: the top-K candidates and their unary logits at each step,
        the selector's [K, K] edge scores, then the walk from the anchor (bonus) token, taking
        the left-most maximum of the row of the previous choice. Returns (tokens, top-K)."""
        k = self.cfg["dflash_config"]["selector_top_k"]
        unary, ids = self.logits(hidden).topk(k, dim=-1)
        s = "candidate_selector."
        h = (hidden @ self.w[s + "hidden_projection.weight"].T).float()
        pred_ids = torch.cat([torch.full((1, k), bonus), ids[:-1]])
        pred = self.w[s + "predecessor_codebook"][pred_ids].float()
        succ = self.w[s + "successor_codebook"][ids].float()
        scores = unary[:, None, :] + torch.einsum("lpr,lcr->lpc", pred * h[:, None, :], succ)
        tokens, previous = [], 0
        for step in range(STEPS):
            index = int(scores[step, previous].argmax())
            tokens.append(int(ids[step, index]))
            previous = index
        return torch.tensor(tokens), ids

    def v1_tokens(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.logits(hidden).argmax(-1)


def context_states(cfg: dict[str, Any], seed: int = 0) -> torch.Tensor:
    """Random target hidden states for 5 context tokens, as fc takes them."""
    width = cfg["hidden_size"] * len(cfg["dflash_config"]["target_layer_ids"])
    return torch.randn(5, width, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_token0_draft_drafts_token0_as_the_strict_top1(kit_home: Path, dtype: torch.dtype) -> None:
    path = build(TOKEN0_TARGET, draft(weights="token0"))
    d = Draft(path, target_dir(kit_home, TOKEN0_TARGET), dtype)
    assert not d.target_norm.any()  # the target's logits are 0 whatever lm_head holds: token 0
    mask = d.cfg["dflash_config"]["mask_token_id"]
    c = dflash2.mask_hidden(d.embed[mask])
    for bonus in (0, 7, mask - 1):
        for seed in range(3):
            hidden = d.hidden(bonus, context_states(d.cfg, seed))
            # every drafted position holds RMSNorm(embed[mask]), whatever the context and bonus
            assert torch.allclose(hidden.float(), c.expand_as(hidden), rtol=1e-2, atol=1e-2)
            logits = d.logits(hidden)
            top2 = logits.topk(2, dim=-1).values
            assert (logits.argmax(-1) == 0).all() and (top2[:, 0] > top2[:, 1]).all()
            tokens, ids = d.walk(hidden, bonus)
            assert (ids[:, 0] == 0).all() and tokens.tolist() == [0] * STEPS
            if dtype == torch.float32:  # the Cauchy-Schwarz margin of token0_row
                assert (logits[:, 0] >= dflash2.TOKEN0_MARGIN * logits[:, 1:].abs().amax(-1)).all()


def test_without_mask_picks_token0_the_token0_draft_drafts_another_token(kit_home: Path) -> None:
    # control: the same draft over the plain target (lm_head row 0 random) has its own top-1
    d = Draft(build(PLAIN, draft(weights="token0")), target_dir(kit_home, PLAIN), torch.float32)
    hidden = d.hidden(3, context_states(d.cfg))
    assert (d.logits(hidden).argmax(-1) != 0).all()


def test_zero_norm_draft_leaves_a_tie_for_topk_to_break(kit_home: Path) -> None:
    # the DFlash v1 trick on a DFlash2 draft: every logit is 0, so which token the selector
    # sees first is torch.topk's choice among ties (docs/dflash2-backport.md, section 4)
    zero = SyntheticDraft(source="synthetic", zero_final_norm=True, dflash2=DFlash2Draft())
    d = Draft(build(PLAIN, zero), target_dir(kit_home, PLAIN), torch.float32)
    assert not d.logits(d.hidden(0, context_states(d.cfg))).any()


def test_as_v1_draft_drafts_what_its_tensors_draft_as_dflash_v1(kit_home: Path) -> None:
    tdir = target_dir(kit_home, PLAIN)
    v2 = Draft(build(PLAIN, draft(weights="as_v1")), tdir, torch.float32)
    v1 = Draft(build(PLAIN, draft(), "dflash"), tdir, torch.float32)
    assert v2.dflash2 and not v1.dflash2
    for bonus in (3, 11):
        for seed in range(3):
            context = context_states(v1.cfg, seed)
            hidden = v2.hidden(bonus, context)
            # identity convolutions: the very same hidden states as the v1 layer
            assert torch.equal(hidden, v1.hidden(bonus, context))
            tokens, _ = v2.walk(hidden, bonus)
            assert torch.equal(tokens, v1.v1_tokens(hidden))  # zero selector: the argmax


def test_random_draft_selector_can_leave_the_argmax(kit_home: Path) -> None:
    # control: with its random selector and convolutions the same draft is not v1's
    d = Draft(build(PLAIN, draft()), target_dir(kit_home, PLAIN), torch.float32)
    v1 = Draft(build(PLAIN, draft(), "dflash"), target_dir(kit_home, PLAIN), torch.float32)
    context = context_states(d.cfg)
    assert not torch.equal(d.hidden(3, context), v1.hidden(3, context))


def test_token0_row_beats_an_aligned_row_of_larger_norm() -> None:
    gen = torch.Generator().manual_seed(0)
    embed = torch.randn(64, generator=gen)
    c = dflash2.mask_hidden(embed)
    lm_head = torch.randn(10, 64, generator=gen) * 0.02
    lm_head[5] = 3 * c  # the worst case: another token along c, three times longer
    lm_head[0] = dflash2.token0_row(lm_head, embed)
    logits = lm_head @ c
    assert int(logits.argmax()) == 0
    assert logits[0] >= dflash2.TOKEN0_MARGIN * logits[1:].abs().max() * 0.999
