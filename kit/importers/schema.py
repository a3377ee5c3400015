"""What ``kit import`` reads from another tool's result file: :class:`Imported`, in kit's names
and units (ms, tokens/s, requests/s), whatever the tool wrote.

``VERSION`` changes when a field is renamed or removed, or changes meaning; adding a field
with a default does not change it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.base import FrozenModel
from kit.recipe.figures import Definition, LatencyFigures, PointFigure, ReferencePoint
from kit.recipe.protocol import AcceptanceFigures, PromptFigures, RigDetail

VERSION = 2


class Stats(FrozenModel):
    """A summary of one per-request quantity (a latency in ms, or a token count)."""

    n: int = Field(description="Requests with a value.")
    mean: float | None = Field(description="Arithmetic mean.")
    median: float | None = Field(description="Median.")
    p90: float | None = Field(description="90th percentile (linear between ranks).")
    p99: float | None = Field(description="99th percentile (linear between ranks).")
    min: float | None = Field(description="Smallest.")
    max: float | None = Field(description="Largest.")


class PerRequest(FrozenModel):
    """The per-request records or arrays a file holds, summarised (the values themselves stay
    in the file)."""

    count: int = Field(description="Records in the file.")
    failed: int = Field(description="Of those, failed (an error recorded).")
    input_tokens: Stats | None = Field(None, description="Prompt tokens per request.")
    output_tokens: Stats | None = Field(None, description="Output tokens per request.")
    ttft_ms: Stats | None = Field(None, description="Time to first token per request.")
    e2e_ms: Stats | None = Field(None, description="End-to-end latency per request.")


class ImportedLoad(FrozenModel):
    """How a point's requests went out, as kit's load patterns say it."""

    pattern: Literal["concurrency", "rate"] = Field(
        description="concurrency: that many streams in flight (closed loop); rate: requests "
        "per second (open loop)."
    )
    level: float = Field(gt=0, description="Streams in flight, or requests per second.")
    arrival: Literal["poisson", "constant"] | None = Field(
        None, description="A rate point's arrivals (None: not stated, or not a rate)."
    )
    max_concurrency: int | None = Field(None, description="A rate point's cap on streams.")
    requests: int | None = Field(None, description="Requests the point was to send.")
    duration_s: float | None = Field(
        None, description="A time-bounded point's duration, in s (None: bounded by requests)."
    )
    warmup_requests: int | None = Field(None, description="Warm-up requests, where stated.")
    note: str | None = Field(None, description="How the tool's setting became this one.")


class ImportedPoint(FrozenModel):
    """One measured point (or one run of it) with its figures."""

    label: str = Field(description="kit's label for it (concurrency-2, rate-4), or point-N.")
    load: ImportedLoad | None = Field(description="Its load (None: the file does not say).")
    run: int | None = Field(None, description="Run number, for repeated runs of one point.")
    figures: ReferencePoint = Field(description="Its figures in kit's names and units.")
    input_tokens_mean: float | None = Field(None, description="Mean prompt tokens per request.")
    output_tokens_mean: float | None = Field(None, description="Mean output tokens per request.")
    other: dict[str, LatencyFigures] = Field(
        default_factory=dict,
        description="Figures with no kit equivalent, by the tool's own name (ms).",
    )
    per_request: PerRequest | None = Field(None, description="Its per-request data, if any.")


class Workload(FrozenModel):
    """What the run sent: dataset, lengths, endpoint."""

    dataset: str | None = Field(None, description="The dataset as the file names it.")
    random: bool = Field(
        False, description="Random prompts of given token lengths (kit can send the same)."
    )
    input_tokens: int | None = Field(None, description="Prompt tokens per request (mean).")
    output_tokens: int | None = Field(None, description="Output tokens per request (mean).")
    range_ratio: float | None = Field(
        None, description="Lengths uniform in [n(1-r), n(1+r)], kit's convention (0: exact)."
    )
    lengths_from: str | None = Field(None, description="Where the lengths were read.")
    ignore_eos: bool | None = Field(None, description="Whether EOS was ignored, if stated.")
    endpoint: str | None = Field(None, description="API route or kind (chat, completions).")
    backend_url: str | None = Field(None, description="The server it measured, as written.")


class SpecDecode(FrozenModel):
    """What a file says of speculative decoding: whether it drafted, how, and its counters."""

    drafting: bool | None = Field(
        description="True: the file shows drafting; False: it states none ran; None: it says "
        "nothing (an open pin)."
    )
    method: str | None = Field(None, description="The method as the file names it (None: not).")
    kit_method: Literal["dflash", "dflash2", "ngram", "draft_model", "mtp"] | None = Field(
        None, description="kit's speculative.method for it, where one matches."
    )
    num_speculative_tokens: int | None = Field(
        None, ge=1, description="Tokens drafted per step (stated, or the per-position count)."
    )
    draft: str | None = Field(None, description="The draft model as the file names it.")
    acceptance: AcceptanceFigures | None = Field(
        None, description="Accepted and drafted tokens and draft steps (kit's counters)."
    )
    acceptance_rate_pct: float | None = Field(
        None, description="Accepted in percent of drafted, as the file states it."
    )
    acceptance_length: float | None = Field(
        None, description="vLLM's mean acceptance length, 1 + accepted / drafts, as stated."
    )
    per_position_rates: list[float] = Field(
        default_factory=list, description="Acceptance rate of each drafted position, stated."
    )
    scope: str | None = Field(
        None, description="What the counters cover, where not the whole measured run."
    )
    source: str = Field(description="The keys or lines they were read from.")


class Prompts(FrozenModel):
    """A sequential per-prompt protocol (Club-3090's bench.sh): its warm-ups, runs, prompts and
    prefill probe, as the file states them."""

    warmups: int | None = Field(None, description="Warm-up requests per prompt.")
    runs: int | None = Field(None, description="Measured requests per prompt.")
    max_tokens: dict[str, int] = Field(
        default_factory=dict, description="Each prompt's max_tokens, by kit's prompt name."
    )
    chars: dict[str, int] = Field(
        default_factory=dict, description="Each prompt's length in characters, as printed."
    )
    prefill_depths: list[int] = Field(
        default_factory=list, description="The prefill probe's target depths, in tokens."
    )
    prefill_runs: int | None = Field(None, description="Measured prefill requests per depth.")
    prefill_warmups: int | None = Field(None, description="Prefill warm-ups per depth.")
    prefill_max_tokens: int | None = Field(None, description="The prefill requests' max_tokens.")


class OpenPin(FrozenModel):
    """Something a recipe needs that the file does not say."""

    field: str = Field(description="The recipe field, or the aspect (rig).")
    reason: str = Field(description="What the file says, or that it says nothing.")


class Imported(FrozenModel):
    """A result file of another tool, read."""

    version: Literal[2] = Field(2, description="This model's version (VERSION).")
    file: str = Field(description="The file's name.")
    tool: str = Field(description="The tool that wrote it, e.g. 'vllm bench serve'.")
    layout: str = Field(description="The layout detected (the schema version, or the era).")
    part: str | None = Field(
        None, description="The part of the file read, where it holds several (line-121)."
    )
    tool_version: str | None = Field(None, description="The tool's version, if stated.")
    date: str | None = Field(None, description="When the run was, if stated.")
    model: str | None = Field(None, description="The model name the requests carried.")
    hub_repo: str | None = Field(
        None, description="A hub repository id for the model, where the file names one."
    )
    engine: str | None = Field(None, description="The serving engine and version, if stated.")
    quantization: str | None = Field(
        None, description="The served model's quantization, if stated ('none' for none)."
    )
    hardware: str | None = Field(None, description="The hardware, if stated.")
    workload: Workload = Field(default_factory=Workload, description="What it sent.")
    server_args: list[str] = Field(
        default_factory=list, description="Serving flags the file states, as vLLM arguments."
    )
    points: list[ImportedPoint] = Field(
        default_factory=list, description="Its measured load points, in file order."
    )
    protocol: Prompts | None = Field(
        None, description="A per-prompt protocol it followed (Club-3090), where it did."
    )
    prompts: dict[str, PromptFigures] = Field(
        default_factory=dict, description="Per-prompt figures, by kit's prompt name."
    )
    prefill_tps: dict[int, float] = Field(
        default_factory=dict, description="Prefill tokens/s by target depth (tokens)."
    )
    peak_vram_mib: float | None = Field(None, description="Peak VRAM per card, in MiB.")
    vram_growth_mib: float | None = Field(
        None, description="VRAM post - idle over the measured window, in MiB (all cards)."
    )
    max_context_tokens: int | None = Field(None, description="The served context, in tokens.")
    kv_cache_tokens: int | None = Field(None, description="The KV cache's size, in tokens.")
    draft_memory_mib: float | None = Field(None, description="The draft's memory, in MiB.")
    kv_cache_dtype: str | None = Field(None, description="The KV cache dtype, as named.")
    rig_detail: RigDetail | None = Field(None, description="The rig, part by part, if stated.")
    speculative: SpecDecode | None = Field(
        None, description="Speculative decoding, as far as the file says (None: nothing)."
    )
    definitions: dict[PointFigure, Definition] = Field(
        default_factory=dict,
        description="How the tool defines its figures (by figure name): the figure of kit's "
        "points each is compared with, or none (not comparable). Its reader's.",
    )
    reference_only: str | None = Field(
        None, description="Why kit cannot re-run it as kit traffic (None: it can)."
    )
    open_pins: list[OpenPin] = Field(
        default_factory=list,
        description="What the file leaves open (kit.importers.pins, from the fields above).",
    )
    warnings: list[str] = Field(default_factory=list, description="Edge cases found.")
    notes: list[str] = Field(
        default_factory=list, description="How each carried value was read or defaulted."
    )
