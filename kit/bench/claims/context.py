"""The context ladder (``bench.context``): one request a depth up to the served context, each a
pass key planted at a seeded position in filler text and asked for at the end. Per depth:
TTFT, prefill and decode tok/s there, whether the key came back; a failure is the engine's
own message, kept as a result. docs/pipeline.md says how."""

from __future__ import annotations

import logging
import random
import secrets
from collections.abc import Callable
from typing import Literal

from pydantic import Field

from kit.base import KitModel
from kit.bench.claims.exchange import (
    ClaimClient,
    Exchange,
    Message,
    exchange_decode_tps,
    fit_units,
    prefill_tps,
    ttft_ms,
)
from kit.bench.stream import RequestTag
from kit.recipe.serving import ContextSettings

log = logging.getLogger(__name__)

# The pass-key retrieval prompt (Mohtashami & Jaggi, 2023): filler that says nothing, the key
# said once, asked for at the end. A filler unit is one of its sentences, in turn (a prompt is
# sized to within a sentence of its depth).
FILLER = ("The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
          "There and back again.")  # fmt: skip
UNIT_CHARS = sum(len(f) + 1 for f in FILLER) // len(FILLER)
INTRO = "There is a pass key hidden inside a lot of irrelevant text. Find it and remember it."
NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = "What is the pass key? Answer with the number only."
NOT_JUDGED = (
    "not judged: the weights are synthetic (model.source: synthetic), so the model recalls "
    "nothing; depths, timings and failures stand"
)

RungStatus = Literal["served", "failed", "not run"]


class ContextRung(KitModel):
    """One depth of the ladder: what was asked and the raw exchange, then its figures (from the
    exchange alone: kit report verify recomputes them)."""

    depth: int = Field(description="Prompt tokens asked for (the question and template in).")
    fraction: float | None = Field(
        description="The share of max_model_len it came from; None for a depth given in tokens."
    )
    key: str = Field(description="The pass key planted at this depth.")
    position: float = Field(
        description="Where the key sits in the filler: the share of filler units before it."
    )
    salt: str = Field(description="Random text opening the prompt: no prefix cache hit.")
    exchange: Exchange | None = Field(description="The request as it happened; None: not run.")
    not_run: str | None = Field(description="Why it was not sent (None: it was).")
    status: RungStatus = Field(
        "not run",
        description="served: the reply came back; failed: the exchange's error (an out-of-"
        "memory, an HTTP error body, a timeout) is the result; not run: the server was gone.",
    )
    prompt_tokens: int | None = Field(None, description="Prompt tokens served (usage).")
    ttft_ms: float | None = Field(None, description="Time to the first token, ms.")
    prefill_tps: float | None = Field(None, description="prompt_tokens / TTFT, tok/s.")
    decode_tps: float | None = Field(
        None, description="completion tokens / (wall - TTFT) at this depth, tok/s."
    )
    recalled: bool | None = Field(
        None,
        description="Whether the reply holds the key; None where not judged or not served.",
    )


def settle_rung(rung: ContextRung, judged: bool) -> ContextRung:
    """The rung with its figures computed from its exchange alone (kit report verify compares
    the stored rung with this)."""
    x = rung.exchange
    status: RungStatus = "not run" if x is None else "failed" if x.error is not None else "served"
    return rung.model_copy(
        update={
            "status": status,
            "prompt_tokens": x.prompt_tokens if x is not None else None,
            "ttft_ms": ttft_ms(x) if x is not None else None,
            "prefill_tps": prefill_tps(x) if x is not None else None,
            "decode_tps": exchange_decode_tps(x) if x is not None else None,
            "recalled": rung.key in x.text
            if x is not None and status == "served" and judged
            else None,
        }
    )


class ContextLadder(KitModel):
    """``bench.context``: what the engine reported at boot, then the ladder of depths."""

    settings: ContextSettings = Field(description="The recipe's bench.context, as run.")
    max_model_len: int = Field(description="The served context the depths were taken from.")
    max_model_len_from: Literal["server", "recipe"] = Field(
        description="server: /v1/models said it; recipe: server.max_model_len (it did not)."
    )
    recall_judged: bool = Field(description="Whether the key's return is judged.")
    recall_note: str | None = Field(description="Why not, where it is not.")
    kv_cache_tokens: int | None = Field(
        description="KV-cache capacity the engine logged at boot, tokens (kit.enginelog); None: "
        "not in its log, or no log (a server kit did not start)."
    )
    max_concurrency: float | None = Field(
        description="Requests of max_model_len tokens that KV cache holds at once, as logged."
    )
    draft_weights_bytes: int | None = Field(
        description="The draft's weights, bytes (its safetensors headers); None: no draft, or "
        "kit did not build it."
    )
    draft_kv_bytes_per_token: int | None = Field(
        description="The draft's KV cache per token, bytes, in the server's KV dtype "
        "(kit.roofline.checkpoint); None: no draft, or kit did not build it."
    )
    rungs: list[ContextRung] = Field(description="The depths, shallowest first.")
    largest_depth_served: int | None = Field(
        None, description="The deepest depth asked whose reply came back, tokens; None: none did."
    )
    largest_prompt_tokens_served: int | None = Field(
        None, description="Prompt tokens that depth served (usage)."
    )
    served: int = Field(0, description="Depths whose reply came back.")
    failed: int = Field(0, description="Depths that failed (their error is the result).")
    recalled: int | None = Field(
        None,
        description="Served depths whose reply held the key; None where recall is not judged.",
    )


