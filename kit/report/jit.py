"""Where the engine's compiles while serving fell: inside a measured window, or outside every
one (a warm-up, the quality probe, the context ladder, between runs), as :func:`place_jit`
places them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from kit.bench import RequestRecord
from kit.enginelog import EngineChoices, JitEvent

# the phases whose requests make a figure; warm-ups are sent to be discarded
MEASURED_PHASES = frozenset({"measured", "prefill", "load"})
LOG_RESOLUTION_S = 1.0  # vLLM's log prints whole seconds


@dataclass(frozen=True)
class Placed:
    """A compile and the measured request it overlapped (None: outside every one)."""

    event: JitEvent
    request: str | None


@dataclass(frozen=True)
class JitPlacement:
    """The report's compiles: ``inside`` a measured request, ``outside`` every one, and
    ``unplaced`` (no log time, or the server's clock not known: a report written before kit
    recorded it, or a server kit did not start)."""

    inside: list[Placed]
    outside: list[Placed]
    unplaced: list[str]


def _utc(record: RequestRecord) -> dt.datetime | None:
    try:
        at = dt.datetime.fromisoformat(record.started_at)
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _event_utc(logged_at: str, offset_s: int, near: dt.datetime) -> dt.datetime | None:
    """The UTC start of the log's whole second, in the year that puts it nearest ``near``."""
    try:
        local = dt.datetime.strptime(logged_at, "%m-%d %H:%M:%S")
    except ValueError:
        return None
    found: list[dt.datetime] = []
    for year in (near.year - 1, near.year, near.year + 1):
        try:
            candidate = local.replace(year=year, tzinfo=dt.timezone.utc)
        except ValueError:  # 02-29 outside a leap year
            continue
        found.append(candidate - dt.timedelta(seconds=offset_s))
    return min(found, key=lambda t: abs(t - near)) if found else None


def _windows(
    records: list[RequestRecord], phases: frozenset[str]
) -> list[tuple[dt.datetime, dt.datetime, str]]:
    spans = []
    for r in records:
        start = _utc(r)
        if r.phase not in phases or start is None or r.wall_s is None:
            continue
        if not 0 <= r.wall_s < 1e6:  # not a duration a request can have: no window
            continue
        spans.append(
            (start, start + dt.timedelta(seconds=r.wall_s), f"{r.prompt} {r.phase} #{r.index}")
        )
    return spans


def _in_spans(offset: int | None, spans: list[tuple[int, int]]) -> bool | None:
    if offset is None or not spans:
        return None
    return any(a <= offset < z for a, z in spans)


def place_jit(choices: EngineChoices, records: list[RequestRecord]) -> JitPlacement:
    """Each compile the log names, placed against the measured windows: by its line's byte
    offset in the ranges kit recorded (where kit started the server it read the log's size at
    each measured window's start and end), exactly; else (and for a prefill run, which has no
    window of its own) by the log's time, its whole second on the server's clock, overlapping a
    measured request's send-to-end span."""
    events = choices.jit_events
    if not events:
        return JitPlacement([], [], list(choices.jit_kernels))
    spans = choices.measured_log_spans
    by_time = _windows(records, MEASURED_PHASES if not spans else frozenset({"prefill"}))
    offset = choices.log_utc_offset_s
    near = by_time[0][0] if by_time else None
    inside: list[Placed] = []
    outside: list[Placed] = []
    unplaced: list[str] = []
    for e in events:
        exact = _in_spans(e.offset, spans)
        hit = _by_time(e, offset, near, by_time)
        if exact is None and hit is None:
            unplaced.append(e.kernel)
        elif exact:
            inside.append(Placed(e, "a measured window"))
        elif hit:
            inside.append(Placed(e, hit))
        else:
            outside.append(Placed(e, None))
    return JitPlacement(inside, outside, list(dict.fromkeys(unplaced)))


def _by_time(
    e: JitEvent,
    offset: int | None,
    near: dt.datetime | None,
    windows: list[tuple[dt.datetime, dt.datetime, str]],
) -> str | None:
    """The measured request whose span the event's logged second overlaps; "" for none; None
    where its time cannot be placed (no time, the server's clock unknown, no request)."""
    if offset is None or near is None or e.logged_at is None:
        return None
    at = _event_utc(e.logged_at, offset, near)
    if at is None:
        return None
    end = at + dt.timedelta(seconds=LOG_RESOLUTION_S)
    return next((name for a, z, name in windows if at < z and end > a), "")
