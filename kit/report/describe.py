"""What a report describes, in a benchmark table's words: the rig, the engine and its kernels,
the model, its quantization and the quantized checkpoint, speculative decoding (labelled
SYNTHETIC at a synthetic acceptance). Shared by show, compare, table and the HTML page.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pydantic import Field

from kit.base import FrozenModel
from kit.bench.plausible import NOT_MEASURED
from kit.noise import Headline
from kit.probe import HostProbe, Unavailable, cpu_summary, isa_level
from kit.recipe.acceptance import AcceptanceTarget, target_of
from kit.report.figures import prompt_headline
from kit.report.schema import Report
from kit.report.verdict import HUGE
from kit.report.verdict import num as figure_text
from kit.runtimes import serving


class Rig(FrozenModel):
    """A host in a benchmark table's words; a part is None when unknown or not applicable."""

    gpus: str = Field(description="'2× NVIDIA H200', or 'CPU (n cores)' without a GPU.")
    gpu_count: int = Field(description="Number of GPUs (0: a CPU run).")
    pcie: str | None = Field(description="'PCIe Gen5 x16/x16': slot generation and lanes per card.")
    power: str | None = Field(description="'700/700 W': power limit in force per card.")
    interconnect: str | None = Field(
        description="'NVLink', 'no NVLink, P2P OK', 'no NVLink, no P2P'; None for one GPU."
    )
    cpu: str = Field(description="CPU model and core count.")

    @property
    def cell(self) -> str:
        return ", ".join(p for p in (self.gpus, self.pcie, self.power, self.interconnect) if p)


def _known(value: object) -> bool:
    return value is not None and not isinstance(value, Unavailable)


def num(value: str | float | int | Unavailable, fmt: str = "g") -> str:
    if isinstance(value, Unavailable):
        return "?"
    if isinstance(value, str):
        return value
    return format(value, fmt) if abs(value) < HUGE else format(value, ".3g")  # 1.8e+305


def rig(host: HostProbe | None) -> Rig | None:
    """The host as a table describes it; None without a host probe. Described the way benchmark
    tables do it: card count × GPU name, PCIe generation and lanes per card, power caps per
    card, the interconnect; "CPU (n cores)" without a GPU."""
    if host is None:
        return None
    cores = host.cpu.usable_cores if _known(host.cpu.usable_cores) else host.cpu.logical_cores
    cpu_model = host.cpu.model if isinstance(host.cpu.model, str) else "unknown CPU"
    cpu = f"{cpu_model} ({num(cores)} cores)"
    if host.cpu.isa is not None:  # reports before the ISA was probed have none
        cpu = f"{cpu_summary(host.cpu)} ({num(cores)} cores)"
    gpus = host.gpus
    if not gpus:
        return Rig(
            gpus=f"CPU ({num(cores)} cores)",
            gpu_count=0,
            pcie=None,
            power=None,
            interconnect=None,
            cpu=cpu,
        )
    names = Counter(g.name if isinstance(g.name, str) else "unknown GPU" for g in gpus)
    gens = [num(g.pcie.gen_max) for g in gpus]
    gen = f"Gen{gens[0]}" if len(set(gens)) == 1 else "/".join(f"Gen{x}" for x in gens)
    widths = "/".join(f"x{num(g.pcie.width_max)}" for g in gpus)
    caps = [
        g.power.enforced_limit_w if _known(g.power.enforced_limit_w) else g.power.limit_w
        for g in gpus
    ]
    return Rig(
        gpus=" + ".join(f"{n}× {name}" for name, n in names.items()),
        gpu_count=len(gpus),
        pcie=f"PCIe {gen} {widths}",
        power="/".join(num(c, ".0f") for c in caps) + " W",
        interconnect=_interconnect(host),
        cpu=cpu,
    )


def _interconnect(host: HostProbe) -> str | None:
    if len(host.gpus) < 2:
        return None
    links = [
        link for g in host.gpus if isinstance(g.nvlinks, list) for link in g.nvlinks if link.active
    ]
    if links:
        return "NVLink"
    reads = [p.read for p in host.p2p]
    if reads and all(r == "OK" for r in reads):
        return "no NVLink, P2P OK"
    if any(isinstance(r, str) for r in reads):
        return (
            "no NVLink, no P2P" if not any(r == "OK" for r in reads) else "no NVLink, P2P partial"
        )
    return "no NVLink, P2P unknown"


