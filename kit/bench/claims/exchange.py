"""One request of the context ladder or the soak as it happened (:class:`Exchange`), its
figures, and the client that sends them (:class:`ClaimClient`): kit's sequential client for
the stream, ``/tokenize`` to size a prompt, ``/health`` to tell a failed request from a server
that is gone, ``/metrics`` for the prefix cache."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import TracebackType
from typing import Any

import httpx
from pydantic import Field

from kit.base import KitModel
from kit.bench.aio import SequentialClient
from kit.bench.server import scrape_metrics
from kit.bench.stream import RequestRecord, RequestTag, StreamLimits, request_body
from kit.metrics import Sample, decode_tps, finite
from kit.recipe import Bench

Message = dict[str, str]


class Exchange(KitModel):
    """One streamed chat request and its reply, as kit's client saw it (the rules of
    kit.bench.stream: TTFT to the first chunk with text, tokens from the usage chunk)."""

    started_at: str = Field(description="UTC time just before sending.")
    ttft_s: float | None = Field(description="Send to the first chunk with text.")
    wall_s: float | None = Field(description="Send to the end of the stream ([DONE]).")
    prompt_tokens: int | None = Field(description="From the final usage chunk.")
    completion_tokens: int | None = Field(description="From the final usage chunk.")
    finish_reason: str | None = Field(description="As the server reported.")
    text: str = Field(description="The reply's text.")
    error: str | None = Field(
        description="What went wrong, in the engine's own words where it gave any (an HTTP "
        "error's body, an error in the stream), else the client's (a timeout, a closed "
        "connection); None: none."
    )

    @classmethod
    def of(cls, rec: RequestRecord) -> Exchange:
        """The exchange of a record of kit's client."""
        return cls(
            started_at=rec.started_at,
            ttft_s=rec.ttft_s,
            wall_s=rec.wall_s,
            prompt_tokens=rec.prompt_tokens,
            completion_tokens=rec.completion_tokens,
            finish_reason=rec.finish_reason,
            text=rec.text,
            error=rec.error,
        )


# -- figures of one exchange, the same when written and when verified ---------------------------


def is_empty(x: Exchange) -> bool:
    """A reply that came back whole (the stream reached [DONE]) with no text: a silent-empty
    turn, which kit's client also records as an error ('no chunk carried text')."""
    return x.wall_s is not None and not x.text.strip()


def is_failed(x: Exchange) -> bool:
    """A request that failed other than by coming back empty."""
    return x.error is not None and not is_empty(x)


def ttft_ms(x: Exchange) -> float | None:
    return x.ttft_s * 1000.0 if x.ttft_s is not None and not is_failed(x) else None


def prefill_tps(x: Exchange) -> float | None:
    """Prompt tokens / TTFT."""
    if is_failed(x) or not x.prompt_tokens or not x.ttft_s:
        return None
    return finite(x.prompt_tokens / x.ttft_s)


def exchange_decode_tps(x: Exchange) -> float | None:
    """completion tokens / (wall - TTFT), as the protocol's decode TPS."""
    if is_failed(x) or not x.completion_tokens or x.wall_s is None or x.ttft_s is None:
        return None
    return decode_tps(x.completion_tokens, x.wall_s, x.ttft_s)


def median(values: list[float]) -> float | None:
    """The median of finite values; None for none."""
    vals = sorted(v for v in values if math.isfinite(v))
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


# -- sizing a prompt ---------------------------------------------------------------------------


def fit_units(
    count: Callable[[int], int | None], target: int, unit_chars: int, tries: int = 4
) -> int:
    """How many filler units make ``count(units)`` tokens come to ``target`` or just under it:
    a line fitted on two counts, then corrected on the exact count (``count`` is the server's
    /tokenize of the whole prompt). Without counts, four characters a token."""
    small, large = 4, 32
    a, b = count(small), count(large)
    if a is None or b is None or b <= a:
        return max(target * 4 // max(unit_chars, 1), 1)
    per = (b - a) / (large - small)
    fixed = a - per * small
    units = max(int((target - fixed) / per), 1)
    for _ in range(tries):
        got = count(units)
        if got is None:
            return units
        if got > target:
            units = max(units - max(math.ceil((got - target) / per), 1), 1)
        elif target - got >= per:
            units += int((target - got) / per)
        else:
            return units
    for _ in range(32):  # not settled: a unit less at a time until it fits
        got = count(units)
        if units <= 1 or got is None or got <= target:
            break
        units -= 1
    return units


class ClaimClient:
    """The requests of the context ladder and the soak against one server: one stream at a
    time (kit's sequential client), and outside the timing /tokenize, /health and /metrics."""

    def __init__(self, url: str, bench: Bench, model: str) -> None:
        self.url = url.rstrip("/")
        self.bench = bench
        self.model = model
        timeout = httpx.Timeout(connect=10.0, read=bench.stall_timeout_s, write=60.0, pool=10.0)
        self.http = httpx.Client(timeout=timeout)
        self.streams = SequentialClient(self.url)

    def __enter__(self) -> ClaimClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()
        self.streams.close()

    def count_tokens(self, messages: list[Message]) -> int | None:
        """Prompt tokens of a conversation via vLLM's /tokenize; None when it cannot say."""
        body = {
            "model": self.model,
            "messages": messages,
            "add_generation_prompt": True,
            "chat_template_kwargs": dict(self.bench.chat_template_kwargs),
        }
        try:
            resp = self.http.post(self.url + "/tokenize", json=body)
            return int(resp.json()["count"]) if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None

    def healthy(self) -> bool:
        """Whether the server still answers /health."""
        try:
            return self.http.get(self.url + "/health", timeout=10.0).status_code == 200
        except httpx.HTTPError:
            return False

    def metrics(self) -> dict[Sample, float]:
        """/metrics, parsed; empty where it cannot be read."""
        return scrape_metrics(self.http, self.url)

    def send(
        self,
        messages: list[Message],
        max_tokens: int,
        tag: RequestTag,
        first_token_s: float | None = None,
    ) -> Exchange:
        """One streamed request of the conversation, sampled as the recipe says; a failure is
        the exchange's error, never raised. ``first_token_s`` bounds the wait for the first
        token (a deep prompt's prefill), and the whole request too when longer than
        request_timeout_s."""
        body: dict[str, Any] = request_body(self.bench, self.model, "", max_tokens)
        body["messages"] = messages
        limits = StreamLimits.of(self.bench, first_token_s)
        if first_token_s is not None and first_token_s > limits.deadline_s:
            limits = StreamLimits(
                usable_fraction=limits.usable_fraction,
                deadline_s=first_token_s + limits.stall_s,
                stall_s=limits.stall_s,
                first_token_s=first_token_s,
            )
        return Exchange.of(self.streams.stream(body, tag, limits))
