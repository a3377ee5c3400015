"""The traffic of kit's points, for a peer to send alike (:class:`TrafficPoint`), and kit's own
figures at each point (:func:`kit_points`). A point is a prompt of the sequential protocol (the
prompt, its warm-ups then its runs, one at a time) or a load point (the requests kit drew for
it, warm-ups first, paced as its pattern says).
"""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass
from typing import Any

from kit.bench import BenchResult, RequestRecord
from kit.bench.load import LoadPoint, summarize_point
from kit.bench.load.datasets import Planned, nth
from kit.bench.stream import ignores_eos
from kit.recipe import Bench
from kit.recipe.patterns import Pacing


@dataclass(frozen=True)
class Request:
    """One request: the user message, sent as it is, and its output length."""

    text: str
    max_tokens: int


@dataclass(frozen=True)
class TrafficPoint:
    """One of kit's points as another tool sends it: ``rows`` (``warmups`` first, then the
    measured ones), paced as ``pacing`` says; ``level`` is a load point's (None: a prompt);
    ``salted``: each tool sends the rows behind a salt of its own."""

    label: str
    rows: tuple[Request, ...]
    warmups: int
    pacing: Pacing
    level: float | None = None
    salted: bool = False

    @property
    def requests(self) -> int:
        """Measured requests."""
        return len(self.rows) - self.warmups

    def sent(self, tool: str) -> list[Request]:
        """The rows as ``tool`` sends them: behind its salt and their number, if salted. A load
        point's are, so no tool reads its prompts from the prefix cache another one filled; a
        prompt's go out as kit sent them."""
        if not self.salted:
            return list(self.rows)
        salt = f"{tool}-{self.label}-{secrets.token_hex(4)}"
        return [Request(f"[{salt}-{i}] {r.text}", r.max_tokens) for i, r in enumerate(self.rows)]


def traffic(
    bench: Bench, result: BenchResult | None, planned: list[Planned] | None
) -> list[TrafficPoint]:
    """kit's points in kit's order: each prompt kit measured, or each load point it measured
    on the requests it drew (``planned``, warm-ups first, as the bench drew them)."""
    load = bench.load
    if load is None:
        measured = {p.prompt for p in result.prompts} if result is not None else set()
        return [
            TrafficPoint(
                label=p.name,
                rows=(Request(p.text, p.max_tokens),) * (bench.warmups + bench.runs),
                warmups=bench.warmups,
                pacing=Pacing(concurrency=1),
            )
            for p in bench.prompts
            if p.name in measured
        ]
    out = []
    for point in result.load_points if result is not None else []:
        warmups = load.warmups_at(point.level)
        drawn = [nth(planned or [], i) for i in range(warmups + point.requests)]
        out.append(
            TrafficPoint(
                label=point.label,
                rows=tuple(Request(p.text, p.max_tokens) for p in drawn),
                warmups=warmups,
                pacing=load.pacing(point.level),
                level=point.level,
                salted=True,
            )
        )
    return out


def extra_body(bench: Bench) -> dict[str, Any]:
    """What every request carries beside its message and length, as kit's own do (kit.bench's
    request_body): the sampling, the chat template's arguments, ``ignore_eos``."""
    s = bench.sampling
    body: dict[str, Any] = {
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": s.top_k,
        "min_p": s.min_p,
        "chat_template_kwargs": dict(bench.chat_template_kwargs),
        "ignore_eos": ignores_eos(bench),
    }
    if s.seed is not None:
        body["seed"] = s.seed
    return body


def _started(r: RequestRecord) -> float:
    return dt.datetime.fromisoformat(r.started_at).timestamp()


def prompt_point(records: list[RequestRecord], prompt: str) -> LoadPoint:
    """A prompt's measured runs as a load point at concurrency 1: the figures of a load point
    (kit.bench.load), their sends timed from the first one's start."""
    runs = [r for r in records if r.prompt == prompt and r.phase == "measured"]
    t0 = min((_started(r) for r in runs), default=0.0)
    as_load = [
        r.model_copy(update={"phase": "load", "sent_s": round(_started(r) - t0, 6)}) for r in runs
    ]
    return summarize_point(prompt, "concurrency", 1, as_load, None)


def kit_points(bench: Bench, result: BenchResult | None) -> dict[str, LoadPoint]:
    """kit's figures at each point, by label: its load points, or each prompt's runs."""
    if result is None:
        return {}
    if bench.load is not None:
        return {p.label: p for p in result.load_points}
    return {p.prompt: prompt_point(result.records, p.prompt) for p in result.prompts}
