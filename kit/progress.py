"""Progress on long work: a one-line status on a terminal, nothing when stderr is not a TTY.

Non-interactive runs (CI, logs) get the stages' ``logging`` lines instead.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Status:
    """A single updating status line on stderr, active only on a TTY."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._last = 0.0
        self._width = 0

    def __call__(self, text: str) -> None:
        self.update(text)

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.2:
            return
        self._last = now
        pad = max(self._width - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)

    def done(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
