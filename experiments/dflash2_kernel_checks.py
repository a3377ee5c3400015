"""The two Triton kernels of the DFlash2 speculator (patch 0007 of patches/vllm-0.26.0), run
under the Triton CPU interpreter by experiments/dflash2-cpu-check.py: the candidate walk and the
draft-logit cache, against loop references, vLLM 0.26.0's own gumbel_sample, a chi-square test,
and (given --upstream) vLLM 0.28.0's kernels.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch
from dflash2_harness import STEPS, TOPK, check, ref_walk, same

REQS, VOCAB, K_BLOCK = 24, 1000, 8  # requests, token ids, lanes (next power of two of TOPK)
MINE, THEIRS = "_walk_candidates_kernel", "_selector_walk_kernel"


class Batch:
    """A batch of REQS requests in shuffled state slots (one slot more, left as padding), with
    flat scores (temperature decides the picks), distinct candidate ids and one greedy slot."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(2)
        self.slots = torch.randperm(REQS + 1, generator=g)[:REQS]
        self.scores = torch.randn(REQS, STEPS, TOPK, TOPK, generator=g) * 0.5
        self.ids = torch.stack(
            [torch.randperm(VOCAB, generator=g)[:TOPK] for _ in range(REQS * STEPS)]
        ).view(REQS, STEPS, TOPK)
        self.req_map = torch.cat(
            (self.slots.repeat_interleave(STEPS), torch.full((STEPS,), -1))
        ).int()
        self.pos = torch.arange((REQS + 1) * STEPS) * 3 + 40
        self.temp = 0.6 + torch.rand(REQS + 1, generator=g)
        self.temp[self.slots[0]] = 0.0  # request 0 samples greedily
        self.seeds = torch.randint(0, 2**31, (REQS + 1,), generator=g)

    def walk(self, module: Any, kernel: str, probabilistic: bool) -> tuple[Any, Any]:
        tokens = torch.full((REQS + 1, STEPS), -7, dtype=torch.int64)
        rows = torch.full((REQS + 1, STEPS, TOPK), -7.0)
        args = (self.scores, self.ids, self.pos, self.req_map, self.temp, self.seeds, tokens, rows)
        if kernel == MINE:
            flags = dict(NUM_STEPS=STEPS, K=TOPK, K_BLOCK=K_BLOCK, PROBABILISTIC=probabilistic)
        else:  # 0.28.0's names for the same constants
            flags = dict(
                num_steps=STEPS, top_k=TOPK, BLOCK_K=K_BLOCK, SAMPLE_PROBABILISTIC=probabilistic
            )
        getattr(module, kernel)[(REQS,)](*args, **flags, USE_FP64=False)
        return tokens, rows

    def cache(
        self, module: Any, kernel: str, ids: Any, rows: Any, logits: Any, cached: Any
    ) -> None:
        flat_ids = ids.reshape(REQS * STEPS, TOPK).contiguous()
        flat_rows = rows.reshape(-1, TOPK).contiguous()
        if kernel == "_cache_walked_scores_kernel":
            getattr(module, kernel)[(REQS * STEPS,)](
                logits, logits.stride(0), logits.stride(1), cached, flat_ids, flat_rows,
                self.req_map, self.temp, NUM_STEPS=STEPS, K=TOPK, K_BLOCK=K_BLOCK,
            )  # fmt: skip
        else:  # 0.28.0's, which caches the scores before temperature
            getattr(module, kernel)[(REQS * STEPS,)](
                logits, cached, flat_ids, flat_rows, self.req_map, logits.stride(0),
                logits.stride(1), num_steps=STEPS, top_k=TOPK, BLOCK_K=K_BLOCK,
            )  # fmt: skip


