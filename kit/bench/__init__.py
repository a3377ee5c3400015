"""Bench stage: the Club-3090 reference protocol against any OpenAI-compatible chat server.

Per prompt: warm-ups (discarded), then measured requests, sequential, one stream at a time,
sampling sent explicitly; TTFT to the first chunk carrying text; tokens from the final usage
chunk only. /metrics is scraped around each measured window for speculative-decoding and
server-side figures. Every request's raw record is kept; an error or a dying server ends the
bench early with the runs so far, marked incomplete.

- :mod:`kit.bench.stream`: one streamed request's rules and its :class:`RequestRecord`.
- :mod:`kit.bench.aio`: the client, for both protocols (:class:`SequentialClient` one at a time).
- :mod:`kit.bench.runner`: :class:`Bencher`, the protocol against one server.
- :mod:`kit.bench.server`: the served model and the server's /metrics, outside the timing.
- :mod:`kit.bench.summary`: :class:`BenchResult` and the summaries computed from the records.
"""

from __future__ import annotations

from kit.bench.aio import SequentialClient
from kit.bench.runner import Bencher, BenchRun, Watch
from kit.bench.server import model_info
from kit.bench.stream import (
    BenchAborted,
    Phase,
    RequestRecord,
    RequestTag,
    StreamLimits,
    request_body,
)
from kit.bench.summary import (
    BenchResult,
    PrefillResult,
    PromptSummary,
    summarize_prefill,
    summarize_prompt,
)

__all__ = [
    "BenchAborted",
    "BenchResult",
    "BenchRun",
    "Bencher",
    "Phase",
    "PrefillResult",
    "PromptSummary",
    "RequestRecord",
    "RequestTag",
    "SequentialClient",
    "StreamLimits",
    "Watch",
    "model_info",
    "request_body",
    "summarize_prefill",
    "summarize_prompt",
]
