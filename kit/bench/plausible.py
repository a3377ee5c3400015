"""What a request record can have measured: the physical range of each of its numbers.

A record with a number outside its range is not a measurement (a corrupted or forged value: a
TTFT of 1e305 s, a rate of -1e300 tok/s, a time of 5e-324 s): every summary of records leaves
it out before any statistic, and ``kit report verify`` names it in its records item.
"""

from __future__ import annotations

from collections.abc import Iterable

from kit.bench.stream import RequestRecord

MAX_S = 1e6  # seconds: a request times out in minutes, not in 11 days
MIN_S = 1e-6  # seconds: no reply crosses a socket in under a microsecond
MAX_TOKENS = 1e9  # a request's tokens or chunks: no context holds a billion
MAX_RATE = 1e9  # tokens/s of one request: a token per nanosecond
MAX_OPS = 1e15  # the host-speed workload's calls/s: far above any CPU
NOT_MEASURED = "not a plausible measurement"  # how a headline's runs left out say it

Range = tuple[float, float, str]  # lowest, highest, unit

# each number of a record by its part ("" the record itself), with its range; a time taken
# after the send is at least MIN_S. The ranges are far wider than any run, and narrow enough
# that no statistic of values within them leaves a double's range.
RANGES: dict[str, dict[str, Range]] = {
    "": {
        "max_tokens": (0, MAX_TOKENS, "tokens"),
        "ttft_s": (MIN_S, MAX_S, "s"),
        "wall_s": (MIN_S, MAX_S, "s"),
        "prompt_tokens": (0, MAX_TOKENS, "tokens"),
        "completion_tokens": (0, MAX_TOKENS, "tokens"),
        "decode_tps": (0, MAX_RATE, "tok/s"),
        "wall_tps": (0, MAX_RATE, "tok/s"),
        "chunks": (0, MAX_TOKENS, "chunks"),
        "sent_s": (0, MAX_S, "s"),
        "first_chunk_s": (MIN_S, MAX_S, "s"),
    },
    "server": {  # the server's witness: counter deltas over the request
        "requests": (0, MAX_TOKENS, "requests"),
        "generation_tokens": (0, MAX_TOKENS, "tokens"),
        "ttft_s": (0, MAX_S, "s"),
        "decode_s": (0, MAX_S, "s"),
        "e2e_s": (0, MAX_S, "s"),
    },
    "host_speed": {"python_ops_s": (MIN_S, MAX_OPS, "/s"), "kernel_ops_s": (MIN_S, MAX_OPS, "/s")},
    "cpu": {  # the scheduler's account, microseconds
        name: (0, MAX_S * 1e6, "us")
        for name in (
            "engine_run_us",
            "engine_wait_us",
            "worker_run_us",
            "worker_wait_us",
            "client_run_us",
            "client_wait_us",
        )
    },
}
CHUNK_TIMES: Range = (0, MAX_S, "s")  # each of text_chunk_times_s


def _say(name: str, value: float, limits: Range) -> str:
    low, high, unit = limits
    return f"{name} {value!r} is {NOT_MEASURED} ({low:g} to {high:g} {unit})"


def implausible(r: RequestRecord) -> list[str]:
    """Each number of the record outside its range, as 'ttft_s 1.8e+305 is not a plausible
    measurement (1e-06 to 1e+06 s)' (of its text chunk times, the first); empty for a
    measurement."""
    out = []
    for part, ranges in RANGES.items():
        model = getattr(r, part) if part else r
        for name, limits in ranges.items():
            value = getattr(model, name) if model is not None else None
            if value is not None and not limits[0] <= value <= limits[1]:  # NaN: within nothing
                out.append(_say(f"{part}.{name}" if part else name, value, limits))
    low, high, _ = CHUNK_TIMES
    bad = next(((i, t) for i, t in enumerate(r.text_chunk_times_s) if not low <= t <= high), None)
    if bad is not None:
        out.append(_say(f"text_chunk_times_s[{bad[0]}]", bad[1], CHUNK_TIMES))
    return out


def plausible(r: RequestRecord) -> bool:
    """Whether every number of the record is within its range."""
    return not implausible(r)


def left_out(records: Iterable[RequestRecord]) -> dict[int, str]:
    """The implausible ones of ``records`` (one prompt and phase), by index, each with why:
    the reason a headline gives for leaving a run out."""
    return {
        r.index: f"{NOT_MEASURED}: " + "; ".join(why) for r in records if (why := implausible(r))
    }
