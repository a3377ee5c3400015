"""Report: one JSON document per run, with everything needed to re-run and check it.

The report's bytes are produced once (:func:`report_bytes`) and those exact bytes are what
gets written and signed; readers never re-serialise before checking.
"""

from __future__ import annotations

import datetime as dt
import platform
import secrets
import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kit import __version__
from kit.bench import BenchResult
from kit.enginelog import EngineChoices
from kit.metrics import Stats
from kit.model import ModelManifest
from kit.patches import PatchManifest
from kit.probe import GpuSampling, HostLoad, HostProbe
from kit.quantize import QuantManifest
from kit.roofline import Roofline
from kit.validity import Validity
from kit.vllm_bench import VllmBench

SCHEMA_VERSION = 1


class ServerInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

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


class Report(BaseModel):
    """A benchmark run: recipe, inputs, environment, raw records, summaries."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = Field(description="Report format version.")
    kind: Literal["kit.report"] = Field(description="Document type.")
    run_id: str = Field(description="Random id of this run.")
    created_at: str = Field(description="UTC time the report was written.")
    kit_version: str = Field(description="kit version that wrote it.")
    status: Literal["complete", "incomplete"] = Field(description="Whether every run finished.")
    incomplete_reason: str | None = Field(None, description="Why incomplete.")
    canonical: bool = Field(description="Whether the protocol is the reference's exactly.")
    non_canonical: list[str] = Field(description="Every way the protocol departs from it.")
    recipe_name: str = Field(description="Recipe name.")
    recipe_file: str | None = Field(description="Recipe file name (no directory).")
    recipe_overrides: list[str] = Field(description="--set overrides applied.")
    recipe: dict[str, Any] = Field(description="The resolved recipe.")
    recipe_sha256: str = Field(description="sha256 of the resolved recipe's canonical JSON.")
    versions: dict[str, str] = Field(description="kit, python, engine, torch, ... versions.")
    engine: dict[str, Any] | None = Field(None, description="The engine environment used.")
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
    notes: list[str] = Field(default_factory=list, description="Things a reader should know.")


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def base_versions() -> dict[str, str]:
    return {
        "kit": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
    }


def non_canonical_reasons(recipe: dict[str, Any]) -> list[str]:
    """How a recipe's protocol departs from the reference protocol (empty: canonical)."""
    from kit.recipe import REFERENCE_PROMPTS, Bench, Sampling

    bench = Bench.model_validate(recipe.get("bench", {}))
    out = []
    if bench.ignore_eos:
        out.append("ignore_eos: runs generate to max_tokens whatever the model says")
    if bench.warmups != 3 or bench.runs != 5:
        out.append(f"{bench.warmups} warm-ups + {bench.runs} runs (reference: 3 + 5)")
    ref = {p.name: p for p in REFERENCE_PROMPTS}
    for p in bench.prompts:
        r = ref.get(p.name)
        if r is None or r.text != p.text:
            out.append(f"prompt {p.name!r} differs from the reference prompts")
        elif r.max_tokens != p.max_tokens:
            out.append(f"prompt {p.name!r}: max_tokens {p.max_tokens} (reference {r.max_tokens})")
    if {p.name for p in bench.prompts} != set(ref):
        out.append("prompt set differs from the reference (narrative, code)")
    if bench.sampling != Sampling():
        out.append("sampling differs from the reference (0.6 / 0.95 / 20 / 0.0)")
    return out


def report_bytes(report: Report) -> bytes:
    """The report's canonical bytes (RFC 8785): what the envelope carries and signs."""
    from kit.sign import canonical_bytes

    return canonical_bytes(report.model_dump(mode="json"))


def encode_report(report: Report, private_key: Any = None) -> bytes:
    """The report file: a DSSE envelope, signed when a key is given, else marked unsigned."""
    from kit.sign import sign_report, unsigned_report

    data = report.model_dump(mode="json")
    return sign_report(data, private_key) if private_key is not None else unsigned_report(data)


def report_json_schema() -> dict[str, Any]:
    schema = Report.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://kit.invalid/schemas/report-v1.json"
    return schema


# ---------------------------------------------------------------------------------------------
# human summary


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _stat(s: Stats | None, digits: int = 2, cv: bool = False) -> str:
    if s is None or s.mean is None:
        return "-"
    text = f"{s.mean:.{digits}f}"
    if cv and s.cv_pct is not None:
        text += f" ({s.cv_pct:.1f}%)"
    return text


def summary_table(report: Report) -> str:
    """A short table like the reference's, for the terminal."""
    lines = [
        f"kit report {report.run_id}  recipe {report.recipe_name}  "
        f"status {report.status}{'' if report.canonical else '  (not canonical)'}"
    ]
    if report.incomplete_reason:
        lines.append(f"  incomplete: {report.incomplete_reason}")
    b = report.bench
    if b is not None:
        head = (
            f"  {'prompt':<10} {'runs':>5} {'decode TPS (CV)':>18} {'wall TPS':>9} "
            f"{'TTFT ms':>8} {'tokens':>7}"
        )
        lines += [head, "  " + "-" * (len(head) - 2)]
        for p in b.prompts:
            lines.append(
                f"  {p.prompt:<10} {p.usable:>2}/{p.measured:<2} "
                f"{_stat(p.decode_tps, cv=True):>18} {_stat(p.wall_tps):>9} "
                f"{_stat(p.ttft_ms, 0):>8} {_stat(p.completion_tokens, 0):>7}"
            )
        for pf in b.prefill:
            if pf.status == "measured":
                lines.append(
                    f"  prefill {pf.depth:>6} tok: {_stat(pf.prefill_tps, 0)} tok/s "
                    f"(TTFT {_stat(pf.ttft_ms, 0)} ms)"
                )
            else:
                lines.append(f"  prefill {pf.depth:>6} tok: {pf.status} ({pf.reason})")
        s = b.spec_decode
        if s is not None:
            rate = f"{s.acceptance_rate * 100:.1f}%" if s.acceptance_rate is not None else "-"
            lines.append(
                f"  spec decode: {s.accepted_tokens}/{s.draft_tokens} draft tokens accepted "
                f"({rate}) in {s.drafts} steps; acceptance length "
                f"{_f(s.acceptance_length)} (1+accepted/drafts), "
                f"{_f(s.accepted_per_draft)} (accepted/drafts)"
            )
    v = report.validity
    lines.append(f"  validity: {'valid' if v.valid else 'INVALID'}")
    lines += [f"    {f.severity}: {f.message}" for f in v.reasons]
    if report.energy_per_token_j is not None:
        lines.append(f"  energy: {report.energy_per_token_j:.3f} J per generated token")
    for note in report.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)
