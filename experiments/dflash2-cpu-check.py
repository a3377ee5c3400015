"""CPU checks of patches/vllm-0.26.0 (DFlash2 backported to vLLM 0.26.0): no GPU, no vLLM.

    PYTHON experiments/dflash2-cpu-check.py SITE [--upstream SITE_0_28_0]

SITE is an unzipped vllm 0.26.0 wheel with the series applied; scripts/check-dflash2-series.sh
makes one and runs this. PYTHON needs torch and triton: the two Triton kernels run on the CPU
under the Triton interpreter (TRITON_INTERPRET=1, set here). The patched files are loaded on
their own, the rest of vLLM replaced by stand-ins (experiments/dflash2_harness.py). --upstream
SITE_0_28_0 (an unzipped vllm 0.28.0 wheel) also compares each piece with 0.28.0's DFlash2.

Each check prints PASS or FAIL; the exit status is 1 when one fails. What is checked:
  contract     parameter names and shapes are the study's checkpoint tables (docs/dflash2-
               backport.md), and 0.28.0's (its module loads the same state dict, strict)
  conv         the block convolutions against a loop reference; layer forward against 0.28.0's
  pair scores  the selector against a loop reference and against 0.28.0's
  top-k        LogitsProcessor.get_top_k_tokens at TP 1 and a simulated TP 2 with padded
               shards, against torch.topk over the full vocabulary (and 0.28.0's at TP 1)
  walk         greedy walk against a reference walk; probabilistic: each pick equals
               gumbel_sample's over the full vocabulary at the same (seed, position), picks
               follow softmax(scores / T) (chi-square), and equal 0.28.0's walk
  cache        draft-logit cache against a reference (scores / T, stale columns back to -inf,
               rows of no request untouched), and 0.28.0's cache divided by T
  speculator   DFlash2Speculator.__init__ and _generate_draft end to end on stand-in hidden
               states, against the reference pipeline
  wiring       is_causal precedence, the registry entry, the speculator selection and the
               forced V2 runner, each function taken out of its patched file and run alone
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
from dflash2_harness import (
    FAILED,
    STEPS,
    TOPK,
    ShardedHead,
    check,
    interpreter_bool_masks,
    load,
    ref_pairs,
    ref_walk,
    same,
    vllm_stubs,
)
from dflash2_kernel_checks import check_kernels
from dflash2_wiring_checks import check_wiring

H, GROUP, TAPS, RANK, VOCAB = 32, 8, 2, 8, 64
MODEL = "vllm/model_executor/models/qwen3_dflash2.py"
LOGITS = "vllm/model_executor/layers/logits_processor.py"
GUMBEL = "vllm/v1/worker/gpu/sample/gumbel.py"
SPEC = "vllm/v1/worker/gpu/spec_decode/dflash2/speculator.py"


def vllm_config(sample: str = "greedy", taps: int = TAPS, **settings: Any) -> Any:
    dflash_config = dict(
        conv_kernel_size=taps, conv_group_size=GROUP, selector_rank=RANK, selector_top_k=TOPK
    )
    dflash_config.update(settings)
    hf = SimpleNamespace(
        hidden_size=H, vocab_size=VOCAB, num_hidden_layers=2, dflash_config=dflash_config
    )
    draft = SimpleNamespace(hf_config=hf, architectures=["DFlash2DraftModel"])
    return SimpleNamespace(
        speculative_config=SimpleNamespace(
            num_speculative_tokens=STEPS, draft_model_config=draft, draft_sample_method=sample
        ),
        model_config=SimpleNamespace(dtype=torch.float32, get_vocab_size=lambda: VOCAB),
        max_num_reqs=4,
    )


def build(module: ModuleType, cls: str, cfg: Any) -> Any:
    torch.manual_seed(1)
    model = getattr(module, cls)(vllm_config=cfg)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return model


# --- references, written from the checkpoint contract, loop by loop -------------------------


def ref_mix(x: torch.Tensor, offsets: torch.Tensor, base: torch.Tensor, block: int) -> Any:
    out = torch.zeros_like(x)
    for n in range(x.shape[0]):
        for t in range(base.shape[0]):
            if n % block >= t:
                groups = offsets[n, t].repeat_interleave(GROUP)
                out[n] += (base[t] + groups) * x[n - t]
    return out


# --- the checks --------------------------------------------------------------------------------


def check_model(mine: ModuleType, up: ModuleType | None) -> None:
    cfg = vllm_config()
    lm = build(mine, "DFlash2Qwen3ForCausalLM", cfg)
    names = {
        k.removeprefix("model."): tuple(v.shape)
        for k, v in lm.state_dict().items()
        if "_conv." in k or "candidate_selector" in k
    }
    g = H // GROUP
    want = {
        f"layers.{i}.{c}.{w}": shape
        for i in range(2)
        for c in ("attention_conv", "mlp_conv")
        for w, shape in (
            ("base_kernel", (2, TAPS, H)),
            ("kernel_projection.weight", (2 * TAPS * g, H)),
        )
    }
    want.update(
        {
            "candidate_selector.predecessor_codebook": (VOCAB, RANK),
            "candidate_selector.successor_codebook": (VOCAB, RANK),
            "candidate_selector.hidden_projection.weight": (RANK, H),
        }
    )
    check("contract: checkpoint names and shapes", names == want, f"{len(names)} tensors")

    for taps in (2, 3):
        conv = build(mine, "DFlash2Qwen3ForCausalLM", vllm_config(taps=taps)).model.layers[0]
        conv = conv.attention_conv
        x, y = torch.randn(4 * (1 + STEPS), H), torch.randn(4 * (1 + STEPS), H)
        mixed, late = conv.mix_input(x)
        offsets = (x @ conv.kernel_projection.weight.T).reshape(len(x), 2, taps, H // GROUP)
        base = conv.base_kernel.detach()
        ok = same(mixed, ref_mix(x, offsets[:, 0], base[0], 1 + STEPS))
        ok &= same(conv.mix_output(y, late), ref_mix(y, offsets[:, 1], base[1], 1 + STEPS))
        check(f"conv: {taps} taps against the loop reference", ok)

    sel = lm.model.candidate_selector
    ids = torch.stack([torch.randperm(VOCAB)[:TOPK] for _ in range(2 * STEPS)]).view(2, STEPS, -1)
    unary, hidden, anchors = torch.randn(2, STEPS, TOPK), torch.randn(2, STEPS, H), ids[:, 0, 0]
    got = sel(ids, unary, hidden, anchors)
    query = hidden @ sel.hidden_projection.weight.T
    want_pairs = ref_pairs(
        sel.predecessor_codebook, sel.successor_codebook, ids, unary, query, anchors
    )
    check("pair scores: against the loop reference", same(got, want_pairs, 1e-4))

    scaled = build(mine, "DFlash2Qwen3ForCausalLM", vllm_config(input_embedding_scale=2.5))
    tokens = torch.tensor([3, 7])
    emb = scaled.model.embed_tokens(tokens)
    check("embed: input_embedding_scale", same(scaled.model.embed_input_ids(tokens), 2.5 * emb))

    if up is None:
        return
    theirs = up.DFlash2Qwen3ForCausalLM(vllm_config=cfg)
    try:
        theirs.load_state_dict(lm.state_dict(), strict=True)  # the same names and shapes
        loaded = ""
    except RuntimeError as exc:
        loaded = str(exc)
    check("contract: 0.28.0 loads the same state dict (strict)", not loaded, loaded[:200])
    x, residual = torch.randn(3 * (1 + STEPS), H), torch.randn(3 * (1 + STEPS), H)
    for res in (None, residual):
        a = lm.model.layers[1](torch.zeros(len(x)), x, res)
        b = theirs.model.layers[1](torch.zeros(len(x)), x, res)
        check(
            f"conv: layer forward equals 0.28.0's (residual {res is not None})",
            all(same(i, j) for i, j in zip(a, b, strict=True)),
        )
    check(
        "pair scores: equal 0.28.0's",
        same(got, theirs.model.candidate_selector(ids, unary, hidden, anchors), 1e-5),
    )


class TwoRanks:
    """tensor_model_parallel_all_gather for two ranks run one after the other: a first pass
    records what each rank sends, a replay answers each rank with what both sent."""

    def __init__(self) -> None:
        self.sent: list[list[torch.Tensor]] = [[], []]
        self.rank, self.replay, self.calls = 0, False, 0

    def __call__(self, x: torch.Tensor, dim: int = -1) -> torch.Tensor:
        if not self.replay:
            self.sent[self.rank].append(x)
            return torch.cat((x, x), dim=-1)
        self.calls += 1
        return torch.cat((self.sent[0][self.calls - 1], self.sent[1][self.calls - 1]), dim=-1)


def check_top_k(lp: ModuleType, up_lp: ModuleType | None) -> None:
    weight, hidden = torch.randn(VOCAB, H), torch.randn(6, H)
    for scale, cap in ((1.0, None), (0.7, 3.0)):
        full = hidden @ weight.T
        values, ids = torch.topk(full, TOPK)
        values = values * scale
        if cap is not None:
            values = cap * torch.tanh(values / cap)
        proc = lp.LogitsProcessor(VOCAB, scale=scale, soft_cap=cap)
        head = ShardedHead(weight, start=0, padding=0, tp_size=1)
        got_ids, got_values = proc.get_top_k_tokens(head, hidden, TOPK)
        ok = torch.equal(got_ids, ids) and same(got_values, values) and got_ids.dtype == torch.int64
        check(f"top-k: TP 1, scale {scale}, soft cap {cap}", ok)
        if up_lp is not None:
            up_proc = up_lp.LogitsProcessor(VOCAB, scale=scale, soft_cap=cap)
            up_ids, up_values = up_proc.get_top_k_tokens(head, hidden, TOPK)
            check(
                f"top-k: equals 0.28.0's, scale {scale}",
                torch.equal(up_ids, got_ids) and same(up_values, got_values),
            )
        # TP 2: each rank holds half the vocabulary plus 8 padding rows scoring high
        half, pad = VOCAB // 2, 8
        heads = [
            ShardedHead(
                torch.cat((weight[r * half : (r + 1) * half], 50 * hidden[:1].repeat(pad, 1))),
                start=r * half,
                padding=pad,
                tp_size=2,
            )
            for r in range(2)
        ]
        gather = TwoRanks()
        lp.tensor_model_parallel_all_gather = gather
        results = []
        for replay in (False, True):
            for rank, head in enumerate(heads):
                gather.rank, gather.replay, gather.calls = rank, replay, 0
                results.append(proc.get_top_k_tokens(head, hidden, TOPK))
        results = results[2:]
        ok = all(torch.equal(i, ids) and same(v, values) for i, v in results)
        check(f"top-k: simulated TP 2 with padded shards, scale {scale}", ok)


def check_speculator(model_mod: ModuleType, spec_mod: ModuleType) -> None:
    for sample in ("greedy", "probabilistic"):
        cfg = vllm_config(sample)
        spec = spec_mod.DFlash2Speculator(cfg, torch.device("cpu"))
        if sample == "probabilistic":
            check(
                "speculator: draft logits start at -inf", bool(torch.isinf(spec.draft_logits).all())
            )
        lm = build(model_mod, "DFlash2Qwen3ForCausalLM", cfg)
        spec.model = lm
        reqs, block = 3, 1 + STEPS
        hidden = torch.randn(4 * block, H)
        spec._run_model = lambda *args, hidden=hidden, **kwargs: hidden
        spec.input_buffers = SimpleNamespace(input_ids=torch.randint(0, VOCAB, (4 * block,)))
        for r in range(reqs):
            for s in range(STEPS):
                spec.sample_indices[r * STEPS + s] = r * block + 1 + s
                spec.sample_pos[r * STEPS + s] = 100 + r * block + 1 + s
                spec.sample_idx_mapping[r * STEPS + s] = [1, 3, 0][r]
        spec._generate_draft(reqs, 4 * block, None, None, None)
        drafted = hidden[spec.sample_indices[: reqs * STEPS]]
        values, ids = torch.topk(drafted @ lm.lm_head.weight.T, TOPK)
        sel = lm.model.candidate_selector
        scores = ref_pairs(
            sel.predecessor_codebook,
            sel.successor_codebook,
            ids.view(reqs, STEPS, TOPK),
            values.view(reqs, STEPS, TOPK),
            (drafted @ sel.hidden_projection.weight.T).view(reqs, STEPS, RANK),
            spec.input_buffers.input_ids[torch.arange(reqs) * block],
        )
        want, _ = ref_walk(scores, ids.view(reqs, STEPS, TOPK))
        got = spec.draft_tokens[:reqs]
        if sample == "greedy":
            check(
                "speculator: greedy _generate_draft against the reference pipeline",
                torch.equal(got, want),
            )
        else:  # temperature 0 in every slot: the same tokens, and the cache holds raw scores
            check(
                "speculator: probabilistic at temperature 0 drafts the greedy tokens",
                torch.equal(got, want),
            )
            finite = int(torch.isfinite(spec.draft_logits).sum())
            check(
                "speculator: the cache holds K columns per drafted position",
                finite == reqs * STEPS * TOPK,
                f"{finite} finite entries",
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("site", type=Path, help="unzipped vllm 0.26.0 with the series applied")
    ap.add_argument("--upstream", type=Path, help="unzipped vllm 0.28.0, to compare with")
    args = ap.parse_args()
    steps: list[tuple[str, Callable[[], None]]] = []
    interpreter_bool_masks()
    # the interpreter evaluates both sides of tl.where: x / 0 where the temperature is 0
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")
    with vllm_stubs():
        lp = load(args.site, LOGITS)
        mine = load(args.site, MODEL)
        up_lp = up = up_spec = None
        if args.upstream:
            up_lp = load(args.upstream, LOGITS)
            up = load(args.upstream, MODEL)
            load(args.upstream, GUMBEL)  # what 0.28.0's speculator imports
            up_spec = load(args.upstream, SPEC)
        gumbel = load(args.site, GUMBEL)
        spec = load(args.site, SPEC)
        steps = [
            ("model", lambda: check_model(mine, up)),
            ("top-k", lambda: check_top_k(lp, up_lp)),
            ("kernels", lambda: check_kernels(gumbel, spec, up_spec)),
            ("speculator", lambda: check_speculator(mine, spec)),
            ("wiring", lambda: check_wiring(args.site, spec, vllm_config)),
        ]
        for name, run in steps:
            try:
                run()
            except Exception as exc:  # a crash is a failed check, and the others still run
                check(f"{name}: ran", False, f"{type(exc).__name__}: {exc}")
    print(f"{len(FAILED)} failed" if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
