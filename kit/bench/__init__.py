"""Bench stage: the Club-3090 reference protocol against any OpenAI-compatible chat server.

Per prompt: warm-ups (discarded), then measured requests, sequential, one stream at a time,
sampling sent explicitly (:class:`Bencher`); every request's raw record is kept. The rules of
one streamed request are :mod:`kit.bench.stream`'s, the summaries :mod:`kit.bench.summary`'s.
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
