"""The protocol's per-request definitions against hand-computed streams.

The client (kit.bench.SequentialClient) reads a scripted connection: each read of the socket
returns the next SSE event, and the clock ticks once per read, so the times are exact.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kit.bench import (
    RequestTag,
    SequentialClient,
    StreamLimits,
    request_body,
    summarize_prompt,
)
from kit.recipe import Bench, Prompt


def sse(*chunks: dict | str) -> list[bytes]:
    """One SSE event per socket read."""
    return [
        ("data: " + (c if isinstance(c, str) else json.dumps(c)) + "\n\n").encode() for c in chunks
    ]


class ScriptedReader:
    """What the client reads: a status line and headers, then one body piece per read, then
    the end of the body (the connection closes)."""

    def __init__(self, status: int, pieces: list[bytes]) -> None:
        self.head = f"HTTP/1.1 {status} X\r\nConnection: close\r\n\r\n".encode()
        self.pieces = list(pieces)

    async def readuntil(self, sep: bytes) -> bytes:
        end = self.head.index(sep) + len(sep)
        line, self.head = self.head[:end], self.head[end:]
        return line

    async def read(self, n: int) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


class ScriptedWriter:
    def __init__(self) -> None:
        self.sent = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent += data

    async def drain(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        pass


def scripted_clock(times: list[float]) -> Callable[[], float]:
    """The send, then one tick per read; past the script, the last time again."""
    it = iter(times)
    last = [times[-1]]

    def now() -> float:
        last[0] = next(it, last[0])
        return last[0]

    return now


def client(status: int, pieces: list[bytes], times: list[float] | None = None) -> SequentialClient:
    async def opener(host: str, port: int) -> tuple:  # type: ignore[type-arg]
        return ScriptedReader(status, pieces), ScriptedWriter()

    clock = scripted_clock(times) if times else scripted_clock([0.0])
    return SequentialClient("http://x", opener=opener, clock=clock)  # type: ignore[arg-type]


def delta(
    content: str | None = None,
    role: str | None = None,
    finish: str | None = None,
    reasoning: str | None = None,
) -> dict:
    d: dict = {}
    if role:
        d["role"] = role
    if content is not None:
        d["content"] = content
    if reasoning is not None:
        d["reasoning_content"] = reasoning
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def usage(prompt: int, completion: int) -> dict:
    return {
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def run(body: list[bytes], times: list[float], max_tokens: int = 100) -> object:
    c = client(200, body, times)
    try:
        return c.stream(
            {"max_tokens": max_tokens},
            RequestTag("p", "measured", 0),
            StreamLimits(usable_fraction=0.25, deadline_s=100, stall_s=10),
        )
    finally:
        c.close()


def test_ttft_skips_role_chunk_and_tokens_come_from_usage() -> None:
    # lines: role chunk, "Hel" (multi-token chunk), "lo", finish, usage, [DONE]
    body = sse(
        delta(role="assistant", content=""),
        delta("Hel"),
        delta("lo"),
        delta(finish="length"),
        usage(12, 40),
        "[DONE]",
    )
    # t_send=10.0; each read (one SSE event) advances the clock
    times = [10.0, 10.05, 10.20, 10.50, 10.90, 10.91, 11.00]
    rec = run(body, times)
    assert rec.error is None
    assert rec.ttft_s == pytest.approx(0.20)  # the first chunk with text, not the role chunk
    assert rec.wall_s == pytest.approx(1.00)  # [DONE]
    assert rec.completion_tokens == 40  # usage, not the 2 text chunks
    assert rec.prompt_tokens == 12
    assert rec.decode_tps == pytest.approx(40 / 0.80)
    assert rec.wall_tps == pytest.approx(40 / 1.00)
    assert rec.text == "Hello" and rec.finish_reason == "length"
    assert rec.usable is True
    assert rec.text_chunk_times_s == [pytest.approx(0.2), pytest.approx(0.5)]


def test_reasoning_text_counts_for_ttft() -> None:
    body = sse(
        delta(role="assistant"), delta(reasoning="think"), delta("x"), usage(1, 30), "[DONE]"
    )
    rec = run(body, [0.0, 0.1, 0.3, 0.4, 0.5, 0.6])
    assert rec.ttft_s == pytest.approx(0.3)


def test_short_run_is_not_usable() -> None:
    body = sse(delta("a"), delta(finish="stop"), usage(5, 24), "[DONE]")
    rec = run(body, [0.0, 0.1, 0.2, 0.3, 0.4])
    assert rec.error is None and rec.usable is False  # 24 < 25 % of 100


def test_missing_usage_is_an_error() -> None:
    rec = run(sse(delta("a"), "[DONE]"), [0.0, 0.1, 0.2])
    assert rec.error == "no usage chunk in the stream"
    assert rec.usable is False and rec.completion_tokens is None


def test_stream_without_done_is_an_error() -> None:
    rec = run(sse(delta("a"), usage(1, 50)), [0.0, 0.1, 0.2, 0.3])
    assert rec.error == "stream ended without [DONE]"


def test_http_error_is_recorded() -> None:
    c = client(400, [b"bad max_tokens"])
    rec = c.stream(
        {"max_tokens": 5},
        RequestTag("p", "warmup", 0),
        StreamLimits(usable_fraction=0.25, deadline_s=10, stall_s=10),
    )
    c.close()
    assert rec.error == "HTTP 400: bad max_tokens"
    assert rec.sent_s is None  # a sequential record carries no load-point send time


def test_the_request_is_a_streamed_post() -> None:
    writers: list[ScriptedWriter] = []

    async def opener(host: str, port: int) -> tuple:  # type: ignore[type-arg]
        writers.append(ScriptedWriter())
        return ScriptedReader(200, sse(delta("a"), usage(1, 50), "[DONE]")), writers[-1]

    c = SequentialClient("http://h:8000", opener=opener)  # type: ignore[arg-type]
    body = request_body(Bench(), "m", "hello", 64)
    rec = c.stream(
        body, RequestTag("p", "measured", 0), StreamLimits(0.25, deadline_s=10, stall_s=10)
    )
    c.close()
    assert rec.error is None and rec.completion_tokens == 50
    head, _, sent = writers[0].sent.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: h:8000\r\n")
    assert json.loads(sent) == body
    assert writers[0].closed  # closed with the client


def test_request_body_sends_sampling_explicitly() -> None:
    b = Bench()
    body = request_body(b, "m", "hello", 1000)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["temperature"], body["top_p"], body["top_k"], body["min_p"]) == (
        0.6,
        0.95,
        20,
        0.0,
    )
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert "ignore_eos" not in body
    assert request_body(b.model_copy(update={"ignore_eos": True}), "m", "x", 1)["ignore_eos"]


def test_summary_uses_usable_measured_runs_only() -> None:
    good = run(sse(delta("a"), usage(1, 100), "[DONE]"), [0.0, 0.5, 0.6, 1.5])
    slow = run(sse(delta("a"), usage(1, 100), "[DONE]"), [0.0, 0.5, 0.6, 2.5])
    short = run(sse(delta("a"), usage(1, 3), "[DONE]"), [0.0, 0.5, 0.6, 0.7])
    warm = good.model_copy(update={"phase": "warmup"})
    s = summarize_prompt(Prompt(name="p", text="t", max_tokens=100), [warm, good, slow, short])
    assert (s.measured, s.usable) == (3, 2)
    assert s.decode_tps.mean == pytest.approx((100 / 1.0 + 100 / 2.0) / 2)
    assert s.ttft_ms.mean == pytest.approx(500.0)
