"""The protocol runner: every prompt of the recipe against one server, then the prefill probe.

Per prompt: warm-ups (discarded), then measured requests, sequential, one stream at a time;
with a load pattern (``bench.load``), its points in place of the prompts (:mod:`kit.bench.load`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from kit.bench.aio import SequentialClient
from kit.bench.load import (
    LoadPoint,
    LoadTarget,
    Planned,
    file_requests,
    levels,
    random_requests,
    run_point,
    summarize_point,
)
from kit.bench.server import scrape_metrics
from kit.bench.stream import (
    BenchAborted,
    Phase,
    RequestRecord,
    RequestTag,
    StreamLimits,
    request_body,
    utc_now_ms,
)
from kit.bench.summary import (
    BenchResult,
    PrefillResult,
    PromptSummary,
    summarize_prefill,
    summarize_prompt,
)
from kit.metrics import (
    Sample,
    add_spec,
    request_witness,
    server_window,
    spec_decode_delta,
)
from kit.probe.hostspeed import HostSpeed
from kit.probe.schedstat import EngineClock, account
from kit.recipe import Bench, Prompt
from kit.recipe.traffic import (
    FileDataset,
    RandomDataset,
    point_label,
    point_requests,
    point_warmups,
)

log = logging.getLogger(__name__)

# A prefill probe's first token may take depth / rate; its budget is this many times that, at
# the rate its own warm-up measured (never less than the stall timeout). The calibrating
# warm-up has no rate yet: it may take the whole request_timeout_s.
PREFILL_MARGIN = 3.0

# The prefill probe's prompt: these words, repeated to the depth asked for.
_FILLER_TEXT = (
    "memory bandwidth sets the pace of decoding while prefill is bound by arithmetic and the "
    "attention kernel reads every cached key and value for each new token in the sequence"
)


def _filler(words: int, salt: str) -> str:
    """A prompt of about ``words`` filler words; the salt keeps the prefix cache from hitting."""
    vocab = _FILLER_TEXT.split()
    body = " ".join(vocab[i % len(vocab)] for i in range(max(words, 1)))
    return f"[{salt}] Summarize the following notes in one sentence. {body}"


# what ends a bench inside a measured window: kept, with the figures so far, then raised
Stop = BenchAborted | KeyboardInterrupt


@dataclass(frozen=True)
class Watch:
    """What a bench calls back and reads, each outside the timed requests: ``alive`` says why
    the server died ("" while it lives), so an error names the cause; ``on_request`` sees each
    record as it ends (progress, tests); ``host_speed``, the host-speed witness
    (:mod:`kit.probe.hostspeed`) read before each measured request while the server is idle
    (None: not run, a server on another host); ``cpu_clock``, the scheduler's account of each
    measured and prefill request (:mod:`kit.probe.schedstat`; None: not read, not kit's
    server); ``hooks``, called with each phase mark (the samplers)."""

    alive: Callable[[], str] | None = None
    on_request: Callable[[RequestRecord], None] | None = None
    host_speed: Callable[[], HostSpeed | None] | None = None
    cpu_clock: EngineClock | None = None
    hooks: tuple[Callable[[str], None], ...] = ()


@dataclass(frozen=True)
class BenchRun:
    """What one bench measured: its result and, for a load run, its requests as drawn (warm-ups
    first), for vLLM's side to send the same ones; None without a load pattern."""

    result: BenchResult
    plan: tuple[Planned, ...] | None = None


def first_token_budget(bench: Bench, records: list[RequestRecord], name: str, depth: int) -> float:
    """How long a ``depth``-token probe may wait for its first token: PREFILL_MARGIN times
    depth / the prefill rate ``name``'s earlier requests measured (prompt tokens / TTFT, the
    slowest), at least the stall timeout; request_timeout_s before any was measured."""
    rates = [
        r.prompt_tokens / r.ttft_s
        for r in records
        if r.prompt == name and r.error is None and r.prompt_tokens and r.ttft_s
    ]
    if not rates:
        return bench.request_timeout_s
    budget = max(bench.stall_timeout_s, PREFILL_MARGIN * depth / min(rates))
    return min(budget, bench.request_timeout_s)


def _client(bench: Bench) -> httpx.Client:
    """The client for what kit asks outside the timed requests (/metrics, /tokenize)."""
    timeout = httpx.Timeout(connect=10.0, read=bench.stall_timeout_s, write=30.0, pool=10.0)
    return httpx.Client(timeout=timeout)


