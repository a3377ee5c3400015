"""A load record's chunk times packed into one JSON string (``text_chunk_us``), and back.

Re-exported by :mod:`kit.bench.stream`, whose records use it."""

from __future__ import annotations

COMPACT_TIMES = "text_chunk_us"
_COMPACT_CHARS = "0123456789,-"


def pack_times(times: list[float]) -> str:
    """Chunk arrival times (seconds after send, to the microsecond) as integer microseconds,
    comma-separated: the first after send, each next after the one before. A load run's
    records keep a time per token, and this string is one JSON value where the list is one
    per token, a 2,540-request sweep's 326 k of them (kit's readers stop at 300 k)."""
    out, prev = [], 0
    for t in times:
        us = round(t * 1_000_000)
        out.append(str(us - prev))
        prev = us
    return ",".join(out)


def unpack_times(packed: str) -> list[float]:
    """The inverse of :func:`pack_times`: the same floats, to the microsecond."""
    if not packed:
        return []
    if packed.strip(_COMPACT_CHARS) or ",," in packed or packed[0] == "," or packed[-1] == ",":
        raise ValueError(f"{COMPACT_TIMES}: not comma-separated microseconds")
    times, acc = [], 0
    for part in packed.split(","):
        acc += int(part)
        times.append(round(acc / 1_000_000, 6))
    return times
