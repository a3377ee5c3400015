"""Comparability: each aspect in which two reports differ, named before any figure.

Model, quantization, protocol, acceptance and quality differences refuse a comparison unless
forced (``REFUSING``); the others (checkpoint, hardware, engine, kernels, serving, patches) warn.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from kit.base import FrozenModel
from kit.errors import VerificationFailed
from kit.quality import quality_diff
from kit.quantize import QuantHost, QuantManifest
from kit.recipe.acceptance import target_of
from kit.report.describe import engine_text, isa_text, model_name, quant_name, rig, target_text
from kit.report.schema import Report
from kit.report.verdict import CheckpointMatch

Aspect = Literal[
    "model",
    "quantization",
    "checkpoint",
    "protocol",
    "acceptance",
    "quality",
    "hardware",
    "engine",
    "kernels",
    "serving",
    "patches",
]

REFUSING: tuple[Aspect, ...] = ("model", "quantization", "protocol", "acceptance", "quality")

# the quality probe, the context ladder and the soak run after the bench: their settings move
# no speed figure (the quality aspect judges the probe; the ladder's and the soak's figures are
# their own, and one that only a side has is not in the other)
_PROTOCOL_IGNORED = frozenset(
    {"request_timeout_s", "stall_timeout_s", "quality", "context", "soak"}
)
# where AutoRound tuned (cards, memory trade-offs), not what it made
_QUANT_IGNORED = frozenset({"placement"})

SERVING_IGNORED = frozenset({"engine", "patches", "health_timeout_s", "served_model_name"})
_SPEC_IGNORED = frozenset({"synthetic_acceptance"})  # the acceptance aspect says it

MAX_LISTED = 8  # differing paths named per aspect


class Difference(FrozenModel):
    """One way the two sides differ."""

    aspect: Aspect = Field(description="What differs.")
    refuses: bool = Field(description="The aspect refuses a comparison unless forced.")
    detail: str = Field(description="What differs, A first.")


def _flat(value: Any, path: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _flat(v, f"{path}[{i}]", out)
        if not value:
            out[path] = []
    else:
        out[path] = value
    return out


def section_diff(a: Any, b: Any, prefix: str, ignore: frozenset[str] = frozenset()) -> list[str]:
    """Dotted paths where two recipe sections differ, with both values."""
    fa, fb = _flat(a, prefix, {}), _flat(b, prefix, {})
    out = []
    for key in dict.fromkeys([*fa, *fb]):
        top = key[len(prefix) + 1 :].split(".", 1)[0].split("[", 1)[0] if prefix else key
        if top in ignore:
            continue
        va, vb = fa.get(key, "(absent)"), fb.get(key, "(absent)")
        if (va is None and vb == "(absent)") or (va == "(absent)" and vb is None):
            continue  # an optional field one kit version writes and another did not know
        if va != vb or isinstance(va, bool) is not isinstance(vb, bool):
            out.append(f"{key} {_short(va)} vs {_short(vb)}")
    if len(out) > MAX_LISTED:
        out[MAX_LISTED:] = [f"{len(out) - MAX_LISTED} more"]
    return out


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _section(report: Report, name: str) -> Any:
    return report.recipe.get(name)


def _model_key(report: Report) -> tuple[str, str]:
    """(identity to compare, description)."""
    name = model_name(report.recipe)
    if report.model is not None:
        return report.model.identity, f"{name} [{report.model.identity[:12]}]"
    return "recipe:" + repr(_section(report, "model")), f"{name} [no manifest]"


def _quant_key(report: Report) -> tuple[str, str]:
    name = quant_name(report.recipe)
    if report.quantization is not None:
        return report.quantization.key, f"{name} [{report.quantization.key[:12]}]"
    return "recipe:" + repr(_section(report, "quantization")), f"{name} [no manifest]"


def _host_why(a: QuantHost | None, b: QuantHost | None, ra: Report, rb: Report) -> list[str]:
    """How the hosts AutoRound ran on differ; without a record of it, the serving hosts' CPUs."""
    if a is None or b is None:
        ia = ra.host.cpu.isa if ra.host else None
        ib = rb.host.cpu.isa if rb.host else None
        if ia is not None and ib is not None and ia != ib:
            return [
                f"the hosts' CPU ISA {isa_text(ia)} vs {isa_text(ib)} (where AutoRound ran "
                "is not recorded)"
            ]
        return []
    out = []
    if a.cpu != b.cpu:
        out.append(f"CPU {a.cpu or '?'} vs {b.cpu or '?'}")
    if a.isa is not None and b.isa is not None and a.isa != b.isa:
        if isa_text(a.isa) != isa_text(b.isa):
            out.append(f"CPU ISA {isa_text(a.isa)} vs {isa_text(b.isa)}")
        else:
            only = [
                f"{', '.join(flags)} only in {side}"
                for side, flags in (
                    ("A", [f for f in a.isa if f not in b.isa]),
                    ("B", [f for f in b.isa if f not in a.isa]),
                )
                if flags
            ]
            out.append(f"CPU flags {'; '.join(only)}")
    if a.threads != b.threads:
        out.append(f"torch threads {a.threads} vs {b.threads}")
    if a.accelerator != b.accelerator:
        out.append(f"GPU {a.accelerator or 'none'} vs {b.accelerator or 'none'}")
    return out


