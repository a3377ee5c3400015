"""What a bench run gives: per-prompt summaries, prefill results and the whole result.

The summaries are computed from the request records alone, so a verifier recomputing them
from a report's records gets the same figures.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from kit.base import KitModel
from kit.bench.held import held_runs
from kit.bench.load import LoadPoint
from kit.bench.plausible import left_out, plausible
from kit.bench.stream import RequestRecord
from kit.metrics import ServerWindow, SpecDecode, Stats, summarize
from kit.noise import Headline, headline
from kit.probe.hostspeed import HostSpeed, median_speed
from kit.recipe import Prompt


class PromptSummary(KitModel):
    prompt: str = Field(description="Prompt name.")
    max_tokens: int = Field(description="max_tokens sent.")
    measured: int = Field(description="Measured runs attempted.")
    usable: int = Field(description="Usable measured runs (the statistics use these).")
    headline: Headline = Field(
        description="The decode tokens/s kit leads with: the median of the usable measured "
        "runs that were not held streams, with its bootstrap interval (kit.noise)."
    )
    decode_tps: Stats = Field(
        description="Decode tokens/s over every usable run: the Club-3090 mean and std, for "
        "comparison with published figures."
    )
    wall_tps: Stats = Field(description="Wall tokens/s.")
    ttft_ms: Stats = Field(description="Time to first token, ms.")
    completion_tokens: Stats = Field(description="Generated tokens per run.")
    spec_decode: SpecDecode | None = Field(None, description="Over this prompt's measured runs.")
    server: ServerWindow | None = Field(None, description="Server-side figures, same window.")
    host_speed: HostSpeed | None = Field(
        None,
        description="The host-speed witness over the measured runs: the median of each part "
        "(absent where it was not run).",
    )

    @model_serializer(mode="wrap")
    def _witness_when_run(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if data.get("host_speed") is None:
            data.pop("host_speed", None)  # a run without the witness is written without it
        return data


class PrefillResult(KitModel):
    depth: int = Field(description="Target prompt length in tokens.")
    status: Literal["measured", "skipped", "failed"] = Field(description="Outcome.")
    reason: str | None = Field(None, description="Why skipped or failed.")
    prompt_tokens: Stats | None = Field(None, description="Actual prompt tokens.")
    ttft_ms: Stats | None = Field(None, description="TTFT, ms.")
    prefill_tps: Stats | None = Field(None, description="prompt_tokens / TTFT.")
    headline: Headline | None = Field(
        None,
        description="prompt_tokens / TTFT: the median of the runs with its interval (absent "
        "where the depth was not measured).",
    )

    @model_serializer(mode="wrap")
    def _headline_when_measured(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if data.get("headline") is None:
            data.pop("headline", None)  # a depth skipped or failed has none
        return data


class BenchResult(KitModel):
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
    load_points: list[LoadPoint] = Field(
        default_factory=list,
        description="A load pattern's points, one summary each (absent for the sequential "
        "protocol).",
    )

    @model_serializer(mode="wrap")
    def _points_only_under_load(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not data.get("load_points"):
            data.pop("load_points", None)  # a sequential run is written as it always was
        return data


def _usable(prompt: str, records: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.prompt == prompt and r.phase == "measured" and r.usable]


def decode_runs(prompt: str, records: list[RequestRecord]) -> dict[int, float]:
    """A prompt's usable measured runs' decode tokens/s, by run index."""
    return {r.index: r.decode_tps for r in _usable(prompt, records) if r.decode_tps is not None}


def decode_headline(prompt: str, records: list[RequestRecord]) -> Headline:
    """A prompt's decode headline: its usable runs, the held streams and the runs that are not
    plausible measurements (kit.bench.plausible) left out."""
    out = held_runs(prompt, records) | left_out(_usable(prompt, records))
    return headline("decode_tps", decode_runs(prompt, records), out)


def prompt_host_speed(prompt: str, records: list[RequestRecord]) -> HostSpeed | None:
    """The medians of a prompt's measured runs' host-speed witness; None where none was read."""
    return median_speed(
        [
            r.host_speed
            for r in records
            if r.prompt == prompt and r.phase == "measured" and r.host_speed and plausible(r)
        ]
    )


def summarize_prompt(prompt: Prompt, records: list[RequestRecord]) -> PromptSummary:
    """One prompt's statistics over its usable measured runs (spec decode and server aside),
    those that are not plausible measurements left out (kit.bench.plausible)."""
    measured = [r for r in records if r.prompt == prompt.name and r.phase == "measured"]
    usable = [r for r in measured if r.usable and plausible(r)]
    return PromptSummary(
        prompt=prompt.name,
        max_tokens=prompt.max_tokens,
        measured=len(measured),
        usable=len(usable),
        headline=decode_headline(prompt.name, records),
        decode_tps=summarize(r.decode_tps for r in usable if r.decode_tps is not None),
        wall_tps=summarize(r.wall_tps for r in usable if r.wall_tps is not None),
        ttft_ms=summarize(r.ttft_s * 1000 for r in usable if r.ttft_s is not None),
        completion_tokens=summarize(
            r.completion_tokens for r in usable if r.completion_tokens is not None
        ),
        host_speed=prompt_host_speed(prompt.name, records),
    )


def summarize_prefill(depth: int, records: list[RequestRecord]) -> PrefillResult:
    """One prefill depth's statistics over its error-free measured runs, those that are not
    plausible measurements left out (kit.bench.plausible; the headline names them)."""
    runs = [
        r
        for r in records
        if r.prompt == f"prefill-{depth}"
        and r.phase == "prefill"
        and r.error is None
        and r.ttft_s
        and r.prompt_tokens
    ]
    out = left_out(runs)
    runs = [r for r in runs if r.index not in out]
    if not runs:
        why = "no successful run" if not out else "no successful run that is a measurement"
        return PrefillResult(depth=depth, status="failed", reason=why)
    return PrefillResult(
        depth=depth,
        status="measured",
        prompt_tokens=summarize(float(r.prompt_tokens or 0) for r in runs),
        ttft_ms=summarize((r.ttft_s or 0) * 1000 for r in runs),
        prefill_tps=summarize((r.prompt_tokens or 0) / (r.ttft_s or 1) for r in runs),
        headline=headline(
            "prefill_tps", {r.index: (r.prompt_tokens or 0) / (r.ttft_s or 1) for r in runs}, out
        ),
    )
