"""The context ladder and the soak (bench.context, bench.soak) of the cpu-tiny recipe against
the session's real vLLM CPU server, through the post-bench step's own function: the KV-cache
capacity recorded is the one the server logged, every depth up to the 2048 context is served,
the soak's context grows turn by turn with the engine's resident memory read around each
session, and kit report verify recomputes both sections from the report's raw exchanges."""

from __future__ import annotations

import logging
import re
import time

import pytest

from kit.bench import Bencher, model_info
from kit.build import Built
from kit.engine import EngineEnv
from kit.measure import claims_beside
from kit.recipe import LoadedRecipe, load_recipe
from kit.report.assemble import Extras, Measurement, Setup, finish_report, new_report, server_info
from kit.report.files import encode_report
from kit.report.show import show_table
from kit.report.verify import verify_report
from kit.serve import RunningServer

pytestmark = pytest.mark.integration

# the smallest bench that gives the report its served model; the claims are the recipe's own
SHORT = ["bench.warmups=0", "bench.runs=1", "bench.prefill=null"]
SHORT += [f"bench.prompts.{i}.max_tokens=8" for i in (0, 1)]

log = logging.getLogger(__name__)


def test_the_claims_of_cpu_tiny_on_a_real_server(
    cpu_recipe: LoadedRecipe,
    built: Built,
    engine_env: EngineEnv,
    server: RunningServer,
) -> None:
    loaded = load_recipe(cpu_recipe.path, SHORT)
    context_settings, soak_settings = loaded.recipe.bench.context, loaded.recipe.bench.soak
    assert context_settings is not None and soak_settings is not None
    name, max_len = model_info(server.url)
    result = Bencher(server.url, loaded.recipe.bench, name, max_model_len=max_len).run()
    setup = Setup(built=built, env=engine_env, server=server_info(server, "native"))
    measured = Measurement(result=result)
    started = time.monotonic()
    context, soak, notes = claims_beside(loaded, setup, server.url, measured)
    took = time.monotonic() - started
    log.warning("bench.context and bench.soak of cpu-tiny took %.1f s", took)
    if soak is not None:
        log.warning(
            "soak: memory %s MiB, TPS retention %s %%, prefix cache hit rate %s",
            soak.memory_growth_mib,
            soak.tps_retention_pct,
            soak.prefix_cache_hit_rate,
        )
    assert notes == []
    assert context is not None and soak is not None

    # what the engine said at boot, as its own log says it
    logged = re.search(r"KV cache size: ([\d,]+) tokens", server.log_path.read_text())
    assert logged is not None
    assert context.kv_cache_tokens == int(logged[1].replace(",", ""))
    assert context.max_concurrency is not None and context.max_concurrency > 1
    # the synthetic DFlash draft: its safetensors and its KV per token (1 layer, bf16)
    assert built.draft_dir is not None
    on_disk = sum(f.stat().st_size for f in built.draft_dir.glob("*.safetensors"))
    assert context.draft_weights_bytes is not None and 0 < context.draft_weights_bytes < on_disk
    assert context.draft_kv_bytes_per_token == 2 * 1 * 2 * 64 * 2

    # every depth up to the served context came back, sized by the server's tokenizer
    assert context.max_model_len == 2048 and context.max_model_len_from == "server"
    assert [r.depth for r in context.rungs] == [512, 1024, 2032]
    assert [r.status for r in context.rungs] == ["served"] * 3, [
        r.exchange.error for r in context.rungs if r.exchange
    ]
    for rung in context.rungs:
        # sized with the server's /tokenize to the depth, or a filler sentence under it
        assert rung.prompt_tokens is not None and rung.depth - 10 < rung.prompt_tokens <= rung.depth
        assert rung.ttft_ms and rung.prefill_tps and rung.decode_tps
        assert rung.recalled is None  # synthetic weights: not judged
    assert context.largest_depth_served == 2032 and not context.recall_judged

    # the soak: two sessions of three turns, the context growing to about 1,536 tokens
    assert soak.target_tokens == 1536 and soak.memory_source == "rss"
    for session in soak.sessions:
        grown = [t.prompt_tokens or 0 for t in session.turns]
        assert grown == sorted(grown) and 1000 < grown[-1] <= 2048 - 32, grown
        assert session.memory_before and session.memory_after
        assert session.memory_before[0].device == "engine processes"
        assert session.memory_before[0].used_mib > 100  # the engine's processes, not kit's
    assert (soak.empty_turns, soak.errors) == (0, 0)  # ignore_eos: every reply is whole
    assert soak.tps_retention_pct is not None
    # six short turns leak nothing the engine's resident memory would show past the threshold
    assert soak.memory_growth_mib is not None
    assert soak.memory_growth_mib <= soak_settings.max_memory_growth_mib
    assert soak.prefix_cache_hit_rate is not None and soak.prefix_cache_hit_rate > 0.2

    # into the report, and kit report verify recomputes both from the raw exchanges
    extras = Extras(context=context, soak=soak)
    report = finish_report(new_report(loaded, "claims"), setup, measured, extras, failure=None)
    assert report.server is not None and report.server.engine_choices is not None
    assert report.server.engine_choices.kv_cache_tokens == context.kv_cache_tokens
    checklist = verify_report(encode_report(report), allow_unsigned=True)
    assert checklist.ok, checklist.render()
    detail = checklist.item("summaries").detail
    assert "context ladder (3 depths)" in detail and "soak (2 x 3 turns)" in detail
    shown = show_table(report)
    assert "  context: served to 2,032 of 2,048 tokens (3/3 depths)" in shown
    assert "  soak: 2x3 turns to ~1,536 tokens: memory " in shown
