"""Bench stage: the Club-3090 reference protocol against any OpenAI-compatible chat server.

Per prompt: warm-ups (discarded), then measured requests, sequential, one stream at a time,
sampling sent explicitly; TTFT to the first chunk carrying text; tokens from the final usage
chunk only. /metrics is scraped around each measured window for speculative-decoding and
server-side figures. Every request's raw record is kept; an error or a dying server ends the
bench early with the runs so far, marked incomplete.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from kit.metrics import (
    Sample,
    ServerWindow,
    SpecDecode,
    Stats,
    add_spec,
    decode_tps,
    is_usable,
    parse_prometheus,
    server_window,
    spec_decode_delta,
    summarize,
    wall_tps,
)
from kit.recipe import Bench, Prompt

log = logging.getLogger(__name__)

Phase = Literal["warmup", "measured", "prefill_warmup", "prefill"]


class RequestRecord(BaseModel):
    """One request as it happened."""

    model_config = ConfigDict(extra="forbid")

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


class PromptSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(description="Prompt name.")
    max_tokens: int = Field(description="max_tokens sent.")
    measured: int = Field(description="Measured runs attempted.")
    usable: int = Field(description="Usable measured runs (the statistics use these).")
    decode_tps: Stats = Field(description="Decode tokens/s.")
    wall_tps: Stats = Field(description="Wall tokens/s.")
    ttft_ms: Stats = Field(description="Time to first token, ms.")
    completion_tokens: Stats = Field(description="Generated tokens per run.")
    spec_decode: SpecDecode | None = Field(None, description="Over this prompt's measured runs.")
    server: ServerWindow | None = Field(None, description="Server-side figures, same window.")


class PrefillResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: int = Field(description="Target prompt length in tokens.")
    status: Literal["measured", "skipped", "failed"] = Field(description="Outcome.")
    reason: str | None = Field(None, description="Why skipped or failed.")
    prompt_tokens: Stats | None = Field(None, description="Actual prompt tokens.")
    ttft_ms: Stats | None = Field(None, description="TTFT, ms.")
    prefill_tps: Stats | None = Field(None, description="prompt_tokens / TTFT.")


class BenchResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: str = Field(description="Base URL benchmarked (host redacted to loopback form).")
    served_model: str = Field(description="Model name used in requests.")
    started_at: str = Field(description="UTC start.")
    finished_at: str = Field(description="UTC end.")
    complete: bool = Field(description="Every planned request ran without error.")
    incomplete_reason: str | None = Field(None, description="Why not, when not.")
    request_template: dict[str, Any] = Field(description="The request body sent (sans prompt).")
    records: list[RequestRecord] = Field(description="Every request, warm-ups included.")
    prompts: list[PromptSummary] = Field(description="Per-prompt summaries.")
    prefill: list[PrefillResult] = Field(description="Prefill probe results.")
    spec_decode: SpecDecode | None = Field(None, description="All measured windows together.")


class BenchAborted(Exception):
    """Raised inside the bench loop to stop early; the reason goes into the result."""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def request_body(bench: Bench, model: str, text: str, max_tokens: int) -> dict[str, Any]:
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
    started = _now()
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


def summarize_prompt(prompt: Prompt, records: list[RequestRecord]) -> PromptSummary:
    measured = [r for r in records if r.prompt == prompt.name and r.phase == "measured"]
    usable = [r for r in measured if r.usable]
    return PromptSummary(
        prompt=prompt.name,
        max_tokens=prompt.max_tokens,
        measured=len(measured),
        usable=len(usable),
        decode_tps=summarize(r.decode_tps for r in usable if r.decode_tps is not None),
        wall_tps=summarize(r.wall_tps for r in usable if r.wall_tps is not None),
        ttft_ms=summarize(r.ttft_s * 1000 for r in usable if r.ttft_s is not None),
        completion_tokens=summarize(
            r.completion_tokens for r in usable if r.completion_tokens is not None
        ),
    )


def summarize_prefill(depth: int, records: list[RequestRecord]) -> PrefillResult:
    runs = [
        r
        for r in records
        if r.prompt == f"prefill-{depth}"
        and r.phase == "prefill"
        and r.error is None
        and r.ttft_s
        and r.prompt_tokens
    ]
    if not runs:
        return PrefillResult(depth=depth, status="failed", reason="no successful run")
    return PrefillResult(
        depth=depth,
        status="measured",
        prompt_tokens=summarize(float(r.prompt_tokens or 0) for r in runs),
        ttft_ms=summarize((r.ttft_s or 0) * 1000 for r in runs),
        prefill_tps=summarize((r.prompt_tokens or 0) / (r.ttft_s or 1) for r in runs),
    )


_FILLER = [
    "memory",
    "bandwidth",
    "sets",
    "the",
    "pace",
    "of",
    "decoding",
    "while",
    "prefill",
    "is",
    "bound",
    "by",
    "arithmetic",
    "and",
    "the",
    "attention",
    "kernel",
    "reads",
    "every",
    "cached",
    "key",
    "and",
    "value",
    "for",
    "each",
    "new",
    "token",
    "in",
    "the",
    "sequence",
]


def _filler(words: int, salt: str) -> str:
    body = " ".join(_FILLER[i % len(_FILLER)] for i in range(max(words, 1)))
    return f"[{salt}] Summarize the following notes in one sentence. {body}"


class Bencher:
    """Runs the protocol against one server."""

    def __init__(
        self,
        url: str,
        bench: Bench,
        model: str,
        *,
        max_model_len: int | None = None,
        alive: Callable[[], str] | None = None,
        on_request: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.bench = bench
        self.model = model
        self.max_model_len = max_model_len
        self.alive = alive or (lambda: "")
        self.on_request = on_request
        self.records: list[RequestRecord] = []
        timeout = httpx.Timeout(connect=10.0, read=bench.stall_timeout_s, write=30.0, pool=10.0)
        self.client = httpx.Client(timeout=timeout)
        self.hooks: list[Callable[[str], None]] = []  # phase marks for samplers
        self.soft_failures: list[str] = []  # measurements that failed without ending the bench

    def _mark(self, label: str) -> None:
        for hook in self.hooks:
            hook(label)

    def scrape(self) -> dict[Sample, float]:
        try:
            resp = self.client.get(self.url + "/metrics")
        except httpx.HTTPError:
            return {}
        return parse_prometheus(resp.text) if resp.status_code == 200 else {}

    def _one(
        self, body: dict[str, Any], prompt: str, phase: Phase, index: int, salt: str | None = None
    ) -> RequestRecord:
        rec = stream_request(
            self.client,
            self.url,
            body,
            prompt=prompt,
            phase=phase,
            index=index,
            usable_fraction=self.bench.usable_fraction,
            deadline_s=self.bench.request_timeout_s,
            salt=salt,
        )
        self.records.append(rec)
        if self.on_request:
            self.on_request(rec)
        if rec.error is not None:
            dead = self.alive()
            raise BenchAborted(
                f"{prompt} {phase} #{index}: {rec.error}" + (f" ({dead})" if dead else "")
            )
        return rec

    def run(self) -> BenchResult:
        started = _now()
        summaries: list[PromptSummary] = []
        prefill: list[PrefillResult] = []
        windows: list[SpecDecode] = []
        reason: str | None = None
        try:
            self._mark("idle")
            for prompt in self.bench.prompts:
                body = request_body(self.bench, self.model, prompt.text, prompt.max_tokens)
                for i in range(self.bench.warmups):
                    self._one(body, prompt.name, "warmup", i)
                before = self.scrape()
                self._mark("measure_start")
                try:
                    for i in range(self.bench.runs):
                        self._one(body, prompt.name, "measured", i)
                finally:
                    self._mark("measure_end")
                    after = self.scrape()
                    summary = summarize_prompt(prompt, self.records)
                    spec = spec_decode_delta(before, after) if before and after else None
                    if spec is not None:
                        windows.append(spec)
                    server = server_window(before, after) if before and after else None
                    summaries.append(
                        summary.model_copy(update={"spec_decode": spec, "server": server})
                    )
            if self.bench.prefill is not None:
                for depth in self.bench.prefill.depths:
                    prefill.append(self._prefill(depth))
            self._mark("post")
            if self.soft_failures:
                reason = "; ".join(self.soft_failures)
        except BenchAborted as exc:
            reason = str(exc)
            log.error("bench: stopped early: %s", reason)
        except KeyboardInterrupt:
            reason = "interrupted by the user"
            log.error("bench: interrupted; keeping the %d requests so far", len(self.records))
        finally:
            self.client.close()
        done = {s.prompt for s in summaries}
        for prompt in self.bench.prompts:
            if prompt.name not in done and any(r.prompt == prompt.name for r in self.records):
                summaries.append(summarize_prompt(prompt, self.records))
        return BenchResult(
            target=self.url,
            served_model=self.model,
            started_at=started,
            finished_at=_now(),
            complete=reason is None,
            incomplete_reason=reason,
            request_template={
                k: v
                for k, v in request_body(self.bench, self.model, "", 0).items()
                if k not in {"messages", "max_tokens"}
            },
            records=self.records,
            prompts=summaries,
            prefill=prefill,
            spec_decode=add_spec(windows),
        )

    def _count_tokens(self, text: str) -> int | None:
        """Prompt tokens for a chat message via vLLM's /tokenize; None when unsupported."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": text}],
            "add_generation_prompt": True,
            "chat_template_kwargs": dict(self.bench.chat_template_kwargs),
        }
        try:
            resp = self.client.post(self.url + "/tokenize", json=body)
            return int(resp.json()["count"]) if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return None

    def _words_for(self, depth: int) -> int | None:
        """Filler words giving ``depth`` prompt tokens, fitted on two /tokenize counts."""
        a_words, b_words = 64, 512
        a = self._count_tokens(_filler(a_words, "0" * 16))
        b = self._count_tokens(_filler(b_words, "0" * 16))
        if a is None or b is None or b <= a:
            return None
        per_word = (b - a) / (b_words - a_words)
        fixed = a - per_word * a_words
        return max(int((depth - fixed) / per_word), 1)

    def _prefill(self, depth: int) -> PrefillResult:
        p = self.bench.prefill
        assert p is not None
        limit = self.max_model_len
        if limit is not None and depth + p.max_tokens + 64 > limit:
            return PrefillResult(
                depth=depth,
                status="skipped",
                reason=f"beyond the served context ({limit} tokens)",
            )
        name = f"prefill-{depth}"
        words = self._words_for(depth)
        # without /tokenize, the calibrating warm-up starts low and each run rescales
        calibrate = words is None
        if words is None:
            words = max(depth // 4, 16)
        try:
            for i in range(p.warmups + p.runs):
                phase: Phase = "prefill_warmup" if i < p.warmups else "prefill"
                salt = secrets.token_hex(8)
                body = request_body(self.bench, self.model, _filler(words, salt), p.max_tokens)
                body.pop("ignore_eos", None)
                index = i if phase == "prefill_warmup" else i - p.warmups
                rec = self._one(body, name, phase, index, salt=salt)
                if calibrate and rec.prompt_tokens:
                    words = max(int(words * depth / rec.prompt_tokens), 16)
        except BenchAborted as exc:
            if self.alive():
                raise
            self.soft_failures.append(f"{name}: {exc}")
            return PrefillResult(depth=depth, status="failed", reason=str(exc))
        return summarize_prefill(depth, self.records)


def model_info(url: str) -> tuple[str, int | None]:
    """Served model name and its max_model_len, from /v1/models."""
    resp = httpx.get(url.rstrip("/") + "/v1/models", timeout=10)
    entry = resp.json()["data"][0]
    limit = entry.get("max_model_len")
    return str(entry["id"]), int(limit) if limit else None
