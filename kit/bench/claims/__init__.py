"""What a published result claims beside its speed, measured after the bench: the context it
serves (:mod:`~kit.bench.claims.context`, ``bench.context``) and that it holds over a long
conversation (:mod:`~kit.bench.claims.soak`, ``bench.soak``). Each keeps its raw exchanges
(:mod:`~kit.bench.claims.exchange`) and computes its figures from them alone, with the
functions ``kit report verify`` calls (``settle_ladder``, ``settle_soak``)."""

from __future__ import annotations

from kit.bench.claims.context import (
    NOT_JUDGED,
    ContextLadder,
    ContextRung,
    planned_depths,
    run_context,
    settle_ladder,
)
from kit.bench.claims.exchange import ClaimClient, Exchange
from kit.bench.claims.memory import MemoryProbe, MemoryReading
from kit.bench.claims.soak import (
    PrefixCache,
    Soak,
    SoakSession,
    SoakTurn,
    run_soak,
    settle_soak,
    target_tokens,
)

__all__ = [
    "NOT_JUDGED",
    "ClaimClient",
    "ContextLadder",
    "ContextRung",
    "Exchange",
    "MemoryProbe",
    "MemoryReading",
    "PrefixCache",
    "Soak",
    "SoakSession",
    "SoakTurn",
    "planned_depths",
    "run_context",
    "run_soak",
    "settle_ladder",
    "settle_soak",
    "target_tokens",
]
