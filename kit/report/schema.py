"""The report document: one JSON object per run, with everything needed to re-run and check it.

This module holds the model, its version and its JSON Schema, nothing else. Reading and writing
report files is :mod:`kit.report.files`; building one is :mod:`kit.report.assemble`; display is
:mod:`kit.report.show`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from kit.base import KitModel
from kit.bench import BenchResult
from kit.bench.claims import ContextLadder, Soak
from kit.enginefacts import EngineFacts
from kit.enginelog import EngineChoices
from kit.migrations import current_version
from kit.model import ModelManifest
from kit.patches import PatchManifest
from kit.peers.schema import Peers
from kit.probe import GpuSampling, HostLoad, HostProbe
from kit.quality import QualityProbe
from kit.quality.harness import HarnessRun
from kit.quantize import QuantManifest
from kit.recipe.acceptance import AcceptanceTarget
from kit.recipe.lock import PinRecord
from kit.report.upgrades import UPGRADES
from kit.report.verdict import Reproduction, Validity
from kit.roofline import Roofline
from kit.vllm_bench import VllmBench

# Older payloads are upgraded as they are read (kit.report.upgrades), after their signature
SCHEMA_VERSION = current_version(UPGRADES)


class EngineInfo(EngineFacts):
    """The engine that served: what it was and where it ran (paths KIT_HOME-relative)."""

    image: str | None = Field(
        None, description="The image it ran from (compose runs only; absent otherwise)."
    )
    image_id: str | None = Field(
        None, description="That image's id (compose runs only; absent otherwise)."
    )

    @model_serializer(mode="wrap")
    def _image_only_in_containers(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        for key in ("image", "image_id"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class KitSource(KitModel):
    """The code that wrote a report: kit's git commit, and the patch series it held."""

    commit: str = Field(
        description="kit's git commit (40 hex), or 'unknown' where kit did not run from a git "
        "checkout (an installed wheel) or git could not say."
    )
    dirty: bool | None = Field(
        description="Whether tracked files differed from that commit (uncommitted changes); "
        "None when the commit is unknown or git could not say."
    )
    patch_series: str | None = Field(
        None, description="The recipe's patch series (server.patches); None without one."
    )
    patch_series_sha256: str | None = Field(
        None,
        description="sha256 of that series as kit held it: of the compact JSON "
        '{"series": name, "patches": [[file, sha256], ...]}, the patches in order '
        "(kit.report.assemble.series_sha256); None without a series or where kit did not find "
        "it.",
    )


class NodeInfo(KitModel):
    """One node of a server spread over hosts with vLLM's multi-node launcher (kit.nodes)."""

    rank: int = Field(ge=0, description="vLLM's node rank; 0 is the head.")
    role: Literal["head", "worker"] = Field(
        description="head: the API server and rank 0 of the world; worker: headless."
    )
    address: str = Field(
        description="How the nodes reached it: an IP address as it is, a host name by its keyed "
        "stand-in (as the host probe names hosts), or the compose service's container."
    )
    started_by: Literal["kit", "compose", "elsewhere"] = Field(
        description="kit: a process of this run on this host; compose: a container of the "
        "stack; elsewhere: `kit serve --node-rank` on its own host."
    )
    log_file: str | None = Field(
        None, description="The node's log beside the report (None: not collected)."
    )
    transport: str | None = Field(
        None,
        description="The torch.distributed backend its processes joined the world with (gloo "
        "on CPU, nccl on GPUs), read from its log; None when the log has no such line.",
    )
    host: HostProbe | None = Field(
        None,
        description="The node's own host probe; None where it is the report's host (a node "
        "started by kit on this machine) or was not collected (started elsewhere).",
    )


class ServerInfo(KitModel):
    runtime: Literal["native", "compose", "external"] = Field(
        description="native: kit started it; compose: containers; external: kit bench --target."
    )
    argv: list[str] = Field(description="Command line (paths shown KIT_HOME-relative).")
    env: dict[str, str] = Field(description="Environment the recipe set for the server.")
    boot_s: float | None = Field(description="Seconds from start to healthy.")
    log_file: str | None = Field(None, description="Server log file name beside the report.")
    engine_choices: EngineChoices | None = Field(
        None,
        description="Kernels the engine chose (linear kernels, CPU W4A16 path and kernel build, "
        "attention backend), read from the server log; None in reports written before kit read "
        "them or when the log could not be read.",
    )
    nodes: list[NodeInfo] | None = Field(
        None,
        description="A server spread over nodes (server.nodes), the head first; None on one host.",
    )


