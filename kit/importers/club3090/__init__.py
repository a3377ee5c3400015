"""Club-3090's own formats: the stdout of ``scripts/bench.sh`` (:mod:`.log`) and a row of its
``BENCHMARKS.md`` (:mod:`.rows`)."""

from __future__ import annotations

from kit.importers.club3090 import log, rows

LOG_READER = log.READER
ROWS_READER = rows.READER

__all__ = ["LOG_READER", "ROWS_READER"]
