"""The context ladder and the soak in a report: kit report verify recomputes every figure from
their raw exchanges and memory readings and checks what was asked against the embedded
recipe; kit report show prints a line each; a report without them is written as before."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from factories import build_report

from kit import signing
from kit.bench.claims import (
    NOT_JUDGED,
    ContextLadder,
    ContextRung,
    Exchange,
    MemoryReading,
    PrefixCache,
    Soak,
    SoakSession,
    SoakTurn,
    planned_depths,
    settle_ladder,
    settle_soak,
    target_tokens,
)
from kit.bench.claims.context import placement
from kit.enginelog import parse_engine_log
from kit.recipe import load_recipe
from kit.report import Report
from kit.report.files import encode_report
from kit.report.show import show_table
from kit.report.verify import verify_report

FIXTURES = Path(__file__).parents[2] / "fixtures"
KV_LINE = (
    "INFO 12-03 05:43:21 [kv_cache_utils.py:1234] CPU KV cache size: 699,008 tokens, "
    "Maximum concurrency for 2,048 tokens per request: 341.31x"
)


def _exchange(prompt: int, ttft_s: float, tokens: int, wall_s: float, text: str = "w") -> Exchange:
    return Exchange(
        started_at="2026-11-29T12:04:00.000+00:00",
        ttft_s=ttft_s,
        wall_s=wall_s,
        prompt_tokens=prompt,
        completion_tokens=tokens,
        finish_reason="length",
        text=text,
        error=None,
    )


def _with_claims(fixtures_dir: Path) -> Report:
    """cpu-tiny's report with a context ladder and a soak as the recipe asks for them: the
    deepest depth out of memory, one soak turn empty, memory grown 2 MiB."""
    loaded = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    bench = loaded.recipe.bench
    assert bench.context is not None and bench.soak is not None
    rungs = []
    for i, (depth, fraction) in enumerate(planned_depths(bench.context, 2048)):
        key, position = placement(bench.context.seed, i)
        x = _exchange(depth - 3, 0.02 * (i + 1), 16, 0.4 + 0.02 * (i + 1))
        if i == 2:
            x = x.model_copy(
                update={"error": "HTTP 500: out of memory", "ttft_s": None, "wall_s": None}
            )
            x = x.model_copy(update={"prompt_tokens": None, "completion_tokens": None, "text": ""})
        rungs.append(
            ContextRung(
                depth=depth,
                fraction=fraction,
                key=key,
                position=position,
                salt=f"{i:016x}",
                exchange=x,
                not_run=None,
            )
        )
    ladder = settle_ladder(
        ContextLadder(
            settings=bench.context,
            max_model_len=2048,
            max_model_len_from="server",
            recall_judged=False,
            recall_note=NOT_JUDGED,
            kv_cache_tokens=699_008,
            max_concurrency=341.31,
            draft_weights_bytes=4_200_000,
            draft_kv_bytes_per_token=512,
            rungs=rungs,
        )
    )
    s = bench.soak
    sessions = []
    for n in range(s.sessions):
        turns = []
        for t in range(s.turns):
            x = _exchange(250 * (t + 1), 0.03, 32, 0.6 + 0.01 * t)
            if (n, t) == (1, 2):
                x = x.model_copy(update={"text": "", "error": "no chunk carried text"})
                x = x.model_copy(update={"ttft_s": None, "completion_tokens": 0})
            turns.append(SoakTurn(session=n, turn=t, exchange=x, not_run=None))
        sessions.append(
            SoakSession(
                index=n,
                salt=f"{n:016x}",
                message_tokens=480,
                turns=turns,
                memory_before=[MemoryReading(device="engine processes", used_mib=900.0 + n)],
                memory_after=[MemoryReading(device="engine processes", used_mib=901.0 + n)],
                prefix_cache=PrefixCache(queries=1500.0, hits=1000.0),
            )
        )
    soak = settle_soak(
        Soak(
            settings=s,
            max_model_len=2048,
            target_tokens=target_tokens(s, 2048),
            memory_source="rss",
            memory_note=None,
            sessions=sessions,
        )
    )
    report = build_report(fixtures_dir)
    assert report.server is not None
    choices = parse_engine_log(KV_LINE)
    server = report.server.model_copy(update={"engine_choices": choices})
    return report.model_copy(update={"context": ladder, "soak": soak, "server": server})


def _payload(report: Report) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        base64.b64decode(json.loads(encode_report(report))["payload"])
    )
    return data


def _verify(payload: dict[str, Any]) -> tuple[bool | None, str, list[str]]:
    """The summaries item of an unsigned report file holding ``payload``."""
    envelope = json.loads(encode_report(build_report(FIXTURES)))
    envelope["payload"] = base64.b64encode(signing.canonical_bytes(payload)).decode()
    checklist = verify_report(signing.canonical_bytes(envelope), allow_unsigned=True)
    item = checklist.item("summaries")
    return item.ok, item.detail, item.problems


def test_the_figures_are_what_the_exchanges_give(fixtures_dir: Path) -> None:
    report = _with_claims(fixtures_dir)
    ladder, soak = report.context, report.soak
    assert ladder is not None and soak is not None
    assert [r.status for r in ladder.rungs] == ["served", "served", "failed"]
    assert (ladder.largest_depth_served, ladder.served, ladder.failed) == (1024, 2, 1)
    assert ladder.rungs[0].prefill_tps == pytest.approx(509 / 0.02)
    assert ladder.rungs[0].decode_tps == pytest.approx(16 / 0.4)
    assert [r.recalled for r in ladder.rungs] == [None, None, None]
    assert (soak.empty_turns, soak.errors, soak.memory_growth_mib) == (1, 0, 2.0)
    assert soak.prefix_cache_hit_rate == pytest.approx(2 / 3)
    # the first session's turns decode 32/0.57, 32/0.58, 32/0.59 tok/s (median 32/0.58), the
    # last's 32/0.57 and 32/0.58 (its third came back empty): the median of two is their mean
    assert soak.tps_retention_pct == pytest.approx((32 / 0.57 + 32 / 0.58) / 2 / (32 / 0.58) * 100)
    assert soak.passed is False and soak.failed_checks == ["1 empty turn(s), over 0"]


def test_verify_recomputes_both_sections(fixtures_dir: Path) -> None:
    ok, detail, problems = _verify(_payload(_with_claims(fixtures_dir)))
    assert ok, problems
    assert "context ladder (3 depths)" in detail and "soak (2 x 3 turns)" in detail


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda p: p["context"]["rungs"][1]["exchange"].update(ttft_s=0.5),
            "context.rungs[1].ttft_ms: stored 40.0, recomputed 500.0",
        ),
        (
            lambda p: p["context"].update(largest_depth_served=2032),
            "context.largest_depth_served: stored 2032, recomputed 1024",
        ),
        (
            lambda p: p["soak"]["sessions"][1]["memory_after"][0].update(used_mib=1500.0),
            "soak.memory_growth_mib: stored 2.0, recomputed 600.0",
        ),
        (
            lambda p: p["soak"]["sessions"][0]["turns"][1]["exchange"].update(text=""),
            "soak.empty_turns: stored 1, recomputed 2",
        ),
        (
            lambda p: p["soak"]["settings"].update(max_memory_growth_mib=1000.0),
            "soak.settings.max_memory_growth_mib: stored 1000.0, recomputed 200.0",
        ),
        (
            lambda p: p["context"].update(kv_cache_tokens=800_000),
            "context.kv_cache_tokens 800000: the server log says 699008",
        ),
        (
            lambda p: p["context"].update(recall_judged=True),
            "context.recall_judged is True, but the weights are synthetic",
        ),
        (
            lambda p: p["context"]["rungs"][0].update(key="12345"),
            "context.rungs[0]: key and position are not the seed's",
        ),
    ],
)
def test_an_edited_figure_or_record_fails_verify(
    fixtures_dir: Path, edit: Any, problem: str
) -> None:
    payload = _payload(_with_claims(fixtures_dir))
    edit(payload)
    ok, _, problems = _verify(payload)
    assert ok is False
    assert problem in problems, problems


def test_a_report_without_them_is_written_as_before(fixtures_dir: Path) -> None:
    data = _payload(build_report(fixtures_dir))
    assert "context" not in data and "soak" not in data
    ok, detail, _ = _verify(data)
    assert ok and "context ladder" not in detail


def test_show_prints_a_line_each(fixtures_dir: Path) -> None:
    shown = show_table(_with_claims(fixtures_dir))
    context = next(line for line in shown.splitlines() if line.startswith("  context:"))
    assert context == (
        "  context: served to 1,024 of 2,048 tokens (2/3 depths); FAILED at 2,032: HTTP 500: "
        "out of memory; recall not judged; KV cache 699,008 tokens, 341.31x at full context; "
        "draft 4.0 MiB + 512 B/token of KV"
    )
    soak = next(line for line in shown.splitlines() if line.startswith("  soak:"))
    assert soak.startswith("  soak: 2x3 turns to ~1,536 tokens: memory +2.0 MiB (rss) [<= 200]")
    assert soak.endswith("1 empty, 0 errors, prefix cache 67 % hit: FAIL (1 empty turn(s), over 0)")