def _checkpoint_why(a: Report, b: Report, qa: QuantManifest, qb: QuantManifest) -> list[str]:
    """What kit records that differs between two quantizations and may explain their output:
    the inputs (seed, iters, ...: the cache key), the device, library versions, the host."""
    ia, ib = qa.inputs, qb.inputs
    pa, pb = ia.get("parameters") or {}, ib.get("parameters") or {}
    out = section_diff(pa, pb, "")
    for key, label in (("model_identity", "model"), ("calibration", "calibration data")):
        if ia.get(key) != ib.get(key):
            out.append(f"{label} {_short(ia.get(key), 19)} vs {_short(ib.get(key), 19)}")
    if qa.device != qb.device and pa.get("device") == pb.get("device"):  # "auto" resolved
        out.append(f"device {qa.device} vs {qb.device}")
    for lib in dict.fromkeys([*qa.versions, *qb.versions]):
        va, vb = qa.versions.get(lib, "?"), qb.versions.get(lib, "?")
        if va != vb:
            out.append(f"{lib.replace('_', '-')} {va} vs {vb}")
    return out + _host_why(qa.built_on, qb.built_on, a, b)


def checkpoint_match(a: Report, b: Report) -> CheckpointMatch | None:
    """Whether B served A's quantized checkpoint; None when a side has no quantization manifest
    (unquantized, or no build recorded).

    The checkpoint is what AutoRound made (its content digest, kit.quantize): the same inputs
    may give other bytes on another host, device or library version, and a checkpoint of the
    same shape and format costs the same to serve, so it is named, with the files that differ
    and what may explain it, not refused (docs/checkpoint.md)."""
    qa, qb = a.quantization, b.quantization
    if qa is None or qb is None:
        return None
    if qa.identity == qb.identity:
        return CheckpointMatch(same=True, original=qa.identity, new=qb.identity)
    fa, fb = {f.path: f for f in qa.files}, {f.path: f for f in qb.files}
    files = []
    for path in dict.fromkeys([*fa, *fb]):
        x, y = fa.get(path), fb.get(path)
        if x is None or y is None:
            files.append(f"{path} (only in {'B' if x is None else 'A'})")
        elif x.sha256 != y.sha256:
            files.append(f"{path} ({x.sha256[:12]} vs {y.sha256[:12]})")
    if len(files) > MAX_LISTED:
        files[MAX_LISTED:] = [f"{len(files) - MAX_LISTED} more"]
    return CheckpointMatch(
        same=False,
        original=qa.identity,
        new=qb.identity,
        files=files,
        why=_checkpoint_why(a, b, qa, qb),
    )


