"""``kit report show``: the report for a terminal, who, what and where, then the figures (the
summary after a run) and the GPUs as sampled. The kernels the engine chose (read from its
server log) have a row of their own."""

from __future__ import annotations

from kit.probe import Unavailable
from kit.report.describe import (
    checkpoint_text,
    engine_text,
    kernels_text,
    model_text,
    num,
    rig,
    spec_text,
)
from kit.report.schema import Report
from kit.report.show.summary import number, summary_table
from kit.report.show.trust import signer_text, trust_label
from kit.signing import SignatureCheck


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
    checkpoint = checkpoint_text(report)
    if checkpoint is not None:
        lines.append(f"checkpoint {checkpoint}")
    lines += _host_lines(report)
    lines += ["", summary_table(report)]
    lines += _sampling_lines(report)
    text = "\n".join(lines)
    label = trust_label(check)
    if label is not None:
        text = "\n".join(f"{label}  {line}" if line else line for line in text.splitlines())
    return text


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
            f"gpu {g.index}     {num(g.name)}, "
            f"{num(g.memory_total_mib)} MiB, power {num(p.enforced_limit_w, '.0f')} W "
            f"(default {num(p.default_limit_w, '.0f')}, max {num(p.max_limit_w, '.0f')}), "
            f"PCIe Gen{num(g.pcie.gen_max)} x{num(g.pcie.width_max)} "
            f"(GPU max Gen{num(g.pcie.gen_gpu_max)}){nvlink}"
        )
    if isinstance(host.driver.driver_version, str):
        out.append(
            f"driver    {host.driver.driver_version}, CUDA {num(host.driver.cuda_driver_version)}"
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
            f"  GPU {g.gpu:<6} {num(m.idle_mib):>6} {num(m.peak_mib):>8} {num(m.post_mib):>8} "
            f"{num(m.growth_mib):>7}   Gen{num(g.pcie_gen_min_under_load)} "
            f"x{num(g.pcie_width_min_under_load):<10} {num(g.power_max_w, '.0f'):>7} "
            f"{num(g.temperature_max_c):>7}"
        )
    if not isinstance(s.energy_j, Unavailable):
        out.append(f"  GPU energy over the measured window: {number(s.energy_j, 0)} J")
    return out