class AcceptanceWindow(KitModel):
    """One measured window's acceptance from vLLM's counters against a synthetic target, each
    figure with its tolerance (kit.report.causes: synthetic-acceptance-missed)."""

    window: str = Field(description="The prompt, or the load point's label.")
    drafts: int = Field(description="Draft steps in the window (n).")
    draft_tokens: int = Field(description="Draft tokens proposed (n × k when no step was cut).")
    accepted_per_draft: float = Field(description="Achieved accepted draft tokens per step.")
    mean_tolerance: float = Field(
        description="How far accepted_per_draft may lie from the target's: z standard errors of "
        "the mean of n steps, plus epsilon."
    )
    per_position_rate: list[float] = Field(
        description="Achieved unconditional rate per position: accepted there / drafts."
    )
    position_tolerance: list[float] = Field(
        description="How far each position's rate may lie from its target: z × sqrt(p(1 - p) "
        "/ n) + epsilon."
    )
    shortfall: float = Field(
        description="Draft positions not proposed per step, (n × k - draft_tokens) / n: the "
        "most a rate may fall below its target on that account, added below each tolerance."
    )
    met: bool = Field(description="The mean and every position within their tolerance.")


class SyntheticAcceptanceCheck(KitModel):
    """A synthetic-acceptance run: the target asked (the recipe's, resolved) and, per measured
    window, what vLLM's counters show against it."""

    target: AcceptanceTarget = Field(description="The target, as asked and as resolved.")
    z: float = Field(description="Standard errors a figure may lie from its target.")
    epsilon: float = Field(description="Added to every tolerance (rounding of the rates).")
    windows: list[AcceptanceWindow] = Field(
        description="Each prompt's and load point's measured window that drafted anything."
    )


