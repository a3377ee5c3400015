"""Show stage: a report for people, as a terminal table or a row of a Club-3090-style table.

The rig is described the way benchmark tables do it: card count × GPU name, PCIe generation and
lanes per card, power caps per card, the interconnect; "CPU (n cores)" without a GPU. The kernels
the engine chose (read from its server log) follow the engine: a row of their own in the terminal
table, a few words after the engine in the Markdown row's engine cell.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kit.metrics import Stats
from kit.probe import HostProbe, Unavailable, cpu_summary
from kit.report import Report, summary_table
from kit.sign import SignatureCheck

MARKDOWN_COLUMNS = (
    "rig",
    "engine",
    "model / quant",
    "spec",
    "narrative decode TPS",
    "code decode TPS",
    "TTFT (narr / code)",
    "notes",
)


class Rig(BaseModel):
    """A host in a benchmark table's words; a part is None when unknown or not applicable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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


def _num(value: str | float | int | Unavailable, fmt: str = "g") -> str:
    if isinstance(value, Unavailable):
        return "?"
    return value if isinstance(value, str) else format(value, fmt)


def rig(host: HostProbe | None) -> Rig | None:
    """The host as a table describes it; None without a host probe."""
    if host is None:
        return None
    cores = host.cpu.usable_cores if _known(host.cpu.usable_cores) else host.cpu.logical_cores
    cpu_model = host.cpu.model if isinstance(host.cpu.model, str) else "unknown CPU"
    cpu = f"{cpu_model} ({_num(cores)} cores)"
    if host.cpu.isa is not None:  # reports before the ISA was probed have none
        cpu = f"{cpu_summary(host.cpu)} ({_num(cores)} cores)"
    gpus = host.gpus
    if not gpus:
        return Rig(
            gpus=f"CPU ({_num(cores)} cores)",
            gpu_count=0,
            pcie=None,
            power=None,
            interconnect=None,
            cpu=cpu,
        )
    names = Counter(g.name if isinstance(g.name, str) else "unknown GPU" for g in gpus)
    gens = [_num(g.pcie.gen_max) for g in gpus]
    gen = f"Gen{gens[0]}" if len(set(gens)) == 1 else "/".join(f"Gen{x}" for x in gens)
    widths = "/".join(f"x{_num(g.pcie.width_max)}" for g in gpus)
    caps = [
        g.power.enforced_limit_w if _known(g.power.enforced_limit_w) else g.power.limit_w
        for g in gpus
    ]
    return Rig(
        gpus=" + ".join(f"{n}× {name}" for name, n in names.items()),
        gpu_count=len(gpus),
        pcie=f"PCIe {gen} {widths}",
        power="/".join(_num(c, ".0f") for c in caps) + " W",
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


# ---------------------------------------------------------------------------------------------
# the parts of a report, in words


def engine_text(report: Report) -> str:
    engine = report.engine or {}
    server = report.recipe.get("server") or {}
    recipe_engine = server.get("engine") or {}
    name = engine.get("name") or recipe_engine.get("name") or "?"
    version = engine.get("version") or recipe_engine.get("version") or "?"
    text = f"{name} {version}"
    if report.patches is not None:
        count = len(report.patches.patches)
        text += f" + {report.patches.series} ({count} patch{'es' * (count != 1)})"
    elif server.get("patches"):
        text += f" + {server['patches']} (no manifest)"
    if report.server is not None and report.server.runtime == "external":
        text += " (external server)"
    return text


def kernels_text(report: Report, *, short: bool = False) -> str | None:
    """The kernels the engine chose, from its server log: a line, or with ``short`` a few words
    ('' when the log named none); None when the report did not record them."""
    choices = report.server.engine_choices if report.server is not None else None
    if choices is None:
        return None
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


def model_text(report: Report) -> str:
    """Model, quantization and KV cache dtype when not auto."""
    kv = (report.recipe.get("server") or {}).get("kv_cache_dtype", "auto")
    text = f"{model_name(report.recipe)}, {quant_name(report.recipe)}"
    return text + ("" if kv in (None, "auto") else f", KV {kv}")


def spec_text(report: Report) -> str:
    spec = report.recipe.get("speculative") or {}
    method = spec.get("method", "none")
    if method == "none":
        return "none"
    text = f"{method} ×{spec.get('num_speculative_tokens')}"
    sd = report.bench.spec_decode if report.bench else None
    if sd is not None and sd.acceptance_rate is not None and sd.acceptance_length is not None:
        text += f", AL {sd.acceptance_length:.2f} ({sd.acceptance_rate * 100:.1f}%)"
    elif report.bench is not None:
        text += ", acceptance not measured"
    return text


def _decode(report: Report, prompt: str) -> str:
    s = _prompt_stats(report, prompt)
    if s is None or s.mean is None:
        return "-"
    cv = f" (CV {s.cv_pct:.1f}%)" if s.cv_pct is not None else ""
    return f"{s.mean:.2f}{cv}"


def _prompt_stats(report: Report, prompt: str, field: str = "decode_tps") -> Stats | None:
    for p in report.bench.prompts if report.bench else []:
        if p.prompt == prompt:
            stats: Stats = getattr(p, field)
            return stats
    return None


def _ttft(report: Report) -> str:
    parts = []
    for prompt in ("narrative", "code"):
        s = _prompt_stats(report, prompt, "ttft_ms")
        parts.append("-" if s is None or s.mean is None else f"{s.mean:.0f}")
    return " / ".join(parts) + " ms"


def _notes(report: Report) -> str:
    notes = []
    if report.status != "complete":
        notes.append("INCOMPLETE")
    if not report.validity.valid:
        codes = dict.fromkeys(f.code for f in report.validity.reasons if f.severity == "error")
        notes.append(f"INVALID ({', '.join(codes)})")
    if not report.canonical:
        notes.append("not canonical")
    if report.energy_per_token_j is not None:
        notes.append(f"{report.energy_per_token_j:.3f} J/token")
    notes.append(f"kit {report.kit_version}, run {report.run_id}")
    return "; ".join(notes)


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_header() -> str:
    """The header and rule of the Markdown table ``markdown_row`` fills."""
    return (
        "| "
        + " | ".join(MARKDOWN_COLUMNS)
        + " |\n|"
        + "|".join("---" for _ in MARKDOWN_COLUMNS)
        + "|"
    )


def markdown_row(report: Report, *, header: bool = False) -> str:
    """One row in the style of Club-3090's BENCHMARKS.md; with ``header``, the header first."""
    r = rig(report.host)
    kernels = kernels_text(report, short=True)
    cells = [
        r.cell if r is not None else "unknown (no host probe)",
        engine_text(report) + (f"; {kernels}" if kernels else ""),
        model_text(report),
        spec_text(report),
        _decode(report, "narrative"),
        _decode(report, "code"),
        _ttft(report),
        _notes(report),
    ]
    row = "| " + " | ".join(_md(c) for c in cells) + " |"
    return f"{markdown_header()}\n{row}" if header else row


# ---------------------------------------------------------------------------------------------
# the terminal table


def signer_text(check: SignatureCheck | None) -> str:
    if check is None:
        return "not checked"
    if not check.signed:
        return "UNSIGNED: nothing shows who wrote it or that it is unaltered"
    if check.valid:
        return f"{check.keyid} (signature verified)"
    if check.valid is None:
        return f"{check.keyid} (claimed; not checked without --key)"
    return f"INVALID: {check.reason}"


def show_table(report: Report, check: SignatureCheck | None = None) -> str:
    """The report for a terminal: who, what, where, then the figures."""
    v = report.validity
    errors = sum(1 for f in v.reasons if f.severity == "error")
    warnings = len(v.reasons) - errors
    validity = "valid" if v.valid else f"INVALID ({errors} error{'s' * (errors != 1)})"
    if warnings:
        validity += f", {warnings} warning{'s' * (warnings != 1)}"
    overrides = f", --set {' '.join(report.recipe_overrides)}" if report.recipe_overrides else ""
    status = report.status + (f": {report.incomplete_reason}" if report.incomplete_reason else "")
    lines = [
        f"recipe    {report.recipe_name} ({report.recipe_file or 'no file'}{overrides}), "
        f"sha256 {report.recipe_sha256[:16]}",
        f"run       {report.run_id}, written {report.created_at} by kit {report.kit_version}",
        f"status    {status}{'' if report.canonical else ' (not canonical)'}",
        f"validity  {validity}",
        f"signer    {signer_text(check)}",
        f"engine    {engine_text(report)}",
    ]
    kernels = kernels_text(report)
    if kernels is not None:
        lines.append(f"kernels   {kernels}")
    lines.append(f"model     {model_text(report)}; spec {spec_text(report)}")
    lines += _host_lines(report)
    lines += ["", summary_table(report)]
    lines += _sampling_lines(report)
    return "\n".join(lines)


def _host_lines(report: Report) -> list[str]:
    host = report.host
    r = rig(host)
    if host is None or r is None:
        return ["host      unknown (no host probe in the report)"]
    out = [f"rig       {r.cell}", f"cpu       {r.cpu}"]
    if not host.gpus and host.nvml_error:
        out.append(f"gpus      none: {host.nvml_error}")
    for g in host.gpus:
        p = g.power
        links = [link for link in g.nvlinks if link.active] if isinstance(g.nvlinks, list) else []
        nvlink = f", NVLink {len(links)} active" if links else ""
        out.append(
            f"gpu {g.index}     {_num(g.name)}, "
            f"{_num(g.memory_total_mib)} MiB, power {_num(p.enforced_limit_w, '.0f')} W "
            f"(default {_num(p.default_limit_w, '.0f')}, max {_num(p.max_limit_w, '.0f')}), "
            f"PCIe Gen{_num(g.pcie.gen_max)} x{_num(g.pcie.width_max)} "
            f"(GPU max Gen{_num(g.pcie.gen_gpu_max)}){nvlink}"
        )
    if isinstance(host.driver.driver_version, str):
        out.append(
            f"driver    {host.driver.driver_version}, CUDA {_num(host.driver.cuda_driver_version)}"
        )
    return out


def _sampling_lines(report: Report) -> list[str]:
    s = report.gpu_sampling
    if s is None:
        return []
    if s.unavailable is not None or not s.summaries:
        return [f"  GPUs not sampled: {s.unavailable or 'no readings in the measured window'}"]
    out = ["  VRAM (MiB)  idle     peak     post  growth   PCIe under load   max W  max °C"]
    for g in s.summaries:
        m = g.vram
        out.append(
            f"  GPU {g.gpu:<6} {_num(m.idle_mib):>6} {_num(m.peak_mib):>8} {_num(m.post_mib):>8} "
            f"{_num(m.growth_mib):>7}   Gen{_num(g.pcie_gen_min_under_load)} "
            f"x{_num(g.pcie_width_min_under_load):<10} {_num(g.power_max_w, '.0f'):>7} "
            f"{_num(g.temperature_max_c):>7}"
        )
    if not isinstance(s.energy_j, Unavailable):
        out.append(f"  GPU energy over the measured window: {s.energy_j:.0f} J")
    return out