def check_kernels(gumbel: ModuleType, spec: ModuleType, up_spec: ModuleType | None) -> None:
    b = Batch()
    tokens, rows = b.walk(spec, MINE, probabilistic=False)
    want_tokens, want_rows = ref_walk(b.scores, b.ids)
    ok = torch.equal(tokens[:REQS], want_tokens) and same(rows[:REQS], want_rows)
    check("walk: greedy against the reference walk", ok and bool((tokens[REQS:] == -7).all()))

    tokens, rows = b.walk(spec, MINE, probabilistic=True)
    agree = 0
    for r in range(REQS):
        slot = b.slots[r : r + 1].int()
        for s in range(STEPS):
            full = torch.full((1, VOCAB), float("-inf"))
            full[0, b.ids[r, s]] = rows[r, s]
            at = b.pos[r * STEPS + s : r * STEPS + s + 1] - 1
            pick = gumbel.gumbel_sample(full, slot, b.temp, b.seeds, at, True)
            agree += int(pick) == int(tokens[r, s])
    followed = all(
        torch.equal(rows[r, s], b.scores[r, s, 0 if s == 0 else prev])
        for r in range(REQS)
        for s, prev in enumerate(
            [0, *[int((b.ids[r, j] == tokens[r, j]).nonzero()) for j in range(STEPS - 1)]]
        )
    )
    check("walk: probabilistic, each step reads the row of the token picked before it", followed)
    differs = int((tokens[:REQS] != want_tokens).sum())
    check(
        "walk: probabilistic picks equal gumbel_sample's over the full vocabulary",
        agree == REQS * STEPS and differs > REQS * STEPS // 4 and bool((tokens[REQS:] == -7).all()),
        f"{agree} of {REQS * STEPS} equal; {differs} differ from the greedy walk",
    )

    draws, t = 3000, 0.8
    torch.manual_seed(3)
    one = torch.randn(1, 1, TOPK, TOPK).repeat(draws, 1, 1, 1)
    cand = torch.arange(TOPK).view(1, 1, TOPK).repeat(draws, 1, 1) * 7
    out = torch.zeros(draws, 1, dtype=torch.int64)
    spec._walk_candidates_kernel[(draws,)](
        one, cand, torch.arange(draws) * 3 + 5, torch.arange(draws).int(),
        torch.full((draws,), t), torch.arange(draws) + 1, out, torch.zeros(draws, 1, TOPK),
        NUM_STEPS=1, K=TOPK, K_BLOCK=K_BLOCK, PROBABILISTIC=True, USE_FP64=False,
    )  # fmt: skip
    seen = torch.bincount(out.view(-1) // 7, minlength=TOPK).double()
    expect = torch.softmax(one[0, 0, 0].double() / t, 0) * draws
    chi2 = float(((seen - expect) ** 2 / expect).sum())
    check(
        "walk: probabilistic picks follow softmax(scores / T)",
        chi2 < 18.47,
        f"chi-square {chi2:.1f}; 0.1% critical value 18.47 at 4 dof; {draws} draws",
    )

    logits = torch.full((REQS + 1, STEPS, VOCAB), float("-inf"))
    cached = torch.zeros(REQS + 1, STEPS, TOPK, dtype=torch.int64)
    later = torch.stack([torch.randperm(VOCAB)[:TOPK] for _ in range(REQS * STEPS)])
    for label, ids in (("first", b.ids), ("second", later.view(REQS, STEPS, TOPK))):
        b.cache(spec, "_cache_walked_scores_kernel", ids, rows, logits, cached)
        want = torch.full_like(logits, float("-inf"))
        for r in range(REQS):
            slot = int(b.slots[r])
            scale = b.temp[slot] if b.temp[slot] != 0 else torch.tensor(1.0)
            for s in range(STEPS):
                want[slot, s, ids[r, s]] = rows[r, s] / scale
        check(
            f"cache: {label} step against the reference (scores / T, stale -inf)",
            torch.equal(logits, want),
        )

    if up_spec is None:
        return
    up_tokens, up_rows = b.walk(up_spec, THEIRS, probabilistic=True)
    check(
        "walk: probabilistic equals 0.28.0's walk",
        torch.equal(up_tokens, tokens) and same(up_rows, rows),
    )
    g_tokens, _ = b.walk(up_spec, THEIRS, probabilistic=False)
    check("walk: greedy equals 0.28.0's walk", torch.equal(g_tokens[:REQS], want_tokens))
    theirs = torch.full_like(logits, float("-inf"))
    fresh = torch.zeros_like(cached)
    b.cache(up_spec, "_cache_draft_logits_kernel", later, rows, theirs, fresh)
    scale = torch.where(b.temp != 0, b.temp, 1.0).view(-1, 1, 1)
    check(
        "cache: equals 0.28.0's divided by the temperature (0.26.0 caches after it)",
        torch.equal(theirs / scale, logits),
    )