class Report(KitModel):
    """A benchmark run: recipe, inputs, environment, raw records, summaries."""

    schema_version: Literal[3] = Field(
        description="Report format version; an older one is upgraded as it is read "
        "(kit.report.upgrades)."
    )
    kind: Literal["kit.report"] = Field(description="Document type.")
    run_id: str = Field(description="Random id of this run.")
    created_at: str = Field(description="UTC time the report was written.")
    kit_version: str = Field(description="kit version that wrote it.")
    kit_source: KitSource | None = Field(
        None,
        description="kit's commit and the patch series' digest: the code that wrote it. Absent "
        "in reports written before kit recorded them.",
    )
    status: Literal["complete", "incomplete"] = Field(description="Whether every run finished.")
    incomplete_reason: str | None = Field(None, description="Why incomplete.")
    canonical: bool = Field(description="Whether the protocol is the reference's exactly.")
    non_canonical: list[str] = Field(description="Every way the protocol departs from it.")
    recipe_name: str = Field(description="Recipe name.")
    recipe_file: str | None = Field(description="Recipe file name (no directory).")
    recipe_overrides: list[str] = Field(description="--set overrides applied.")
    recipe: dict[str, Any] = Field(description="The resolved recipe.")
    recipe_sha256: str = Field(description="sha256 of the resolved recipe's canonical JSON.")
    pins: list[PinRecord] = Field(
        default_factory=list,
        description="Each pinnable field (hub revisions, a GPU base image), the value used and "
        "where it came from: the recipe, its lock file, --resolve or --set.",
    )
    versions: dict[str, str] = Field(description="kit, python, engine, torch, ... versions.")
    engine: EngineInfo | None = Field(None, description="The engine environment used.")
    patches: PatchManifest | None = Field(
        None, description="Patch series on the engine: patch and file sha256s, verified at boot."
    )
    model: ModelManifest | None = Field(None, description="Target model manifest.")
    draft: ModelManifest | None = Field(None, description="Draft model manifest.")
    quantization: QuantManifest | None = Field(None, description="Quantization manifest.")
    server: ServerInfo | None = Field(None, description="How the server ran.")
    bench: BenchResult | None = Field(None, description="Raw records and summaries.")
    host: HostProbe | None = Field(None, description="Host probe: hardware and settings.")
    gpu_sampling: GpuSampling | None = Field(
        None, description="GPU memory, power, clocks and PCIe sampled during the bench."
    )
    host_load: HostLoad | None = Field(
        None,
        description="How busy the host was with other work during the measured windows: CPU "
        "of other processes, steal time, load average, foreign GPU processes.",
    )
    energy_per_token_j: float | None = Field(
        None,
        description="GPU energy from the first measured request to the end of the last, per "
        "token generated in that span (warm-ups of later prompts included).",
    )
    roofline: Roofline | None = Field(
        None,
        description="Decode efficiency against the memory-bandwidth bound: bytes read per step "
        "(quantized weights + scales/zeros + unquantized layers + lm_head + one embedding row per "
        "token + KV cache of the average context; per GPU under TP) over the measured per-GPU "
        "copy bandwidth; with speculative decoding the bound is per target pass (plus the draft's "
        "passes) times the acceptance length. See kit/roofline.py.",
    )
    vllm_bench: VllmBench | None = Field(
        None,
        description="vLLM's own `vllm bench serve` against the same server at concurrency 1, "
        "with kit's decode TPS and TTFT beside its comparable figures and the deltas.",
    )
    validity: Validity = Field(description="Whether the run is fit to quote, and why not.")
    reproduction: Reproduction | None = Field(
        None,
        description="A re-run of a shared report (`kit reproduce REPORT.json`): the original, "
        "by run id and file digest, and the verdict on this run against it.",
    )
    notes: list[str] = Field(default_factory=list, description="Things a reader should know.")
    synthetic_acceptance: SyntheticAcceptanceCheck | None = Field(
        None,
        description="vLLM's synthetic acceptance (speculative.synthetic_acceptance): the "
        "target and the achieved acceptance per window. Absent for a real-acceptance run: "
        "then the accepted tokens are the draft's own.",
    )
    peers: Peers | None = Field(
        None,
        description="Other benchmark tools after kit's bench against the same server with the "
        "same traffic per point (bench.peers): each tool's figures, read back from its own "
        "result file, beside kit's, with their definitions and agreement (kit.peers).",
    )
    quality: QualityProbe | None = Field(
        None,
        description="The quality probe (bench.quality): kit's evaluation text scored "
        "teacher-forced through the served engine, per token, against the unquantized model's "
        "scores (the reference, with its provenance): perplexity, top-1 agreement, a KL "
        "estimate (kit.quality, docs/quality.md). Absent when the probe did not run.",
    )
    harness: HarnessRun | None = Field(
        None,
        description="The task harness (bench.quality.harness): lm-eval's scores per task, read "
        "back from its results file, or why there are none (kit.quality.harness, "
        "docs/quality.md). Absent when the recipe has no harness.",
    )
    context: ContextLadder | None = Field(
        None,
        description="The context ladder (bench.context): the engine's KV-cache capacity and "
        "the draft's bytes at boot, then one pass-key request a depth up to the served "
        "context, with each exchange as it happened and its TTFT, prefill and decode tok/s "
        "(kit.bench.claims). Absent when not run, and in reports written before it.",
    )
    soak: Soak | None = Field(
        None,
        description="The soak (bench.soak): multi-turn sessions with memory before and after "
        "each, every turn's exchange, and memory growth, TPS retention, empty turns and errors "
        "against the recipe's thresholds (kit.bench.claims). Absent when not run, and in "
        "reports written before it.",
    )

    @model_serializer(mode="wrap")
    def _synthetic_only_when_asked(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if data.get("synthetic_acceptance") is None:
            data.pop("synthetic_acceptance", None)  # a real run is written as before
        if data.get("peers") is None:
            data.pop("peers", None)  # so is a run without peers
        if data.get("quality") is None:
            data.pop("quality", None)  # and one without the quality probe
        if data.get("harness") is None:
            data.pop("harness", None)  # or without a task harness
        for key in ("context", "soak"):
            if data.get(key) is None:
                data.pop(key, None)  # not run (bench.context, bench.soak)
        return data


def report_json_schema() -> dict[str, Any]:
    schema = Report.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://kit.invalid/schemas/report-v1.json"
    return schema
