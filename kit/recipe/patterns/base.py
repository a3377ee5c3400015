"""What every load pattern has and says of itself (:class:`LoadPattern`), and the closed-loop
base of the patterns whose levels are streams in flight (:class:`StreamsLoad`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, get_args

from pydantic import Field, model_validator

from kit.recipe.base import RecipeModel
from kit.recipe.slo import Slo


@dataclass(frozen=True)
class SendPlan:
    """How a point's requests go out. Closed loop (``gaps`` None): ``streams`` streams, each
    sending its next request as soon as its last one ends. Open loop: request ``i`` sent
    ``sum(gaps[:i + 1])`` seconds after the start, however many are in flight, at most
    ``streams`` at once."""

    streams: int
    gaps: list[float] | None = None


@dataclass(frozen=True)
class Pacing:
    """How a point's requests go out, in the words every benchmark tool has (kit.peers): at
    most ``concurrency`` streams in flight (None: unbounded), sent as soon as one ends
    (``rate`` None: closed loop), or ``rate`` requests per second with ``arrival`` gaps."""

    concurrency: int | None
    rate: float | None = None
    arrival: Literal["poisson", "constant"] | None = None


@dataclass(frozen=True)
class ForeignPoint:
    """A point of another tool's run, as a pattern rebuilds it as kit traffic (kit.importers):
    its level, the measured requests it planned or counted, its warm-ups, and how it sent
    them."""

    level: float
    requests: int | None
    warmup_requests: int | None = None
    arrival: Literal["poisson", "constant"] | None = None
    max_concurrency: int | None = None


class PointFigures(Protocol):
    """What a stop rule reads of a measured point (:class:`kit.bench.load.LoadPoint`)."""

    @property
    def label(self) -> str: ...
    @property
    def level(self) -> float: ...
    @property
    def requests(self) -> int: ...
    @property
    def good(self) -> int | None: ...
    @property
    def output_tps(self) -> float | None: ...


class LoadPattern(RecipeModel):
    """What every load pattern has, and what each one says of itself: the levels it runs, its
    points' names, their warm-ups and measured requests, how their requests go out, what
    ``vllm bench serve`` is given for them, whether it stops early, and how the report's page
    draws its levels (``axis_label``, ``axis_short``, ``log_base``). A new pattern is one
    subclass of this (or of :class:`StreamsLoad`), added to
    :data:`kit.recipe.patterns.Load`."""

    late_fields = frozenset({"processes"})
    axis_label: ClassVar[str]
    axis_short: ClassVar[str]  # beside other charts, where space is short
    log_base: ClassVar[int | None] = None  # the x axis: logarithmic in this base, or linear

    requests: int = Field(
        gt=0, description="Measured requests per point (see requests_per_stream)."
    )
    warmup_requests: int = Field(
        0, ge=0, description="Requests sent before each point's measured ones, then discarded."
    )
    cooldown_s: float = Field(
        0.0, ge=0, description="Idle seconds after each point, before the next one's warm-up."
    )
    processes: int = Field(
        1,
        ge=1,
        le=64,
        description="Client processes sending each point's requests (streams, or arrivals, "
        "dealt among them; a rate point's max_concurrency split evenly). One process takes in "
        "about 177k streamed tok/s a core (experiments/load-client.py): raise it when a point's "
        "client CPU nears a core (the verdict's client-saturated).",
    )

    @abstractmethod
    def planned_levels(self) -> list[float]:
        """Every level the pattern may run, in order (it may stop before its last)."""

    @classmethod
    @abstractmethod
    def label(cls, level: float) -> str:
        """The name a point's records carry in place of a prompt name."""

    @classmethod
    @abstractmethod
    def short_label(cls, level: float) -> str:
        """The point's name where space is short (a chart's marker)."""

    def warmups_at(self, level: float) -> int:
        """Warm-up requests of the point at ``level`` (sent first, as its measured ones)."""
        return self.warmup_requests

    def requests_at(self, level: float) -> int:
        """Measured requests of the point at ``level``."""
        return self.requests

    @abstractmethod
    def send_plan(self, level: float, count: int) -> SendPlan:
        """How ``count`` requests of the point at ``level`` go out."""

    @abstractmethod
    def vllm_args(self, level: float) -> list[str]:
        """The ``vllm bench serve`` arguments that send the point at ``level`` as kit does."""

    def vllm_warmups(self, level: float, default: int) -> int:
        """``--num-warmups`` at the point at ``level`` (``default``: bench.vllm_bench's)."""
        return default

    @abstractmethod
    def pacing(self, level: float) -> Pacing:
        """How the point at ``level`` sends its requests, for another tool to send them alike."""

    def vllm_note(self) -> str | None:
        """What differs in how ``vllm bench serve`` sends the traffic, if anything."""
        return None

    @classmethod
    def levels_entry(cls, levels: Sequence[float]) -> dict[str, Any]:
        """The recipe keys that name ``levels`` (another tool's points of this pattern)."""
        raise NotImplementedError(f"{cls.__name__} is not rebuilt from another tool's points")

    @classmethod
    def foreign_requests(cls, points: Sequence[ForeignPoint]) -> dict[str, Any] | None:
        """Recipe keys that give ``points`` their differing request counts (None: none do)."""
        return None

    @classmethod
    def foreign_extras(cls, points: Sequence[ForeignPoint]) -> dict[str, Any]:
        """The pattern's own recipe keys, as ``points`` sent their requests."""
        return {}

    @classmethod
    def from_foreign(cls, points: Sequence[ForeignPoint], carried: list[str]) -> dict[str, Any]:
        """``bench.load`` for another tool's ``points`` of this pattern; each value carried
        over or defaulted is said in ``carried``."""
        load: dict[str, Any] = {"pattern": get_args(cls.model_fields["pattern"].annotation)[0]}
        load |= cls.levels_entry(list(dict.fromkeys(p.level for p in points)))
        per_level: dict[float, int] = {}
        for p in points:
            if p.requests:
                per_level.setdefault(p.level, p.requests)
        counts = set(per_level.values())
        if len(counts) == 1:
            load["requests"] = counts.pop()
        elif counts and (keys := cls.foreign_requests(points)) is not None:
            load |= keys
        else:
            load["requests"] = max(counts) if counts else 1
            carried.append(
                f"bench.load.requests: {load['requests']} at every point"
                + (" (the file's counts differ per point)" if counts else " (the file states none)")
            )
        warm = {p.warmup_requests for p in points} - {None}
        if len(warm) == 1:
            load["warmup_requests"] = warm.pop()
        return load | cls.foreign_extras(points)

    def stop_reason(self, points: Sequence[PointFigures], slo: Slo | None) -> str | None:
        """Why the pattern stops after the last of ``points`` (None: it goes on to its next
        level, if it has one)."""
        return None


