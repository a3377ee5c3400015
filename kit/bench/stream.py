"""One streamed chat request as the protocol judges it (:class:`StreamState`), the limits it
is held to (:class:`StreamLimits`), and the record it leaves (:class:`RequestRecord`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from kit.base import KitModel
from kit.bench.packed import COMPACT_TIMES, pack_times, unpack_times
from kit.metrics import RequestWitness, decode_tps, is_usable, wall_tps
from kit.probe.hostspeed import HostSpeed
from kit.probe.schedstat import CpuAccount
from kit.recipe import Bench

log = logging.getLogger(__name__)

Phase = Literal["warmup", "measured", "prefill_warmup", "prefill", "load_warmup", "load"]


def _compact_schema(schema: dict[str, Any]) -> None:
    """The record as written: a load record's chunk times packed (either key, never both)."""
    props = schema["properties"]
    props[COMPACT_TIMES] = {
        "type": "string",
        "pattern": "^(-?[0-9]+(,-?[0-9]+)*)?$",
        "description": "Load points only: text_chunk_times_s packed (kit.bench.stream."
        "pack_times): integer microseconds, the first after send, each next after the one "
        "before.",
    }
    schema["required"] = [k for k in schema["required"] if k != "text_chunk_times_s"]
    schema["oneOf"] = [{"required": ["text_chunk_times_s"]}, {"required": [COMPACT_TIMES]}]


class RequestRecord(KitModel):
    """One request as it happened."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_compact_schema)

    prompt: str = Field(description="Prompt name (or 'prefill-<depth>').")
    phase: Phase = Field(description="warmup, prefill_warmup and load_warmup are discarded.")
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
    sent_s: float | None = Field(
        None,
        description="Load points only: the send time, seconds after the point's start "
        "(a monotonic clock); the point's duration and throughput derive from it.",
    )
    first_chunk_s: float | None = Field(
        None,
        description="Load points only: send to the first chunk with choices, text or not "
        "(where vLLM's benchmark stops its TTFT clock; ttft_s waits for text, so a first token "
        "whose text is empty, as a partial UTF-8 sequence, puts it one token later).",
    )
    server: RequestWitness | None = Field(
        None,
        description="Sequential measured runs: the server's /metrics deltas around this "
        "request alone, the second witness of its timing (absent where /metrics is not read).",
    )
    host_speed: HostSpeed | None = Field(
        None,
        description="Sequential measured runs: the host-speed witness, the fixed CPU workload "
        "on the engine's cores just before this request, the server idle (absent where it "
        "was not run: docs/noise.md).",
    )
    cpu: CpuAccount | None = Field(
        None,
        description="Sequential measured and prefill runs against a server kit started on "
        "this host: the scheduler's account of the request (Linux schedstat: its threads' time "
        "on a CPU and waiting for one), absent elsewhere (docs/noise.md).",
    )

    @model_validator(mode="before")
    @classmethod
    def _unpack(cls, data: Any) -> Any:
        if isinstance(data, dict) and COMPACT_TIMES in data:
            if "text_chunk_times_s" in data:
                raise ValueError(f"text_chunk_times_s and {COMPACT_TIMES} both given")
            data = dict(data)
            packed = data.pop(COMPACT_TIMES)
            if not isinstance(packed, str):
                raise ValueError(f"{COMPACT_TIMES}: not a string")
            data["text_chunk_times_s"] = unpack_times(packed)
        return data

    @model_serializer(mode="wrap")
    def _sent_only_under_load(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if data.get("first_chunk_s") is None:
            data.pop("first_chunk_s", None)
        if data.get("server") is None:
            data.pop("server", None)
        if data.get("host_speed") is None:
            data.pop("host_speed", None)
        if data.get("cpu") is None:
            data.pop("cpu", None)
        if data.get("sent_s") is None:
            data.pop("sent_s", None)  # sequential records are written as they always were
        elif "text_chunk_times_s" in data:  # a load record: its chunk times packed
            data[COMPACT_TIMES] = pack_times(data.pop("text_chunk_times_s"))
        return data


@dataclass(frozen=True)
class RequestTag:
    """Which request a record is: its prompt's name, phase and index there, and the prefill
    probe's salt."""

    prompt: str
    phase: Phase
    index: int
    salt: str | None = None


@dataclass(frozen=True)
class StreamLimits:
    """How a stream is held and judged: ``usable_fraction`` of max_tokens makes it usable,
    ``deadline_s`` bounds the whole request, ``stall_s`` any silence once text flows, and
    ``first_token_s`` (when set) the wait for the first token.

    Two silences are told apart. Before the first chunk the server may be prefilling a long
    prompt: that wait is held to the first-token budget (the prefill probe sets it from the
    depth and its measured rate). Once text flows, the stall limit holds between any two
    reads."""

    usable_fraction: float
    deadline_s: float
    stall_s: float
    first_token_s: float | None = None

    @classmethod
    def of(cls, bench: Bench, first_token_s: float | None = None) -> StreamLimits:
        """The recipe's limits, with the first-token budget ``first_token_s``."""
        return cls(
            usable_fraction=bench.usable_fraction,
            deadline_s=bench.request_timeout_s,
            stall_s=bench.stall_timeout_s,
            first_token_s=first_token_s,
        )


