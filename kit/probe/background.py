"""The life both samplers share: a reading every ``interval_s`` on a daemon thread.

:class:`~kit.probe.sampler.GpuSampler` and :class:`~kit.probe.hostload.HostLoadSampler` are
context managers built on :class:`BackgroundSampler`.
"""

from __future__ import annotations

import threading
from types import TracebackType

from kit.errors import BadInputError


class BackgroundSampler:
    """Calls :meth:`_tick` every ``interval_s`` under the lock; :meth:`_finish` at the end. In a
    subclass, ``__enter__`` starts the thread, ``__exit__`` stops it and sums up, and every
    reading, from the thread or from ``mark()``, happens under one lock."""

    def __init__(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise BadInputError(
                f"sampling interval must be positive, not {interval_s}", hint="try 0.5"
            )
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._active = False  # inside the ``with`` block: mark() may be called

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._finish()

    def _start_thread(self, name: str) -> None:
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                self._tick()

    def _tick(self) -> None:
        """One background reading; the lock is held."""
        raise NotImplementedError

    def _finish(self) -> None:
        """After the thread has stopped: the last reading and the result."""
        raise NotImplementedError
