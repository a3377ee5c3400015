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
    points: list[ImportedPoint] = Field(description="Its measured points, in file order.")
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