def acceptance_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """How two recipes' acceptance differs: a synthetic one (speculative.synthetic_acceptance:
    vLLM accepting at stated rates, docs/synthetic-acceptance.md) against the draft's real one,
    or two synthetic targets whose resolved rates differ (the same rates, however stated, are
    the same target). A synthetic run compares only with a synthetic run of the same target."""
    ta, tb = target_of(a), target_of(b)
    if ta is None and tb is None:
        return []
    if ta is None or tb is None:
        side = [f"synthetic, {target_text(t)}" if t else "the draft's real" for t in (ta, tb)]
        return [f"{side[0]} vs {side[1]}: only like acceptance compares"]
    if len(ta.rates) == len(tb.rates) and all(
        math.isclose(x, y, abs_tol=1e-9) for x, y in zip(ta.rates, tb.rates, strict=True)
    ):
        return []
    rates = ["/".join(f"{r:.3g}" for r in t.rates) for t in (ta, tb)]
    return [f"synthetic {target_text(ta)} vs {target_text(tb)}, rates {rates[0]} vs {rates[1]}"]


def recipe_diff(aspect: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """How two recipes differ in one aspect: in words when the kind differs, else by path.
    Quality is the runs' figures, which recipes do not hold: two recipes never differ there."""
    if aspect == "acceptance":
        return acceptance_diff(a, b)
    if aspect == "quality":
        return []
    if aspect == "model" and (a.get("model") or {}).get("source") != (b.get("model") or {}).get(
        "source"
    ):
        return [f"{model_name(a)} vs {model_name(b)}"]
    if aspect == "quantization":
        qa, qb = a.get("quantization") or {}, b.get("quantization") or {}
        if qa.get("method") != qb.get("method"):
            return [f"{quant_name(a)} vs {quant_name(b)}"]
    section = {"model": "model", "quantization": "quantization", "protocol": "bench"}[aspect]
    ignore = {"protocol": _PROTOCOL_IGNORED, "quantization": _QUANT_IGNORED}.get(
        aspect, frozenset()
    )
    return section_diff(a.get(section), b.get(section), section, ignore)


def engine_key(report: Report) -> str:
    return engine_text(report).split(" + ", 1)[0]


def _patch_key(report: Report) -> tuple[Any, str]:
    p = report.patches
    if p is None:
        return None, "none"
    key = (
        p.series,
        [(x.file, x.sha256) for x in p.patches],
        [(x.path, x.sha256) for x in p.files],
    )
    n = len(p.patches)
    return key, f"{p.series} ({n} patch{'es' * (n != 1)})"


def _hardware_diffs(a: Report, b: Report) -> list[str]:
    ra, rb = rig(a.host), rig(b.host)
    if ra is None or rb is None:
        missing = " and ".join(x for x, r in (("A", ra), ("B", rb)) if r is None)
        return [f"unknown for {missing} (no host probe)"]
    out = []
    for label, x, y in (
        ("GPUs", ra.gpus, rb.gpus),
        ("PCIe", ra.pcie, rb.pcie),
        ("power caps", ra.power, rb.power),
        ("interconnect", ra.interconnect, rb.interconnect),
    ):
        if x != y:
            out.append(f"{label} {x or 'none'} vs {y or 'none'}")
    if ra.gpu_count == 0 and rb.gpu_count == 0 and ra.cpu != rb.cpu:
        out.append(f"CPU {ra.cpu} vs {rb.cpu}")
    return out


def _kernel_diffs(a: Report, b: Report) -> list[str]:
    """How the kernels the engines chose, read from the server log (linear kernels, the CPU
    W4A16 path and kernel build, the attention backend), differ. A side that did not record
    them (a report written before kit read them) or did not log one of them differs in nothing
    there."""
    ca = a.server.engine_choices if a.server else None
    cb = b.server.engine_choices if b.server else None
    if ca is None or cb is None:
        return []
    out = []
    for label, x, y in (
        ("linear kernels", ", ".join(ca.linear_kernels), ", ".join(cb.linear_kernels)),
        ("INT4 path", ca.int4_path_label, cb.int4_path_label),
        ("CPU kernel build", ca.cpu_kernel_build, cb.cpu_kernel_build),
        ("attention backend", ca.attention_backend, cb.attention_backend),
    ):
        if x and y and x != y:
            out.append(f"{label} {x} vs {y}")
    return out


def comparability(a: Report, b: Report) -> list[Difference]:
    """Every aspect in which two reports differ, each with what differs."""
    out: list[Difference] = []

    def add(aspect: Aspect, details: list[str]) -> None:
        if details:
            out.append(
                Difference(aspect=aspect, refuses=aspect in REFUSING, detail="; ".join(details))
            )

    (ka, da), (kb, db) = _model_key(a), _model_key(b)
    add("model", [f"{da} vs {db}"] if ka != kb else [])
    (ka, da), (kb, db) = _quant_key(a), _quant_key(b)
    if ka != kb:
        details = recipe_diff("quantization", a.recipe, b.recipe)
        if a.quantization is not None and b.quantization is not None:
            details += section_diff(
                {k: v for k, v in a.quantization.inputs.items() if k != "model_identity"},
                {k: v for k, v in b.quantization.inputs.items() if k != "model_identity"},
                "inputs",
            )
        add("quantization", details or [f"{da} vs {db}"])
    checkpoint = checkpoint_match(a, b)
    add("checkpoint", [checkpoint.detail()] if checkpoint and not checkpoint.same else [])
    protocol = recipe_diff("protocol", a.recipe, b.recipe)
    if a.canonical != b.canonical:
        protocol.insert(0, f"canonical {a.canonical} vs {b.canonical}")
    add("protocol", protocol)
    add("acceptance", acceptance_diff(a.recipe, b.recipe))
    # the quality probe's figures (kit.quality): two runs that scored the same tokens and whose
    # served perplexity or top-1 agreement differ beyond the recipe's band answer differently,
    # whatever their recipes say (docs/quality.md); a side without a probe, or one of other
    # tokens, differs in nothing there
    add("quality", quality_diff(a.quality, b.quality))
    add("hardware", _hardware_diffs(a, b))
    ea, eb = engine_key(a), engine_key(b)
    add("engine", [f"{ea} vs {eb}"] if ea != eb else [])
    add("kernels", _kernel_diffs(a, b))
    serving = section_diff(_section(a, "server"), _section(b, "server"), "server", SERVING_IGNORED)
    serving += section_diff(
        _section(a, "speculative"), _section(b, "speculative"), "speculative", _SPEC_IGNORED
    )
    draft_a = a.draft.identity if a.draft else None
    draft_b = b.draft.identity if b.draft else None
    if draft_a != draft_b and not any(s.startswith("speculative.draft") for s in serving):
        serving.append(f"draft model {(draft_a or 'none')[:12]} vs {(draft_b or 'none')[:12]}")
    add("serving", serving)
    (pa, ta), (pb, tb) = _patch_key(a), _patch_key(b)
    add("patches", [f"{ta} vs {tb}" + (" (other sha256s)" if ta == tb else "")] if pa != pb else [])
    return out


def refuse_or_keep(diffs: list[Difference], force: bool, what: str) -> None:
    refusing = [d for d in diffs if d.refuses]
    if refusing and not force:
        aspects = ", ".join(d.aspect for d in refusing)
        verb = "differs" if len(refusing) == 1 else "differ"
        raise VerificationFailed(
            f"{what} are not comparable: {aspects} {verb}"
            + "".join(f"\n{d.aspect}: {d.detail}" for d in refusing),
            hint="pass --force to compare anyway (the deltas then mix these differences)",
        )