def engine_text(report: Report) -> str:
    engine = report.engine
    server = report.recipe.get("server") or {}
    recipe_engine = server.get("engine") or {}
    name = (engine.name if engine else None) or recipe_engine.get("name") or "?"
    version = (engine.version if engine else None) or recipe_engine.get("version") or "?"
    text = f"{name} {version}"
    if report.patches is not None:
        count = len(report.patches.patches)
        text += f" + {report.patches.series} ({count} patch{'es' * (count != 1)})"
    elif server.get("patches"):
        text += f" + {server['patches']} (no manifest)"
    if report.server is not None:
        text += serving(report.server.runtime).label
    return text


# a Python enum's repr as some engines log it: 'AttentionBackendEnum.FLASH_ATTN'
_ENUM_REPR = re.compile(r"_?[A-Za-z]\w*\.(?P<member>[A-Z][A-Z0-9_]*)")


def plain_name(name: str | None) -> str | None:
    """A name as people write it: an enum's repr as its member ('AttentionBackendEnum.FLASH_ATTN'
    -> 'FLASH_ATTN'); any other name unchanged."""
    m = _ENUM_REPR.fullmatch(name) if name else None
    return m["member"] if m else name


def kernels_text(report: Report, *, short: bool = False) -> str | None:
    """The kernels the engine chose, from its server log: a line, or with ``short`` a few words
    ('' when the log named none); None when the report did not record them."""
    choices = report.server.engine_choices if report.server is not None else None
    if choices is None:
        return None
    choices = choices.model_copy(
        update={"attention_backend": plain_name(choices.attention_backend)}
    )
    return choices.short() if short else choices.summary()


def model_name(recipe: dict[str, Any]) -> str:
    """A recipe's model in a few words: 'Qwen/Qwen3-8B@0123abc', 'synthetic Qwen3 (2L, ...)'."""
    model = recipe.get("model") or {}
    source = model.get("source")
    if source == "hub":
        rev = model.get("revision")
        pin = "unpinned" if rev is None else (rev[:7] if len(str(rev)) == 40 else str(rev))
        return f"{model.get('repo_id')}@{pin}"
    if source == "synthetic":
        shape = model.get("shape") or {}
        return (
            f"synthetic Qwen3 ({shape.get('num_hidden_layers')}L, "
            f"h{shape.get('hidden_size')}, seed {model.get('seed')})"
        )
    if source == "local":
        return f"local {str(model.get('path', '?')).rstrip('/').rsplit('/', 1)[-1]}"
    return "?"


def quant_name(recipe: dict[str, Any]) -> str:
    """A recipe's quantization in a few words: 'AutoRound INT4 g128 sym', 'unquantized'."""
    q = recipe.get("quantization") or {}
    if q.get("method") == "autoround":
        sym = "sym" if q.get("sym", True) else "asym"
        return f"AutoRound INT{q.get('bits')} g{q.get('group_size')} {sym}"
    if q.get("method") == "none":
        return "unquantized"
    return str(q.get("method", "?"))


def isa_text(isa: list[str]) -> str:
    """A CPU's vector flags as its tier, 'avx2', 'avx512-bf16 + amx'."""
    return isa_level(isa) + (" + amx" if "amx_bf16" in isa else "")


def _size(n: int) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def checkpoint_text(report: Report) -> str | None:
    """The served quantized checkpoint: its digest (short), how AutoRound made it and where,
    e.g. 'sha256 805275816a52 (1 file, 1.0 MB): AutoRound INT4 g128 sym, iters 20, seed 42,
    16 samples × 32 tokens; on cpu (AMD EPYC 7763, avx2, 2 threads); auto-round 0.16.1, ...';
    None for an unquantized run or a report without a quantization manifest."""
    q = report.quantization
    if q is None:
        return None
    p = q.inputs.get("parameters") or {}
    n, size = len(q.files), sum(f.size for f in q.files)
    text = f"sha256 {q.identity[:12]} ({n} file{'s' * (n != 1)}, {_size(size)})"
    method = "AutoRound" if q.method == "autoround" else q.method
    text += (
        f": {method} INT{p.get('bits')} g{p.get('group_size')} "
        f"{'sym' if p.get('sym', True) else 'asym'}, iters {q.iters}, seed {q.seed}, "
        f"{p.get('nsamples')} samples × {p.get('seqlen')} tokens"
    )
    where = []
    if q.built_on is not None:
        h = q.built_on
        if h.accelerator:
            where.append(h.accelerator)
        if h.cpu:
            where.append(h.cpu)
        if h.isa is not None:
            where.append(isa_text(h.isa))
        where.append(f"{h.threads} thread{'s' * (h.threads != 1)}")
    text += f"; on {q.device}" + (f" ({', '.join(where)})" if where else "")
    versions = ", ".join(f"{k.replace('_', '-')} {v}" for k, v in q.versions.items())
    return (
        text
        + (f"; {versions}" if versions else "")
        + ("; reused from the cache" if q.cached else "")
    )