def settle_ladder(ladder: ContextLadder) -> ContextLadder:
    """The ladder with every figure computed from its rungs' exchanges (kit report verify
    compares the stored ladder with this)."""
    judged = ladder.recall_judged
    rungs = [settle_rung(r, judged) for r in ladder.rungs]
    served = [r for r in rungs if r.status == "served"]
    deepest = max(served, key=lambda r: r.depth) if served else None
    return ladder.model_copy(
        update={
            "rungs": rungs,
            "largest_depth_served": deepest.depth if deepest else None,
            "largest_prompt_tokens_served": deepest.prompt_tokens if deepest else None,
            "served": len(served),
            "failed": sum(1 for r in rungs if r.status == "failed"),
            "recalled": sum(1 for r in served if r.recalled) if judged else None,
        }
    )


def planned_depths(settings: ContextSettings, max_model_len: int) -> list[tuple[int, float | None]]:
    """The ladder's depths (with the fraction each came from), shallowest first, each capped at
    max_model_len - max_tokens; one request a depth."""
    top = max(max_model_len - settings.max_tokens, 1)
    asked: list[tuple[int, float | None]] = (
        [(d, None) for d in settings.depths]
        if settings.depths is not None
        else [(int(f * max_model_len), f) for f in settings.fractions]
    )
    out: dict[int, float | None] = {}
    for depth, fraction in sorted(asked, key=lambda a: a[0]):
        out.setdefault(max(min(depth, top), 1), fraction)
    return list(out.items())


def placement(seed: int, index: int) -> tuple[str, float]:
    """The pass key and its position for the ``index``-th depth: seeded, so a re-run plants
    the same key at the same place."""
    rng = random.Random(f"kit-context:{seed}:{index}")
    return str(rng.randrange(10_000, 100_000)), round(rng.random(), 4)


def filler(units: int, start: int = 0) -> str:
    """``units`` sentences of filler, from the ``start``-th on."""
    return " ".join(FILLER[(start + i) % len(FILLER)] for i in range(units))


def prompt(salt: str, key: str, position: float, units: int) -> list[Message]:
    """The conversation of one depth: ``units`` filler units, the key after the share
    ``position`` of them, the question last."""
    before = int(position * units)
    parts = [
        f"[{salt}] {INTRO}",
        filler(before),
        NEEDLE.format(key=key),
        filler(units - before, before),
        QUESTION,
    ]
    return [{"role": "user", "content": "\n".join(p for p in parts if p)}]


def _counter(
    client: ClaimClient, salt: str, key: str, position: float
) -> Callable[[int], int | None]:
    """The server's token count of one depth's prompt with a given number of filler units."""
    return lambda units: client.count_tokens(prompt(salt, key, position, units))


def run_context(
    client: ClaimClient,
    settings: ContextSettings,
    max_model_len: int,
    *,
    from_server: bool,
    judged: bool,
    on_rung: Callable[[ContextRung], None] | None = None,
) -> ContextLadder:
    """The ladder against one server. A depth that fails is kept with its error; once the
    server stops answering /health, the depths left are not run, and say so."""
    timeout = settings.timeout_s or client.bench.request_timeout_s
    rungs: list[ContextRung] = []
    gone: str | None = None
    for i, (depth, fraction) in enumerate(planned_depths(settings, max_model_len)):
        key, position = placement(settings.seed, i)
        salt = secrets.token_hex(8)
        exchange: Exchange | None = None
        if gone is None:
            count = _counter(client, salt, key, position)
            units = fit_units(count, depth, UNIT_CHARS)
            tag = RequestTag(f"context-{depth}", "prefill", 0, salt)
            messages = prompt(salt, key, position, units)
            exchange = client.send(messages, settings.max_tokens, tag, first_token_s=timeout)
            if exchange.error is not None and not client.healthy():
                gone = f"the server stopped answering after depth {depth}"
        rung = ContextRung(
            depth=depth,
            fraction=fraction,
            key=key,
            position=position,
            salt=salt,
            exchange=exchange,
            not_run=gone if exchange is None else None,
        )
        rungs.append(settle_rung(rung, judged))
        if on_rung is not None:
            on_rung(rungs[-1])
    ladder = ContextLadder(
        settings=settings,
        max_model_len=max_model_len,
        max_model_len_from="server" if from_server else "recipe",
        recall_judged=judged,
        recall_note=None if judged else NOT_JUDGED,
        kv_cache_tokens=None,
        max_concurrency=None,
        draft_weights_bytes=None,
        draft_kv_bytes_per_token=None,
        rungs=rungs,
    )
    return settle_ladder(ladder)