class BenchAborted(Exception):
    """Raised inside the bench loop to stop early; the reason goes into the result."""


def utc_now_ms() -> str:
    """The UTC time now, ISO 8601 to the millisecond."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def ignores_eos(bench: Bench) -> bool:
    """Whether kit's requests (and vLLM's beside them) send ``ignore_eos``: the recipe says so,
    or its random dataset does, to generate the drawn output lengths exactly."""
    return bench.ignore_eos or bool(getattr(bench.dataset, "ignore_eos", False))


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
    if ignores_eos(bench):
        body["ignore_eos"] = True  # the random dataset's drawn output lengths, exactly
    return body


def delta_text(chunk: dict[str, Any]) -> str:
    """The text a streamed chat chunk carries (content, or a reasoning model's reasoning)."""
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    delta = choices[0].get("delta") or {}
    parts = [delta.get(k) for k in ("content", "reasoning_content", "reasoning")]
    return "".join(p for p in parts if isinstance(p, str))


class StreamState:
    """What one stream has brought so far. The client (:mod:`kit.bench.aio`, for both
    protocols) feeds it each ``data:`` payload and turns it into the record, so every stream is
    judged by the same rules.

    TTFT runs from the send to the first chunk carrying text, wall to the ``[DONE]`` line;
    tokens come from the final usage chunk only. What goes wrong (an HTTP error, a malformed or
    stalled stream, a missing usage chunk) lands in the record's ``error``, never as an
    exception."""

    def __init__(self, t_send: float) -> None:
        self.t_send = t_send
        self.ttft: float | None = None
        self.first: float | None = None
        self.wall: float | None = None
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.chunks = 0
        self.times: list[float] = []
        self.text: list[str] = []

    def event(self, data: str | bytes, now: float) -> bool:
        """One ``data:`` payload that arrived at ``now``; True at ``[DONE]``. A malformed chunk
        or an error the server sends in the stream raises BenchAborted."""
        if data in ("[DONE]", b"[DONE]"):
            self.wall = now - self.t_send
            return True
        self.chunks += 1
        try:
            chunk = json.loads(data)
        except ValueError:
            shown = data[:120].decode(errors="replace") if isinstance(data, bytes) else data[:120]
            raise BenchAborted(f"malformed stream chunk: {shown}") from None
        if "error" in chunk and not chunk.get("choices"):
            raise BenchAborted(f"server error in stream: {chunk['error']}")
        if self.first is None and chunk.get("choices"):
            self.first = now - self.t_send
        piece = delta_text(chunk)
        if piece:
            if self.ttft is None:
                self.ttft = now - self.t_send
            self.times.append(round(now - self.t_send, 6))
            self.text.append(piece)
        for choice in chunk.get("choices") or []:
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        return False

    def record(
        self,
        body: dict[str, Any],
        error: str | None,
        tag: RequestTag,
        *,
        started: str,
        usable_fraction: float,
        sent_s: float | None = None,
    ) -> RequestRecord:
        """The record of the stream, ended by ``error`` (None: it ran to [DONE])."""
        usage = self.usage
        tokens = int(usage["completion_tokens"]) if usage and error is None else None
        if error is None and usage is None:
            error = "no usage chunk in the stream"
        if error is None and self.ttft is None:
            error = "no chunk carried text"
        max_tokens = int(body["max_tokens"])
        # the stored (rounded) times are what the figures derive from, so a verifier
        # recomputing them from the record gets the same numbers
        ttft = round(self.ttft, 6) if self.ttft is not None else None
        wall = round(self.wall, 6) if self.wall is not None else None
        return RequestRecord(
            prompt=tag.prompt,
            phase=tag.phase,
            index=tag.index,
            max_tokens=max_tokens,
            started_at=started,
            ttft_s=ttft,
            wall_s=wall,
            prompt_tokens=int(usage["prompt_tokens"]) if usage else None,
            completion_tokens=tokens,
            decode_tps=decode_tps(tokens, wall, ttft) if tokens and wall and ttft else None,
            wall_tps=wall_tps(tokens, wall) if tokens and wall else None,
            finish_reason=self.finish,
            usable=error is None and is_usable(tokens, max_tokens, usable_fraction),
            chunks=self.chunks,
            text_chunk_times_s=self.times,
            text="".join(self.text),
            salt=tag.salt,
            error=error,
            sent_s=sent_s,
            first_chunk_s=round(self.first, 6)
            if sent_s is not None and self.first is not None
            else None,
        )