def model_text(report: Report) -> str:
    """Model, quantization and KV cache dtype when not auto."""
    kv = (report.recipe.get("server") or {}).get("kv_cache_dtype", "auto")
    text = f"{model_name(report.recipe)}, {quant_name(report.recipe)}"
    return text + ("" if kv in (None, "auto") else f", KV {kv}")


def synthetic_target(report: Report) -> AcceptanceTarget | None:
    """The synthetic acceptance a run was given (the report's check, else its recipe's); None
    for a run at its draft's real acceptance."""
    if report.synthetic_acceptance is not None:
        return report.synthetic_acceptance.target
    return target_of(report.recipe)


def target_text(t: AcceptanceTarget) -> str:
    """A synthetic target in a few words: 'target AL 4.35 (geometric, from the reference)'."""
    if t.form == "rates":
        how = "per-position rates"
    elif t.form == "conditional":
        how = f"geometric, c {t.conditional:g}"
    else:
        how = f"{t.profile}" + (", from the reference" if t.form == "reference" else "")
    return f"target AL {t.acceptance_length:.2f} ({how})"


def synthetic_label(report: Report, *, short: bool = False) -> str | None:
    """The label every view gives a synthetic-acceptance run: 'SYNTHETIC acceptance, target AL
    4.35 (step)'; with ``short``, 'SYNTHETIC, target AL 4.35'. None for a real-acceptance run:
    its accepted tokens are the draft's own, a synthetic run's only its speed is meaningful."""
    t = synthetic_target(report)
    if t is None:
        return None
    if short:
        return f"SYNTHETIC, target AL {t.acceptance_length:.2f}"
    return f"SYNTHETIC acceptance, {target_text(t)}"


def spec_text(report: Report) -> str:
    spec = report.recipe.get("speculative") or {}
    method = spec.get("method", "none")
    if method == "none":
        return "none"
    text = f"{method} ×{spec.get('num_speculative_tokens')}"
    sd = report.bench.spec_decode if report.bench else None
    if sd is not None and sd.acceptance_rate is not None and sd.acceptance_length is not None:
        rate = figure_text(sd.acceptance_rate * 100, ".1f")
        text += f", AL {figure_text(sd.acceptance_length, '.2f')} ({rate}%)"
    elif report.bench is not None:
        text += ", acceptance not measured"
    synthetic = synthetic_label(report)
    return text + (f", {synthetic}" if synthetic else "")


def left_out_text(h: Headline) -> str:
    """'1 held left out', '1 held, 2 implausible left out': a headline's runs left out, held
    streams (kit.bench.held) and runs that are no plausible measurement (kit.bench.plausible)."""
    odd = sum(e.reason.startswith(NOT_MEASURED) for e in h.runs_excluded)
    held = len(h.runs_excluded) - odd
    parts = ([f"{held} held"] if held else []) + ([f"{odd} implausible"] if odd else [])
    return ", ".join(parts) + " left out"


def headline_text(report: Report, prompt: str) -> tuple[str, float | None]:
    """A prompt's decode figure as every view leads with it: the headline median with its
    interval and the runs left out, then the Club-3090 mean and CV beside it, e.g.
    '124.0 [121.5-126.2] (1 held left out; mean 3,277.1, CV 215.0%)'."""
    stats = (
        next((p.decode_tps for p in report.bench.prompts if p.prompt == prompt), None)
        if (report.bench)
        else None
    )
    h = prompt_headline(report, prompt)
    if h is None or h.value is None:
        return "-", None
    text = figure_text(h.value)
    if h.low is not None and h.high is not None:
        text += f" [{figure_text(h.low)}-{figure_text(h.high)}]"
    beside = [left_out_text(h)] if h.runs_excluded else []
    if stats is not None and stats.mean is not None:
        cv = f", CV {figure_text(stats.cv_pct, '.1f')}%" if stats.cv_pct is not None else ""
        beside.append(f"mean {figure_text(stats.mean)}{cv}")
    return text + (f" ({'; '.join(beside)})" if beside else ""), h.value
