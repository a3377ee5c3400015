"""The soak (``bench.soak``): sessions of turns, each turn the conversation so far, its reply
and a new user message, so the context grows to a stated size. Per turn TTFT, decode tok/s,
an empty reply or an error; memory before and after each session; the prefix cache's hits
from /metrics. Figures: memory growth, TPS retention, empty turns, errors, each against the
recipe's threshold (Club-3090's by default). docs/pipeline.md says how."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

from pydantic import Field

from kit.base import KitModel
from kit.bench.claims.context import UNIT_CHARS, filler
from kit.bench.claims.exchange import (
    ClaimClient,
    Exchange,
    Message,
    exchange_decode_tps,
    fit_units,
    is_empty,
    is_failed,
    median,
    ttft_ms,
)
from kit.bench.claims.memory import MemoryProbe, MemoryReading, MemorySource
from kit.bench.stream import RequestTag
from kit.metrics import Sample, metric_delta
from kit.recipe.serving import SoakSettings

log = logging.getLogger(__name__)

# vLLM's prefix-cache counters, in tokens (vllm/v1/metrics/loggers.py)
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
ASK = "Read these notes and reply with a short summary of what they say."
MIN_MESSAGE_TOKENS = 16


class PrefixCache(KitModel):
    """The prefix cache over one session: vLLM's counter deltas, in tokens."""

    queries: float = Field(description="Prompt tokens looked up (vllm:prefix_cache_queries).")
    hits: float = Field(description="Of those, found cached (vllm:prefix_cache_hits).")


class SoakTurn(KitModel):
    """One turn: the request with the whole conversation so far, then its figures (from the
    exchange alone: kit report verify recomputes them)."""

    session: int = Field(description="Its session, from 0.")
    turn: int = Field(description="Its place in the session, from 0.")
    exchange: Exchange | None = Field(description="The request as it happened; None: not run.")
    not_run: str | None = Field(description="Why it was not sent (None: it was).")
    prompt_tokens: int | None = Field(None, description="The conversation's tokens (usage).")
    ttft_ms: float | None = Field(None, description="Time to the first token, ms.")
    decode_tps: float | None = Field(None, description="completion tokens / (wall - TTFT), tok/s.")
    empty: bool = Field(False, description="The reply came back whole with no text.")
    error: bool = Field(False, description="The turn failed (its exchange's error) or was not run.")


class SoakSession(KitModel):
    """One conversation: its turns, memory before and after, the prefix cache over it."""

    index: int = Field(description="From 0.")
    salt: str = Field(description="Random text opening its first message: no cache across.")
    message_tokens: int = Field(description="Tokens each new user message was sized to.")
    turns: list[SoakTurn] = Field(description="In order.")
    memory_before: list[MemoryReading] = Field(description="Read just before its first turn.")
    memory_after: list[MemoryReading] = Field(description="Read just after its last turn.")
    prefix_cache: PrefixCache | None = Field(
        description="Over the session; None where the engine exports no prefix-cache counters."
    )


class Soak(KitModel):
    """``bench.soak``: the sessions as run, then the figures and the verdict on them."""

    settings: SoakSettings = Field(description="The recipe's bench.soak, as run (thresholds).")
    max_model_len: int = Field(description="The served context the size was capped at.")
    target_tokens: int = Field(
        description="The context a session was sized to reach: settings.context_tokens, at "
        "most max_model_len - max_tokens."
    )
    memory_source: MemorySource | None = Field(
        description="nvml: GPU memory per card; rss: the engine processes' resident memory "
        "(a CPU engine kit started); None: not measured."
    )
    memory_note: str | None = Field(description="Why memory was not measured, where it was not.")
    sessions: list[SoakSession] = Field(description="The sessions, in order.")
    memory_growth_mib: float | None = Field(
        None,
        description="The largest growth of any device: after the last session less before "
        "the first, MiB; None: not measured.",
    )
    tps_retention_pct: float | None = Field(
        None,
        description="Median decode tok/s of the last k turns over that of the first k "
        "(settings.retention_turns), in percent; None without decode figures on both sides.",
    )
    empty_turns: int = Field(0, description="Replies that came back empty.")
    errors: int = Field(0, description="Turns that failed, or were not run.")
    prefix_cache_hit_rate: float | None = Field(
        None,
        description="Prefix-cache hits over queries, summed over the sessions (0-1); None "
        "where the engine exports no counters.",
    )
    failed_checks: list[str] = Field(
        default_factory=list, description="Each figure outside its threshold, said."
    )
    passed: bool | None = Field(
        None,
        description="True: every figure within its threshold; False: one or more outside; "
        "None: none outside, but one not measured (memory on an external server).",
    )


def settle_turn(turn: SoakTurn) -> SoakTurn:
    """The turn with its figures computed from its exchange."""
    x = turn.exchange
    return turn.model_copy(
        update={
            "prompt_tokens": x.prompt_tokens if x is not None else None,
            "ttft_ms": ttft_ms(x) if x is not None else None,
            "decode_tps": exchange_decode_tps(x) if x is not None else None,
            "empty": x is not None and is_empty(x),
            "error": x is None or is_failed(x),
        }
    )


def _growth(sessions: list[SoakSession]) -> float | None:
    if not sessions:
        return None
    before = {m.device: m.used_mib for m in sessions[0].memory_before}
    after = {m.device: m.used_mib for m in sessions[-1].memory_after}
    grown = [after[d] - before[d] for d in before if d in after]
    return max(grown) if grown else None


