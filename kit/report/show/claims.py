"""One line each for the context ladder and the soak in ``kit report show``."""

from __future__ import annotations

from kit.bench.claims import ContextLadder, Soak
from kit.report.schema import Report

MIB = 1024 * 1024


def _n(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def context_line(c: ContextLadder) -> str:
    """'context: served to 2,032 of 2,048 tokens (3/3 depths; ...); KV cache ...'."""
    top = c.rungs[-1] if c.rungs else None
    served = (
        f"served to {_n(c.largest_depth_served)} of {c.max_model_len:,} tokens"
        if c.largest_depth_served is not None
        else f"nothing served of {c.max_model_len:,} tokens"
    )
    parts = [f"{served} ({c.served}/{len(c.rungs)} depths)"]
    if top is not None and top.status == "served":
        parts.append(
            f"at {top.depth:,}: TTFT {_n(top.ttft_ms)} ms, prefill {_n(top.prefill_tps)} tok/s, "
            f"decode {_n(top.decode_tps, 1)} tok/s"
        )
    first = next((r for r in c.rungs if r.status == "failed"), None)
    if first is not None and first.exchange is not None:
        parts.append(f"FAILED at {first.depth:,}: {first.exchange.error}")
    parts.append(
        f"key recalled at {c.recalled}/{c.served}" if c.recall_judged else "recall not judged"
    )
    if c.kv_cache_tokens is not None:
        x = "" if c.max_concurrency is None else f", {c.max_concurrency:g}x at full context"
        parts.append(f"KV cache {c.kv_cache_tokens:,} tokens{x}")
    if c.draft_weights_bytes is not None:
        kv = c.draft_kv_bytes_per_token
        parts.append(
            f"draft {c.draft_weights_bytes / MIB:,.1f} MiB"
            + ("" if kv is None else f" + {kv:,} B/token of KV")
        )
    return "  context: " + "; ".join(parts)


def soak_line(s: Soak) -> str:
    """'soak: 5x5 turns to ~25,000 tokens: memory +0.0 MiB (nvml), TPS retention 100.2 %, ...'."""
    t = s.settings
    verdict = {True: "PASS", False: "FAIL", None: "not judged"}[s.passed]
    memory = (
        f"memory {s.memory_growth_mib:+.1f} MiB ({s.memory_source})"
        if s.memory_growth_mib is not None
        else f"memory {s.memory_note or 'not measured'}"
    )
    hits = (
        ""
        if s.prefix_cache_hit_rate is None
        else f", prefix cache {s.prefix_cache_hit_rate * 100:.0f} % hit"
    )
    return (
        f"  soak: {t.sessions}x{t.turns} turns to ~{s.target_tokens:,} tokens: {memory} "
        f"[<= {t.max_memory_growth_mib:g}], TPS retention {_n(s.tps_retention_pct, 1)} % "
        f"[>= {t.min_tps_retention_pct:g}], {s.empty_turns} empty, {s.errors} errors{hits}: "
        f"{verdict}" + ("" if not s.failed_checks else f" ({'; '.join(s.failed_checks)})")
    )


def claim_lines(report: Report) -> list[str]:
    """The context ladder's line and the soak's, where the report has them."""
    out = []
    if report.context is not None:
        out.append(context_line(report.context))
    if report.soak is not None:
        out.append(soak_line(report.soak))
    return out
