"""The protocol's per-request definitions against hand-computed streams."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from kit.bench import request_body, stream_request, summarize_prompt
from kit.recipe import Bench, Prompt


def sse(*chunks: dict | str) -> bytes:
    out = []
    for c in chunks:
        out.append("data: " + (c if isinstance(c, str) else json.dumps(c)) + "\n\n")
    return "".join(out).encode()


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


def scripted_clock(times: list[float]) -> Iterator[float]:
    yield from times


def run(body: bytes, times: list[float], max_tokens: int = 100) -> object:
    transport = httpx.MockTransport(lambda req: httpx.Response(200, content=body))
    client = httpx.Client(transport=transport)
    clock = scripted_clock(times)
    req = {"max_tokens": max_tokens}
    return stream_request(
        client,
        "http://x",
        req,
        prompt="p",
        phase="measured",
        index=0,
        usable_fraction=0.25,
        deadline_s=100,
        clock=lambda: next(clock),
    )


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
    # t_send=10.0; each SSE line read advances the clock (blank separator lines are skipped
    # by iter_lines, so one tick per data line)
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
    transport = httpx.MockTransport(lambda req: httpx.Response(400, text="bad max_tokens"))
    rec = stream_request(
        httpx.Client(transport=transport),
        "http://x",
        {"max_tokens": 5},
        prompt="p",
        phase="warmup",
        index=0,
        usable_fraction=0.25,
        deadline_s=10,
    )
    assert rec.error == "HTTP 400: bad max_tokens"


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
