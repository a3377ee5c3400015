"""The sections about the run rather than its figures: the verdict with the signature check,
the rig card, and the provenance (recipe, pins, models, versions, patches, notes)."""

from __future__ import annotations

from html import escape

from kit.report.describe import engine_text, kernels_text, model_text, num, rig, spec_text
from kit.report.html.layout import cell, html_table, pairs, section, verification
from kit.report.schema import Report
from kit.report.show import signer_text, trust_label
from kit.signing import SignatureCheck


def verdict_section(report: Report, check: SignatureCheck) -> str:
    v = report.validity
    errors = [f for f in v.reasons if f.severity == "error"]
    warnings = [f for f in v.reasons if f.severity != "error"]
    head = "VALID" if v.valid else f"INVALID ({len(errors)} error{'s' * (len(errors) != 1)})"
    if warnings:
        head += f", {len(warnings)} warning{'s' * (len(warnings) != 1)}"
    words, cls = verification(check)
    items = "".join(
        f'<li class="{escape(f.severity)}"><b>{escape(f.severity.upper())}</b> '
        f"<code>{escape(f.code)}</code>: {escape(f.message)}</li>"
        for f in [*errors, *warnings]
    )
    status = report.status + (f": {report.incomplete_reason}" if report.incomplete_reason else "")
    body = (
        f'<div class="banner {"ok" if v.valid else "bad"}" id="verdict-text">Verdict: {head}</div>'
        f'<div class="banner {cls}" id="verification">Verification at render time: '
        f"{escape(words)}</div>"
        + (f'<ul class="reasons">{items}</ul>' if items else "<p>No reasons recorded.</p>")
        + pairs(
            [
                ("status", status + ("" if report.canonical else " (not canonical)")),
                ("engine", engine_text(report)),
                ("model", model_text(report)),
                ("speculative decoding", spec_text(report)),
                ("kernels", kernels_text(report)),
            ]
        )
    )
    return section("verdict", "Verdict", body, trust_label(check))


def rig_section(report: Report) -> str | None:
    host = report.host
    r = rig(host)
    if host is None or r is None:
        return None
    rows = []
    for g in host.gpus:
        p = g.power
        links = [x for x in g.nvlinks if x.active] if isinstance(g.nvlinks, list) else []
        rows.append(
            (
                g.index,
                g.name,
                f"{num(g.memory_total_mib)} MiB",
                f"{num(p.enforced_limit_w, '.0f')} W (default {num(p.default_limit_w, '.0f')}, "
                f"max {num(p.max_limit_w, '.0f')})",
                f"Gen{num(g.pcie.gen_max)} x{num(g.pcie.width_max)} "
                f"(GPU max Gen{num(g.pcie.gen_gpu_max)})",
                f"{len(links)} active" if isinstance(g.nvlinks, list) else "not supported",
            )
        )
    gpus = (
        html_table(("GPU", "model", "memory", "power limit", "PCIe", "NVLink"), rows)
        if rows
        else f"<p>No GPU: {cell(host.nvml_error or 'none found')}</p>"
    )
    p2p = ""
    if host.p2p:
        p2p = "<h3>P2P</h3>" + html_table(
            ("from", "to", "read", "write", "NVLink", "atomics"),
            ((x.gpu_a, x.gpu_b, x.read, x.write, x.nvlink, x.atomics) for x in host.p2p),
        )
    if host.topology:
        p2p += "<h3>PCIe topology</h3>" + html_table(
            ("GPU", "GPU", "common ancestor"),
            ((t.gpu_a, t.gpu_b, t.common_ancestor) for t in host.topology),
        )
    isa = ", ".join(host.cpu.isa) if host.cpu.isa else None
    facts = pairs(
        [
            ("rig", r.cell),
            ("interconnect", r.interconnect or ("single GPU" if r.gpu_count == 1 else None)),
            (
                "driver",
                f"{cell(host.driver.driver_version)}, CUDA {cell(host.driver.cuda_driver_version)}",
            ),
            ("CPU", r.cpu),
            ("ISA", isa),
            ("RAM", f"{num(host.cpu.ram_total_mib)} MiB"),
            ("host", f"{cell(host.hostname)}" + (" (redacted)" if host.redacted else "")),
            ("OS", f"{cell(host.os.name)}, kernel {host.os.kernel}, {host.os.arch}"),
            ("container", host.container.runtime if host.container.detected else "none detected"),
            ("facts from", host.facts_from),
        ]
    )
    return section("rig", "Rig", gpus + facts + p2p)


def provenance_section(report: Report, check: SignatureCheck) -> str:
    words, _ = verification(check)
    rows: list[tuple[str, object]] = [
        ("recipe", f"{report.recipe_name} ({report.recipe_file or 'no file'})"),
        ("recipe sha256", report.recipe_sha256),
        ("--set overrides", " ".join(report.recipe_overrides) or None),
        ("run id", report.run_id),
        ("written", f"{report.created_at} by kit {report.kit_version}"),
        ("signature key fingerprint", check.keyid or "none (unsigned)"),
        ("verification", words),
        ("signer", signer_text(check)),
    ]
    for m in (report.model, report.draft):
        if m is not None:
            rev = m.resolved_revision or m.revision
            name = f"{m.repo_id}@{rev or 'unpinned'}" if m.repo_id else m.source
            arch = f" ({m.architecture})" if m.architecture else ""
            rows.append((f"{m.role} model", f"{name}{arch}; content identity {m.identity}"))
    rows += [(f"pin {p.field}", f"{p.value} ({p.source})") for p in report.pins]
    rows += [(f"version {k}", v) for k, v in sorted(report.versions.items())]
    if report.engine is not None:
        rows.append(
            ("engine", f"{report.engine.name} {report.engine.version} ({report.engine.kind})")
        )
        if report.engine.image:
            rows.append(("engine image", f"{report.engine.image} {report.engine.image_id or ''}"))
    body = pairs(rows)
    if report.patches is not None:
        body += f"<h3>Patches: {escape(report.patches.series)}</h3>" + html_table(
            ("file", "title", "state", "sha256"),
            ((p.file, p.title, p.state, p.sha256) for p in report.patches.patches),
        )
    if report.notes:
        body += "<h3>Notes</h3><ul>" + "".join(f"<li>{escape(n)}</li>" for n in report.notes)
        body += "</ul>"
    return section("provenance", "Provenance", body)
