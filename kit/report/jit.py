"""Where the engine's compiles while serving fell: inside a measured request, or outside every
one (a warm-up, the quality probe, between runs), from the log's time and the records' times."""

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


def _windows(records: list[RequestRecord]) -> list[tuple[dt.datetime, dt.datetime, str]]:
    spans = []
    for r in records:
        start = _utc(r)
        if r.phase not in MEASURED_PHASES or start is None or r.wall_s is None:
            continue
        if not 0 <= r.wall_s < 1e6:  # not a duration a request can have: no window
            continue
        spans.append(
            (start, start + dt.timedelta(seconds=r.wall_s), f"{r.prompt} {r.phase} #{r.index}")
        )
    return spans


def place_jit(choices: EngineChoices, records: list[RequestRecord]) -> JitPlacement:
    """Each compile the log names, placed against the measured requests' spans: a whole logged
    second that overlaps a request's send-to-end span is inside it."""
    offset = choices.log_utc_offset_s
    events = choices.jit_events
    if offset is None or not events:
        return JitPlacement([], [], list(choices.jit_kernels))
    windows = _windows(records)
    starts = [w[0] for w in windows]
    if not starts:
        return JitPlacement([], [], list(choices.jit_kernels))
    inside: list[Placed] = []
    outside: list[Placed] = []
    unplaced: list[str] = []
    for e in events:
        at = _event_utc(e.logged_at, offset, starts[0]) if e.logged_at else None
        if at is None:
            unplaced.append(e.kernel)
            continue
        end = at + dt.timedelta(seconds=LOG_RESOLUTION_S)
        hit = next((name for a, z, name in windows if at < z and end > a), None)
        (inside if hit is not None else outside).append(Placed(e, hit))
    return JitPlacement(inside, outside, list(dict.fromkeys(unplaced)))
