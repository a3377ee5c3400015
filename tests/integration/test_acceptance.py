"""A deterministic check of the acceptance figures: the zero-norm trick.

With the final norm of target and draft zeroed, every logit is 0, greedy decoding picks token
0 in both, and every drafted token is accepted: 7 drafted per step gives acceptance rate 1.0
and acceptance length 8.0 in vLLM's 1 + accepted/drafts convention (7.0 without the bonus
token). A regression in how kit counts or derives these figures fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kit import engine as engine_mod
from kit.bench import Bencher, model_info
from kit.build import build
from kit.recipe import load_recipe
from kit.serve import NativeRuntime

pytestmark = pytest.mark.integration

ZERO_NORM = [
    "name=cpu-tiny-zero-norm",
    "model.zero_final_norm=true",
    "speculative.draft.zero_final_norm=true",
    "bench.sampling.temperature=0",
    "bench.warmups=1",
    "bench.runs=2",
    "bench.prefill=null",
    "bench.prompts.0.max_tokens=64",
    "bench.prompts.1.max_tokens=64",
]


def test_zero_norm_draft_is_always_accepted(repo_root: Path, tmp_path: Path) -> None:
    loaded = load_recipe(repo_root / "recipes" / "cpu-tiny.yaml", ZERO_NORM)
    built = build(loaded)
    server_cfg = loaded.recipe.server
    env = engine_mod.resolve(server_cfg.engine, server_cfg.patches)
    with NativeRuntime(env).start(
        loaded.recipe, built.served_dir, built.draft_dir, tmp_path / "server.log"
    ) as server:
        name, max_len = model_info(server.url)
        result = Bencher(server.url, loaded.recipe.bench, name, max_model_len=max_len).run()
    assert result.complete, result.incomplete_reason
    for p in result.prompts:
        spec = p.spec_decode
        assert spec is not None and spec.drafts > 0
        assert spec.draft_tokens == 7 * spec.drafts
        assert spec.accepted_tokens == spec.draft_tokens
        assert spec.acceptance_rate == 1.0
        assert spec.acceptance_length == 8.0
        assert spec.accepted_per_draft == 7.0
        assert spec.per_position_rate == [1.0] * 7
        # every step emits 8 tokens, so 64 tokens take 8 steps per request
        assert spec.drafts == pytest.approx(2 * 64 / 8, abs=2)
    texts = {r.text for r in result.records}
    assert len(texts) == 1  # the same token, over and over, every time
