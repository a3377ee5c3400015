"""The protocol runner: every prompt of the recipe against one server, then the prefill probe.

Per prompt: warm-ups (discarded), then measured requests, sequential, one stream at a time.
With a load pattern (``bench.load``), its points in place of the prompts
(:mod:`kit.bench.load`). /metrics is scraped around each measured window for
speculative-decoding and server-side figures. An error or a dying server ends the bench early
with the runs so far, marked incomplete; under load, failed requests of a live server are the
point's figures (completed < requests) and mark the run incomplete without ending it.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    SpecDecode,
    add_spec,
    request_witness,
    server_window,
    spec_decode_delta,
)
from kit.probe.hostspeed import HostSpeed
from kit.probe.schedstat import EngineClock, account
from kit.recipe import Bench
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


@dataclass(frozen=True)
class Watch:
    """What a bench calls back: ``alive`` says why the server died ("" while it lives), so an
    error names the cause; ``on_request`` sees each record as it ends (progress, tests)."""

    alive: Callable[[], str] | None = None
    on_request: Callable[[RequestRecord], None] | None = None


class Bencher:
    """Runs the protocol against one server."""

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
        self.url = url.rstrip("/")
        self.recipe_dir = recipe_dir  # where a dataset file's relative path starts
        self.bench = bench
        self.model = model
        self.max_model_len = max_model_len
        watch = watch or Watch()
        self.alive = watch.alive or (lambda: "")
        self.on_request = watch.on_request
        self.records: list[RequestRecord] = []
        timeout = httpx.Timeout(connect=10.0, read=bench.stall_timeout_s, write=30.0, pool=10.0)
        self.client = httpx.Client(timeout=timeout)  # /metrics and /tokenize, outside timing
        self.streams = SequentialClient(self.url)  # the timed requests
        self.hooks: list[Callable[[str], None]] = []  # phase marks for samplers
        # the host-speed witness (kit.probe.hostspeed), read before each measured request while
        # the server is idle; None: not run (a server on another host)
        self.host_speed: Callable[[], HostSpeed | None] | None = None
        # the scheduler's account of each measured and prefill request (kit.probe.schedstat),
        # read just before and after it, outside its timing; None: not read (not kit's server)
        self.cpu_clock: EngineClock | None = None
        self.soft_failures: list[str] = []  # measurements that failed without ending the bench
        # a load run's requests as drawn (load_plan), for vLLM's side to send the same ones
        self.plan: list[Planned] | None = None
        # /metrics as last read inside a measured window: each measured request's witness is
        # the delta from it (one request in flight), read after the request, outside its timing
        self._window: dict[Sample, float] | None = None

    def _mark(self, label: str) -> None:
        for hook in self.hooks:
            hook(label)

    def scrape(self) -> dict[Sample, float]:
        return scrape_metrics(self.client, self.url)

    def _one(
        self, body: dict[str, Any], tag: RequestTag, first_token_s: float | None = None
    ) -> RequestRecord:
        measured = tag.phase == "measured"
        speed = self.host_speed() if self.host_speed and measured else None
        clock = self.cpu_clock if measured or tag.phase == "prefill" else None
        before = clock.snapshot() if clock else None
        rec = self.streams.stream(body, tag, StreamLimits.of(self.bench, first_token_s))
        if clock and before is not None:
            cpu = account(before, clock.snapshot(), clock.worker_cores is not None)
            rec = rec.model_copy(update={"cpu": cpu})
        if speed is not None:
            rec = rec.model_copy(update={"host_speed": speed})
        if tag.phase == "measured" and self._window:
            after = self.scrape()
            witness = request_witness(self._window, after) if after else None
            if witness is not None:
                rec = rec.model_copy(update={"server": witness})
            self._window = after or None
        self.records.append(rec)
        if self.on_request:
            self.on_request(rec)
        if rec.error is not None:
            dead = self.alive()
            raise BenchAborted(
                f"{tag.prompt} {tag.phase} #{tag.index}: {rec.error}"
                + (f" ({dead})" if dead else "")
            )
        return rec

    def run(self) -> BenchResult:
        started = utc_now_ms()
        summaries: list[PromptSummary] = []
        prefill: list[PrefillResult] = []
        windows: list[SpecDecode] = []
        reason: str | None = None
        points: list[LoadPoint] = []
        try:
            self._mark("idle")
            if self.bench.load is not None:
                self._load_points(points)
                windows += [pt.spec_decode for pt in points if pt.spec_decode is not None]
            for prompt in self.bench.prompts if self.bench.load is None else []:
                body = request_body(self.bench, self.model, prompt.text, prompt.max_tokens)
                for i in range(self.bench.warmups):
                    self._one(body, RequestTag(prompt.name, "warmup", i))
                before = self._window = self.scrape()
                self._mark("measure_start")
                try:
                    for i in range(self.bench.runs):
                        self._one(body, RequestTag(prompt.name, "measured", i))
                finally:
                    self._window = None
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
            self.streams.close()
        done = {s.prompt for s in summaries}
        for prompt in self.bench.prompts if self.bench.load is None else []:
            if prompt.name not in done and any(r.prompt == prompt.name for r in self.records):
                summaries.append(summarize_prompt(prompt, self.records))
        return BenchResult(
            target=self.url,
            served_model=self.model,
            started_at=started,
            finished_at=utc_now_ms(),
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
            load_points=points,
        )

    # -- load points -------------------------------------------------------------------------

    def planned(self, count: int) -> list[Planned]:
        """The requests of one point, from the recipe's dataset (default: its prompts)."""
        ds = self.bench.dataset
        if isinstance(ds, RandomDataset):
            return random_requests(ds, count, self._count_tokens)
        if isinstance(ds, FileDataset):
            return file_requests(ds, self.recipe_dir)
        return [Planned(p.text, p.max_tokens) for p in self.bench.prompts]

    def load_plan(self) -> list[Planned]:
        """Every request a load run draws from (warm-ups first), the same on every call: the
        most any point sends."""
        load = self.bench.load
        assert load is not None
        most = max(point_warmups(load, v) + point_requests(load, v) for v in levels(self.bench))
        return self.planned(most)

    def _load_points(self, points: list[LoadPoint]) -> None:
        load = self.bench.load
        assert load is not None
        steps = levels(self.bench)
        self.plan = self.load_plan()
        target = LoadTarget(self.url, self.bench, self.model, self.plan)
        for n, level in enumerate(steps):
            label = point_label(load, level)
            salt, t0 = secrets.token_hex(4), time.perf_counter()
            warm, _ = run_point(target, level, "load_warmup", salt, t0, self.on_request)
            self.records += warm
            before = self.scrape()
            self._mark("measure_start")
            try:
                records, cpu = run_point(target, level, "load", salt, t0, self.on_request)
            finally:
                self._mark("measure_end")
            after = self.scrape()
            self.records += records
            records = warm + records
            point = summarize_point(label, load.pattern, level, self.records, self.bench.slo)
            spec = spec_decode_delta(before, after) if before and after else None
            server = server_window(before, after) if before and after else None
            point = point.model_copy(
                update={"spec_decode": spec, "server": server, "client_cpu_pct": cpu}
            )
            points.append(point)
            stop = load.stop_reason(points, self.bench.slo)
            if stop is not None:
                points[-1] = point.model_copy(update={"stop_reason": stop})
            log.info(
                "bench: %s: %d/%d completed, %.1f output tok/s, TTFT p50 %.0f ms",
                label,
                point.completed,
                point.requests,
                point.output_tps or 0.0,
                point.ttft_ms.p50 or 0.0,
            )
            failed = [r for r in records if r.error is not None]
            if failed:
                dead = self.alive()
                message = (
                    f"{label}: {len(failed)} of {len(records)} requests failed: {failed[0].error}"
                )
                if dead:
                    raise BenchAborted(f"{message} ({dead})")
                self.soft_failures.append(message)
            if stop is not None:
                log.info("bench: sweep stopped after %s: %s", label, stop)
                break
            if load.cooldown_s and n + 1 < len(steps):
                time.sleep(load.cooldown_s)

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

    def first_token_budget(self, name: str, depth: int) -> float:
        """How long a ``depth``-token probe may wait for its first token: PREFILL_MARGIN times
        depth / the prefill rate its earlier requests measured (prompt tokens / TTFT, the
        slowest), at least the stall timeout; request_timeout_s before any was measured."""
        rates = [
            r.prompt_tokens / r.ttft_s
            for r in self.records
            if r.prompt == name and r.error is None and r.prompt_tokens and r.ttft_s
        ]
        if not rates:
            return self.bench.request_timeout_s
        budget = max(self.bench.stall_timeout_s, PREFILL_MARGIN * depth / min(rates))
        return min(budget, self.bench.request_timeout_s)

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
                budget = self.first_token_budget(name, depth)
                rec = self._one(body, RequestTag(name, phase, index, salt), first_token_s=budget)
                if calibrate and rec.prompt_tokens:
                    words = max(int(words * depth / rec.prompt_tokens), 16)
        except BenchAborted as exc:
            if self.alive():
                raise
            self.soft_failures.append(f"{name}: {exc}")
            return PrefillResult(depth=depth, status="failed", reason=str(exc))
        return summarize_prefill(depth, self.records)