class Bencher:
    """Runs the protocol against one server. Built complete: each :meth:`measure` is a fresh
    run whose working state lives in that call, and returns what it measured."""

    def __init__(
        self,
        url: str,
        bench: Bench,
        model: str,
        *,
        max_model_len: int | None = None,
        watch: Watch | None = None,
        recipe_dir: Path | None = None,
    ) -> None:
        self.url: Final = url.rstrip("/")
        self.bench: Final = bench
        self.model: Final = model
        self.max_model_len: Final = max_model_len
        self.watch: Final = watch or Watch()
        self.recipe_dir: Final = recipe_dir  # where a dataset file's relative path starts

    def measure(self) -> BenchRun:
        """One run of the protocol: every prompt (or load point), then the prefill probe, with
        /metrics scraped around each measured window for speculative-decoding and server-side
        figures. An error or a dying server ends the bench early with the runs so far, marked
        incomplete; under load, failed requests of a live server are the point's figures
        (completed < requests) and mark the run incomplete without ending it."""
        return _Run(self).measure()

    def run(self) -> BenchResult:
        """:meth:`measure`'s result."""
        return self.measure().result

    def planned(self, count: int) -> list[Planned]:
        """The requests of one point, from the recipe's dataset (default: its prompts)."""
        with _client(self.bench) as client:
            return _planned(self, client, count)

    def load_plan(self) -> list[Planned]:
        """Every request a load run draws from (warm-ups first), the same on every call: the
        most any point sends."""
        with _client(self.bench) as client:
            return _load_plan(self, client)


def _count_tokens(b: Bencher, client: httpx.Client, text: str) -> int | None:
    """Prompt tokens for a chat message via vLLM's /tokenize; None when unsupported."""
    body = {
        "model": b.model,
        "messages": [{"role": "user", "content": text}],
        "add_generation_prompt": True,
        "chat_template_kwargs": dict(b.bench.chat_template_kwargs),
    }
    try:
        resp = client.post(b.url + "/tokenize", json=body)
        return int(resp.json()["count"]) if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


def _planned(b: Bencher, client: httpx.Client, count: int) -> list[Planned]:
    ds = b.bench.dataset
    if isinstance(ds, RandomDataset):
        return random_requests(ds, count, lambda text: _count_tokens(b, client, text))
    if isinstance(ds, FileDataset):
        return file_requests(ds, b.recipe_dir)
    return [Planned(p.text, p.max_tokens) for p in b.bench.prompts]


def _load_plan(b: Bencher, client: httpx.Client) -> list[Planned]:
    load = b.bench.load
    assert load is not None
    most = max(point_warmups(load, v) + point_requests(load, v) for v in levels(b.bench))
    return _planned(b, client, most)


