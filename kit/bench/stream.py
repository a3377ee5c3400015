"""One streamed chat request, timed per the protocol, and the record it leaves.

TTFT runs from the send to the first chunk carrying text, wall to the ``[DONE]`` line; tokens
come from the final usage chunk only. What goes wrong (an HTTP error, a malformed or stalled
stream, a missing usage chunk) lands in the record's ``error``, never as an exception.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx
from pydantic import Field

from kit.base import KitModel
from kit.metrics import decode_tps, is_usable, wall_tps
from kit.recipe import Bench

Phase = Literal["warmup", "measured", "prefill_warmup", "prefill"]


class RequestRecord(KitModel):
    """One request as it happened."""

    prompt: str = Field(description="Prompt name (or 'prefill-<depth>').")
    phase: Phase = Field(description="warmup and prefill_warmup are discarded.")
    index: int = Field(description="Index within its prompt and phase.")
    max_tokens: int = Field(description="max_tokens sent.")
    started_at: str = Field(description="UTC time just before sending.")
    ttft_s: float | None = Field(description="Send to first chunk with text.")
    wall_s: float | None = Field(description="Send to end of stream.")
    prompt_tokens: int | None = Field(description="From the final usage chunk.")
    completion_tokens: int | None = Field(description="From the final usage chunk.")
    decode_tps: float | None = Field(description="completion_tokens / (wall - TTFT).")
    wall_tps: float | None = Field(description="completion_tokens / wall.")
    finish_reason: str | None = Field(description="As the server reported.")
    usable: bool = Field(description="No error and at least the usable share of max_tokens.")
    chunks: int = Field(description="SSE data chunks received.")
    text_chunk_times_s: list[float] = Field(description="Arrival of each text chunk after send.")
    text: str = Field(description="Generated text.")
    salt: str | None = Field(None, description="Prefill probe salt.")
    error: str | None = Field(None, description="What went wrong, if anything.")


class BenchAborted(Exception):
    """Raised inside the bench loop to stop early; the reason goes into the result."""


def utc_now_ms() -> str:
    """The UTC time now, ISO 8601 to the millisecond."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def request_body(bench: Bench, model: str, text: str, max_tokens: int) -> dict[str, Any]:
    """The streamed chat request for one prompt, the recipe's sampling sent explicitly."""
    s = bench.sampling
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": s.top_k,
        "min_p": s.min_p,
        "chat_template_kwargs": dict(bench.chat_template_kwargs),
    }
    if s.seed is not None:
        body["seed"] = s.seed
    if bench.ignore_eos:
        body["ignore_eos"] = True
    return body


def _delta_text(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    delta = choices[0].get("delta") or {}
    parts = [delta.get(k) for k in ("content", "reasoning_content", "reasoning")]
    return "".join(p for p in parts if isinstance(p, str))


def stream_request(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    *,
    prompt: str,
    phase: Phase,
    index: int,
    usable_fraction: float,
    deadline_s: float,
    clock: Callable[[], float] = time.perf_counter,
    salt: str | None = None,
) -> RequestRecord:
    """Send one streamed chat request and time it per the protocol."""
    started = utc_now_ms()
    ttft: float | None = None
    wall: float | None = None
    usage: dict[str, Any] | None = None
    finish: str | None = None
    chunks = 0
    times: list[float] = []
    text: list[str] = []
    error: str | None = None
    t_send = clock()
    try:
        with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
            if resp.status_code != 200:
                detail = resp.read().decode(errors="replace")[:300]
                raise BenchAborted(f"HTTP {resp.status_code}: {detail}")
            done = False
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                now = clock()
                if now - t_send > deadline_s:
                    raise BenchAborted(f"request exceeded {deadline_s:.0f} s")
                data = line[5:].strip()
                if data == "[DONE]":
                    wall = now - t_send
                    done = True
                    break
                chunks += 1
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise BenchAborted(f"malformed stream chunk: {data[:120]}") from None
                if "error" in chunk and not chunk.get("choices"):
                    raise BenchAborted(f"server error in stream: {chunk['error']}")
                piece = _delta_text(chunk)
                if piece:
                    if ttft is None:
                        ttft = now - t_send
                    times.append(round(now - t_send, 6))
                    text.append(piece)
                for choice in chunk.get("choices") or []:
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                if chunk.get("usage"):
                    usage = chunk["usage"]
            if not done:
                raise BenchAborted("stream ended without [DONE]")
    except BenchAborted as exc:
        error = str(exc)
    except httpx.TimeoutException:
        error = "stream stalled (no data within the stall timeout)"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    tokens = int(usage["completion_tokens"]) if usage and error is None else None
    if error is None and usage is None:
        error = "no usage chunk in the stream"
    if error is None and ttft is None:
        error = "no chunk carried text"
    max_tokens = int(body["max_tokens"])
    # the stored (rounded) times are what the figures derive from, so a verifier recomputing
    # them from the record gets the same numbers
    ttft = round(ttft, 6) if ttft is not None else None
    wall = round(wall, 6) if wall is not None else None
    return RequestRecord(
        prompt=prompt,
        phase=phase,
        index=index,
        max_tokens=max_tokens,
        started_at=started,
        ttft_s=ttft,
        wall_s=wall,
        prompt_tokens=int(usage["prompt_tokens"]) if usage else None,
        completion_tokens=tokens,
        decode_tps=decode_tps(tokens, wall, ttft) if tokens and wall and ttft else None,
        wall_tps=wall_tps(tokens, wall) if tokens and wall else None,
        finish_reason=finish,
        usable=error is None and is_usable(tokens, max_tokens, usable_fraction),
        chunks=chunks,
        text_chunk_times_s=times,
        text="".join(text),
        salt=salt,
        error=error,
    )
