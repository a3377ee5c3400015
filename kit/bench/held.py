"""Held streams: a measured run whose client timing is not the engine's.

A server may hold a stream and send it all at once (seen on 2-core CPU hosts, whoever the
client): the first token then waits for most of the request and the rest floods in, so
``tokens / (wall - TTFT)`` times the delivery, not the decoding (:func:`held_runs`).
"""

from __future__ import annotations

from kit.bench.plausible import plausible
from kit.bench.stream import RequestRecord
from kit.metrics import RequestWitness

WITNESS_TOL = 0.25
TTFT_SHARE = 0.5
TTFT_FACTOR = 4.0
BURST_S = 0.001
BURST_MIN_CHUNKS = 8
# the API server saw its first token this close to the client's: the hold came before it
SAME_TTFT_TOL = 0.25


def burst(r: RequestRecord) -> bool:
    """Whether a stream's text chunks all but arrived at once: nine in ten within BURST_S of
    the last, in a stream of at least BURST_MIN_CHUNKS chunks."""
    times = r.text_chunk_times_s
    if len(times) < BURST_MIN_CHUNKS:
        return False
    late = sum(1 for t in times if times[-1] - t <= BURST_S)
    return late >= 0.9 * len(times)


def quickest_first_token(records: list[RequestRecord]) -> float | None:
    """The bench's quickest first token over its sequential runs (warm-ups included; those
    that are not plausible measurements left out, :mod:`kit.bench.plausible`)."""
    ttfts = [
        r.ttft_s
        for r in records
        if r.phase in ("warmup", "measured") and r.error is None and r.ttft_s and plausible(r)
    ]
    return min(ttfts) if ttfts else None


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def _stage(r: RequestRecord, w: RequestWitness) -> str:
    """Where the hold was, from the API server's own first-token time."""
    if w.ttft_s is None or r.ttft_s is None:
        return ""
    if w.ttft_s >= (1 - SAME_TTFT_TOL) * r.ttft_s:
        return (
            f"; the API server too saw its first token only after {_ms(w.ttft_s)}: held "
            "between the engine core and the API server"
        )
    return (
        f"; the API server had its first token after {_ms(w.ttft_s)}: held after it (its "
        "HTTP stream, the socket or the client)"
    )


def _witness_says(r: RequestRecord) -> tuple[bool, str] | None:
    """(held, why) from the server's witness; None when it did not see this request alone."""
    w = r.server
    if w is None or not w.single or not w.decode_s or r.wall_s is None or r.ttft_s is None:
        return None
    span = r.wall_s - r.ttft_s
    if span >= (1 - WITNESS_TOL) * w.decode_s:
        return False, ""
    tokens = r.completion_tokens or 0
    why = (
        f"the client saw decode take {_ms(span)} ({r.decode_tps or 0:,.0f} tok/s), the engine "
        f"took {_ms(w.decode_s)} ({tokens / w.decode_s:,.0f} tok/s; witness: the server's "
        f"/metrics for this request){_stage(r, w)}"
    )
    return True, why


def _shape_says(r: RequestRecord, quickest: float | None) -> str | None:
    if r.ttft_s is None or r.wall_s is None or not r.wall_s:
        return None
    span = r.wall_s - r.ttft_s
    tokens = r.completion_tokens or 0
    if (
        quickest is not None
        and r.ttft_s > TTFT_SHARE * r.wall_s
        and r.ttft_s > TTFT_FACTOR * quickest
    ):
        return (
            f"first token after {_ms(r.ttft_s)} ({r.ttft_s / r.wall_s:.0%} of the stream; the "
            f"bench's quickest: {_ms(quickest)}), then {tokens} tokens in {_ms(span)} "
            f"({r.decode_tps or 0:,.0f} tok/s; witness: the stream's shape, no server figures)"
        )
    if burst(r):
        return (
            f"nine in ten text chunks within {BURST_S * 1000:g} ms of the last ({tokens} tokens "
            f"in {_ms(span)} after the first; witness: the stream's shape)"
        )
    return None


def held_runs(prompt: str, records: list[RequestRecord]) -> dict[int, str]:
    """A prompt's held measured runs, by index, each with what showed it. A run is held when

    - **the server disagrees** (where it witnessed this request alone,
      :class:`~kit.metrics.RequestWitness`): the client's decode span is shorter than the
      engine's first-to-last-token time by more than ``WITNESS_TOL``; or, without a witness,
    - **the stream's own shape says so**: its first token came after more than ``TTFT_SHARE``
      of its wall time and more than ``TTFT_FACTOR`` times the bench's quickest first token; or
      nine in ten of its text chunks came within ``BURST_S`` of the last.

    A held run stays in the records and is left out of the headline (:mod:`kit.noise`)."""
    quickest = quickest_first_token(records)
    held: dict[int, str] = {}
    for r in records:
        if r.prompt != prompt or r.phase != "measured" or not r.usable:
            continue
        witness = _witness_says(r)
        why = witness[1] if witness is not None else _shape_says(r, quickest)
        if why:
            held[r.index] = why
    return held