def _retention(turns: list[SoakTurn], k: int) -> float | None:
    first = median([t.decode_tps for t in turns[:k] if t.decode_tps is not None])
    last = median([t.decode_tps for t in turns[-k:] if t.decode_tps is not None])
    if first is None or last is None or first <= 0:
        return None
    return last / first * 100.0


def _checks(soak: Soak) -> tuple[list[str], bool | None]:
    """Each figure outside its threshold, and the verdict."""
    s = soak.settings
    out: list[str] = []
    growth, kept = soak.memory_growth_mib, soak.tps_retention_pct
    if growth is not None and growth > s.max_memory_growth_mib:
        out.append(f"memory grew {growth:.1f} MiB, over {s.max_memory_growth_mib:g} MiB")
    if kept is not None and kept < s.min_tps_retention_pct:
        out.append(f"TPS retention {kept:.1f} %, under {s.min_tps_retention_pct:g} %")
    if soak.empty_turns > s.max_empty_turns:
        out.append(f"{soak.empty_turns} empty turn(s), over {s.max_empty_turns}")
    if soak.errors > s.max_errors:
        out.append(f"{soak.errors} failed turn(s), over {s.max_errors}")
    if out:
        return out, False
    return out, None if growth is None or kept is None else True


def settle_soak(soak: Soak) -> Soak:
    """The soak with every figure and the verdict computed from its sessions (kit report
    verify compares the stored soak with this)."""
    sessions = [
        sess.model_copy(update={"turns": [settle_turn(t) for t in sess.turns]})
        for sess in soak.sessions
    ]
    turns = [t for sess in sessions for t in sess.turns]
    counters = [sess.prefix_cache for sess in sessions if sess.prefix_cache is not None]
    queries = sum(c.queries for c in counters)
    out = soak.model_copy(
        update={
            "sessions": sessions,
            "memory_growth_mib": _growth(sessions) if soak.memory_source is not None else None,
            "tps_retention_pct": _retention(turns, soak.settings.k),
            "empty_turns": sum(1 for t in turns if t.empty),
            "errors": sum(1 for t in turns if t.error),
            "prefix_cache_hit_rate": sum(c.hits for c in counters) / queries if queries else None,
        }
    )
    failed, passed = _checks(out)
    return out.model_copy(update={"failed_checks": failed, "passed": passed})


def target_tokens(settings: SoakSettings, max_model_len: int) -> int:
    """The context a session grows to: the recipe's, within the served context."""
    return max(min(settings.context_tokens, max_model_len - settings.max_tokens), 1)


def _message(salt: str, session: int, turn: int, units: int) -> Message:
    head = f"[{salt}] " if turn == 0 else ""
    notes = filler(units)
    return {"role": "user", "content": f"{head}Notes {session}.{turn}: {notes}\n{ASK}"}


def _prefix(before: dict[Sample, float], after: dict[Sample, float]) -> PrefixCache | None:
    queries = metric_delta(before, after, PREFIX_QUERIES)
    hits = metric_delta(before, after, PREFIX_HITS)
    if queries is None or hits is None:
        return None
    return PrefixCache(queries=queries, hits=hits)


def _read(probe: MemoryProbe) -> tuple[list[MemoryReading], str | None]:
    if probe.read is None:
        return [], probe.note
    got = probe.read()
    return ([], f"not measured: {got}") if isinstance(got, str) else (got, None)


def run_soak(
    client: ClaimClient,
    settings: SoakSettings,
    max_model_len: int,
    memory: MemoryProbe,
    on_turn: Callable[[SoakTurn], None] | None = None,
) -> Soak:
    """The soak against one server. A failed turn is kept with its error and the session goes
    on; once the server stops answering /health, the turns left are not run, and say so."""
    target = target_tokens(settings, max_model_len)
    per_turn = max(target // settings.turns - settings.max_tokens, MIN_MESSAGE_TOKENS)

    def count(units: int) -> int | None:
        return client.count_tokens([_message("0" * 16, 0, 0, units)])

    units = fit_units(count, per_turn, UNIT_CHARS)
    sessions: list[SoakSession] = []
    gone: str | None = None
    note = memory.note
    for s in range(settings.sessions):
        salt = secrets.token_hex(8)
        before, why = _read(memory)
        note = note or why
        counters = client.metrics()
        conversation: list[Message] = []
        turns: list[SoakTurn] = []
        for t in range(settings.turns):
            exchange: Exchange | None = None
            if gone is None:
                conversation.append(_message(salt, s, t, units))
                tag = RequestTag(f"soak-{s}", "measured", t, salt)
                exchange = client.send(list(conversation), settings.max_tokens, tag)
                conversation.append({"role": "assistant", "content": exchange.text})
                if exchange.error is not None and not client.healthy():
                    gone = f"the server stopped answering in session {s}, turn {t}"
            turn = settle_turn(
                SoakTurn(
                    session=s, turn=t, exchange=exchange, not_run=gone if exchange is None else None
                )
            )
            turns.append(turn)
            if on_turn is not None:
                on_turn(turn)
        after, why = _read(memory)
        note = note or why
        sessions.append(
            SoakSession(
                index=s,
                salt=salt,
                message_tokens=per_turn,
                turns=turns,
                memory_before=before,
                memory_after=after,
                prefix_cache=_prefix(counters, client.metrics()),
            )
        )
    measured = memory.source is not None and all(
        sess.memory_before and sess.memory_after for sess in sessions
    )
    soak = Soak(
        settings=settings,
        max_model_len=max_model_len,
        target_tokens=target,
        memory_source=memory.source if measured else None,
        memory_note=None if measured else note,
        sessions=sessions,
    )
    return settle_soak(soak)
