"""A report's row: every cell as text, from :mod:`kit.report.describe` where it has them (rig,
engine, model), else read from the report itself."""

from __future__ import annotations

from typing import Any

from kit.probe import Unavailable
from kit.report.describe import engine_text, headline_text, model_text, rig, synthetic_label
from kit.report.schema import Report
from kit.report.table.model import PEAK, Row


def _known(value: object) -> bool:
    return value is not None and not isinstance(value, Unavailable)


def _server(report: Report) -> dict[str, Any]:
    server = report.recipe.get("server")
    return server if isinstance(server, dict) else {}


def _interconnect(report: Report, gpu_count: int, described: str | None) -> str:
    if gpu_count < 2:
        return f"none ({gpu_count} GPU{'s' * (gpu_count != 1)})"
    link = "none"
    if described == "NVLink":
        link = "NVLink"
    elif described is not None and "P2P OK" in described:
        link = "P2P engaged"
    tp = _server(report).get("tensor_parallel_size", 1)
    return (
        f"{link} (unused: TP {tp})" if isinstance(tp, int) and tp < 2 and link != "none" else link
    )


def _all_reduce(report: Report) -> str:
    server = _server(report)
    flags = [str(a) for a in server.get("extra_args") or []]
    flags += report.server.argv if report.server is not None else []
    if "--disable-custom-all-reduce" in flags:
        return "off (--disable-custom-all-reduce)"
    tp = server.get("tensor_parallel_size", 1)
    if isinstance(tp, int) and tp < 2:
        return f"n/a (TP {tp})"
    return "on (engine default)"


def _decode(report: Report, prompt: str) -> tuple[str, float | None]:
    return headline_text(report, prompt)


def _sweep_peak(report: Report) -> tuple[dict[str, str], float | None]:
    """A load sweep's peak cells (PEAK: output tok/s over all streams, the level, the tok/s
    each stream saw there) and the peak; dashes and None without a load point."""
    points = (
        [p for p in report.bench.load_points if p.output_tps is not None] if report.bench else []
    )
    if not points:
        return dict.fromkeys(PEAK, "-"), None
    best = max(points, key=lambda p: p.output_tps or 0.0)
    tps = best.output_tps or 0.0
    tpot = best.tpot_ms.p50
    cells = {
        "peak output tok/s": f"{tps:,.1f}",
        "reached at": best.label.replace("-", " ", 1),
        "tok/s per stream there": f"{1000 / tpot:,.1f}" if tpot else "-",
    }
    return cells, tps


def _depth(depth: int) -> str:
    return f"{depth // 1000}k" if depth >= 1000 and depth % 1000 == 0 else str(depth)


def _prefill(report: Report) -> str:
    parts = [
        f"{p.prefill_tps.mean:,.0f} @{_depth(p.depth)}"
        for p in (report.bench.prefill if report.bench else [])
        if p.status == "measured" and p.prefill_tps is not None and p.prefill_tps.mean is not None
    ]
    return " / ".join(parts) or "-"


def _peaks(report: Report) -> list[int]:
    s = report.gpu_sampling
    if s is None:
        return []
    return [g.vram.peak_mib for g in s.summaries if isinstance(g.vram.peak_mib, int)]


def _acceptance(report: Report) -> str:
    spec = report.recipe.get("speculative") or {}
    sd = report.bench.spec_decode if report.bench else None
    synthetic = synthetic_label(report, short=True)
    tag = f", {synthetic}" if synthetic else ""  # the figure is vLLM's, not the draft's
    if sd is not None and sd.acceptance_length is not None:
        rate = f" ({sd.acceptance_rate * 100:.1f}%)" if sd.acceptance_rate is not None else ""
        return f"{sd.acceptance_length:.2f}{rate}{tag}"
    if isinstance(spec, dict) and spec.get("method", "none") != "none":
        return f"not measured{tag}"
    return "-"


def _verdict(report: Report) -> str:
    v = report.validity
    if v.valid:
        return "valid"
    codes = dict.fromkeys(f.code for f in v.reasons if f.severity == "error")
    return f"INVALID ({', '.join(codes)})"


def row(report: Report, source: str, key: str) -> Row:
    """The report's row; ``key`` is the signing key as the table names it."""
    r = rig(report.host)
    gpus = (
        sorted(g.name if isinstance(g.name, str) else "unknown GPU" for g in report.host.gpus)
        if report.host
        else []
    )
    rig_cell = ", ".join(p for p in (r.gpus, r.pcie) if p) if r else "unknown (no host probe)"
    server = _server(report)
    narrative, narrative_tps = _decode(report, "narrative")
    code, code_tps = _decode(report, "code")
    peak, sweep_tps = _sweep_peak(report)
    sweep = narrative_tps is None and code_tps is None and sweep_tps is not None
    peaks = _peaks(report)
    ctx = server.get("max_model_len")
    cells = {
        "verdict": _verdict(report),
        "kind": "load sweep" if sweep else "single-stream",
        "rig": rig_cell,
        "power cap": (r.power or "-") if r else "-",
        "interconnect": _interconnect(report, r.gpu_count, r.interconnect) if r else "-",
        "custom all-reduce": _all_reduce(report),
        "KV dtype": str(server.get("kv_cache_dtype", "auto")),
        "max context": f"{ctx:,}" if isinstance(ctx, int) else "-",
        "narrative decode TPS": narrative,
        "code decode TPS": code,
        "prefill tok/s": _prefill(report),
        **peak,
        "peak VRAM": "/".join(f"{p:,}" for p in peaks) + " MiB" if peaks else "-",
        "acceptance": _acceptance(report),
        "date": report.created_at[:10],
        "key": key,
    }
    return Row(
        source=source,
        run_id=report.run_id,
        model=model_text(report),
        engine=engine_text(report),
        rig=rig_cell,
        gpus=gpus,
        kind="load sweep" if sweep else "single-stream",
        valid=report.validity.valid,
        cells=cells,
        decode_tps=narrative_tps if narrative_tps is not None else code_tps,
        sweep_peak_tps=sweep_tps,
        peak_vram_mib=max(peaks) if peaks else None,
    )