def _one_warmup_rule(requests: int, per_stream: int | None) -> None:
    if per_stream is not None and requests:
        raise ValueError(
            "warmup_requests and warmup_per_stream both set: a point's warm-up is one or the other"
        )


class StreamsLoad(LoadPattern):
    """A pattern whose levels are streams in flight (closed loop), its requests and warm-ups
    counted per point or per stream."""

    late_fields = frozenset({"processes", "warmup_per_stream"})
    if TYPE_CHECKING:  # each pattern's own field, described there
        requests_per_stream: int | None
        warmup_per_stream: int | None

    @model_validator(mode="after")
    def _one_warmup(self) -> StreamsLoad:
        _one_warmup_rule(self.warmup_requests, self.warmup_per_stream)
        return self

    @classmethod
    def label(cls, level: float) -> str:
        return f"concurrency-{int(level)}"

    @classmethod
    def short_label(cls, level: float) -> str:
        return f"c={int(level)}"

    def warmups_at(self, level: float) -> int:
        per_stream = self.warmup_per_stream
        return int(level) * per_stream if per_stream else self.warmup_requests

    def requests_at(self, level: float) -> int:
        per_stream = self.requests_per_stream
        return int(level) * per_stream if per_stream else self.requests

    def send_plan(self, level: float, count: int) -> SendPlan:
        return SendPlan(streams=int(level))

    def vllm_args(self, level: float) -> list[str]:
        return ["--request-rate", "inf", "--max-concurrency", str(int(level))]

    def pacing(self, level: float) -> Pacing:
        return Pacing(concurrency=int(level))

    def vllm_warmups(self, level: float, default: int) -> int:
        # with warm-ups per stream, vLLM's reach the point's batch size as kit's do
        return self.warmups_at(level) if self.warmup_per_stream else default