class _Run:
    """One bench's working state: its clients and the records and soft failures so far, each
    list only appended to. Every attribute is set here, in ``__init__``."""

    def __init__(self, b: Bencher) -> None:
        self.b: Final = b
        self.alive: Final = b.watch.alive or (lambda: "")
        self.client: Final = _client(b.bench)  # /metrics and /tokenize, outside timing
        self.streams: Final = SequentialClient(b.url)  # the timed requests
        self.records: Final[list[RequestRecord]] = []
        self.soft_failures: Final[list[str]] = []  # failed without ending the bench

    def _mark(self, label: str) -> None:
        for hook in self.b.watch.hooks:
            hook(label)

    def scrape(self) -> dict[Sample, float]:
        return scrape_metrics(self.client, self.b.url)

    def _stream(
        self, body: dict[str, Any], tag: RequestTag, first_token_s: float | None = None
    ) -> RequestRecord:
        """One timed request, with the probes' readings around it (outside its timing)."""
        probes, measured = self.b.watch, tag.phase == "measured"
        speed = probes.host_speed() if probes.host_speed and measured else None
        clock = probes.cpu_clock if measured or tag.phase == "prefill" else None
        before = clock.snapshot() if clock else None
        rec = self.streams.stream(body, tag, StreamLimits.of(self.b.bench, first_token_s))
        if clock and before is not None:
            cpu = account(before, clock.snapshot(), clock.worker_cores is not None)
            rec = rec.model_copy(update={"cpu": cpu})
        if speed is not None:
            rec = rec.model_copy(update={"host_speed": speed})
        return rec

    def _keep(self, rec: RequestRecord, tag: RequestTag) -> RequestRecord:
        """``rec`` recorded and shown; an error ends the bench, naming why the server died."""
        self.records.append(rec)
        if self.b.watch.on_request:
            self.b.watch.on_request(rec)
        if rec.error is not None:
            dead = self.alive()
            raise BenchAborted(
                f"{tag.prompt} {tag.phase} #{tag.index}: {rec.error}"
                + (f" ({dead})" if dead else "")
            )
        return rec

    def _one(
        self, body: dict[str, Any], tag: RequestTag, first_token_s: float | None = None
    ) -> RequestRecord:
        return self._keep(self._stream(body, tag, first_token_s), tag)

    def _measured(
        self, body: dict[str, Any], tag: RequestTag, window: dict[Sample, float] | None
    ) -> dict[Sample, float] | None:
        """One measured request; its witness is the /metrics delta from ``window`` (one request
        in flight), read after it, outside its timing. Returns the next request's window."""
        rec = self._stream(body, tag)
        after = self.scrape() if window else None
        witness = request_witness(window, after) if window and after else None
        if witness is not None:
            rec = rec.model_copy(update={"server": witness})
        self._keep(rec, tag)
        return after or None

    def measure(self) -> BenchRun:
        bench = self.b.bench
        started = utc_now_ms()
        summaries: list[PromptSummary] = []
        prefill: list[PrefillResult] = []
        points: list[LoadPoint] = []
        plan: list[Planned] | None = None
        reason: str | None = None
        try:
            self._mark("idle")
            if bench.load is not None:
                plan = _load_plan(self.b, self.client)
                points, stopped = self._load_points(plan)
                if stopped is not None:
                    raise stopped
            for prompt in bench.prompts if bench.load is None else []:
                summary, stopped = self._prompt(prompt)
                summaries.append(summary)
                if stopped is not None:
                    raise stopped
            if bench.prefill is not None:
                prefill = [self._prefill(depth) for depth in bench.prefill.depths]
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
            self.streams.close()
        summaries += self._unfinished(summaries)
        windows = [s.spec_decode for s in summaries if s.spec_decode is not None]
        windows += [pt.spec_decode for pt in points if pt.spec_decode is not None]
        result = BenchResult(
            target=self.b.url,
            served_model=self.b.model,
            started_at=started,
            finished_at=utc_now_ms(),
            complete=reason is None,
            incomplete_reason=reason,
            request_template={
                k: v
                for k, v in request_body(bench, self.b.model, "", 0).items()
                if k not in {"messages", "max_tokens"}
            },
            records=list(self.records),
            prompts=summaries,
            prefill=prefill,
            spec_decode=add_spec(windows),
            load_points=points,
        )
        return BenchRun(result, tuple(plan) if plan is not None else None)

    def _unfinished(self, summaries: list[PromptSummary]) -> list[PromptSummary]:
        """The summaries of prompts the bench stopped inside (their runs so far)."""
        bench, done = self.b.bench, {s.prompt for s in summaries}
        return [
            summarize_prompt(prompt, self.records)
            for prompt in (bench.prompts if bench.load is None else [])
            if prompt.name not in done and any(r.prompt == prompt.name for r in self.records)
        ]

    def _prompt(self, prompt: Prompt) -> tuple[PromptSummary, Stop | None]:
        """One prompt: its warm-ups, then its measured window between two /metrics reads.
        Returns its summary, and what stopped the bench inside the window (the summary then
        holds the runs so far and the window's counters)."""
        bench, model = self.b.bench, self.b.model
        body = request_body(bench, model, prompt.text, prompt.max_tokens)
        for i in range(bench.warmups):
            self._one(body, RequestTag(prompt.name, "warmup", i))
        before = self.scrape()
        window: dict[Sample, float] | None = before
        stopped: Stop | None = None
        self._mark("measure_start")
        try:
            for i in range(bench.runs):
                window = self._measured(body, RequestTag(prompt.name, "measured", i), window)
        except (BenchAborted, KeyboardInterrupt) as exc:
            stopped = exc
        finally:
            self._mark("measure_end")
            after = self.scrape()
        spec = spec_decode_delta(before, after) if before and after else None
        server = server_window(before, after) if before and after else None
        summary = summarize_prompt(prompt, self.records)
        return summary.model_copy(update={"spec_decode": spec, "server": server}), stopped

    # -- load points -------------------------------------------------------------------------

    def _load_points(self, plan: list[Planned]) -> tuple[list[LoadPoint], Stop | None]:
        """The load points in order, until one's stop rule holds, or one's requests failed on a
        dying server or the user interrupts (returned as what stopped the bench, with the
        points so far)."""
        b, points = self.b, list[LoadPoint]()
        load = b.bench.load
        assert load is not None
        steps = levels(b.bench)
        target = LoadTarget(b.url, b.bench, b.model, plan)
        for n, level in enumerate(steps):
            try:
                point, records = self._load_point(target, level)
            except KeyboardInterrupt as exc:
                return points, exc
            stop = load.stop_reason([*points, point], b.bench.slo)
            points.append(point if stop is None else point.model_copy(update={"stop_reason": stop}))
            failed = [r for r in records if r.error is not None]
            if failed:
                dead = self.alive()
                message = (
                    f"{point.label}: {len(failed)} of {len(records)} requests failed: "
                    f"{failed[0].error}"
                )
                if dead:
                    return points, BenchAborted(f"{message} ({dead})")
                self.soft_failures.append(message)
            if stop is not None:
                log.info("bench: sweep stopped after %s: %s", point.label, stop)
                break
            if load.cooldown_s and n + 1 < len(steps):
                time.sleep(load.cooldown_s)
        return points, None

    def _load_point(
        self, target: LoadTarget, level: float
    ) -> tuple[LoadPoint, list[RequestRecord]]:
        """One load point: its warm-ups, then its measured requests between two /metrics
        reads. Returns the point and its requests (warm-ups first)."""
        b = self.b
        load = b.bench.load
        assert load is not None
        label = point_label(load, level)
        salt, t0 = secrets.token_hex(4), time.perf_counter()
        warm, _ = run_point(target, level, "load_warmup", salt, t0, b.watch.on_request)
        self.records.extend(warm)
        before = self.scrape()
        self._mark("measure_start")
        try:
            records, cpu = run_point(target, level, "load", salt, t0, b.watch.on_request)
        finally:
            self._mark("measure_end")
        after = self.scrape()
        self.records.extend(records)
        point = summarize_point(label, load.pattern, level, self.records, b.bench.slo)
        spec = spec_decode_delta(before, after) if before and after else None
        server = server_window(before, after) if before and after else None
        point = point.model_copy(
            update={"spec_decode": spec, "server": server, "client_cpu_pct": cpu}
        )
        log.info(
            "bench: %s: %d/%d completed, %.1f output tok/s, TTFT p50 %.0f ms",
            label,
            point.completed,
            point.requests,
            point.output_tps or 0.0,
            point.ttft_ms.p50 or 0.0,
        )
        return point, warm + records

    # -- the prefill probe -------------------------------------------------------------------

    def _words_for(self, depth: int) -> int | None:
        """Filler words giving ``depth`` prompt tokens, fitted on two /tokenize counts."""
        a_words, b_words = 64, 512
        a = _count_tokens(self.b, self.client, _filler(a_words, "0" * 16))
        b = _count_tokens(self.b, self.client, _filler(b_words, "0" * 16))
        if a is None or b is None or b <= a:
            return None
        per_word = (b - a) / (b_words - a_words)
        fixed = a - per_word * a_words
        return max(int((depth - fixed) / per_word), 1)

    def _prefill(self, depth: int) -> PrefillResult:
        bench = self.b.bench
        p = bench.prefill
        assert p is not None
        limit = self.b.max_model_len
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
                body = request_body(bench, self.b.model, _filler(words, salt), p.max_tokens)
                body.pop("ignore_eos", None)
                index = i if phase == "prefill_warmup" else i - p.warmups
                budget = first_token_budget(bench, self.records, name, depth)
                rec = self._one(body, RequestTag(name, phase, index, salt), first_token_s=budget)
                if calibrate and rec.prompt_tokens:
                    words = max(int(words * depth / rec.prompt_tokens), 16)
        except BenchAborted as exc:
            if self.alive():
                raise
            self.soft_failures.append(f"{name}: {exc}")
            return PrefillResult(depth=depth, status="failed", reason=str(exc))
        return summarize_prefill(depth, self.records)
