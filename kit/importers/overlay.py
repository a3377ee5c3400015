"""What an import sets over its base recipe (:func:`overlay`): the file's model, load or
per-prompt protocol, dataset shape, speculative decoding and rig where it states them, and its
figures as the ``reference``, with a line for every value carried or defaulted."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from kit.importers.parse import hub_id
from kit.importers.schema import Imported, ImportedLoad, ImportedPoint, Prompts, SpecDecode
from kit.recipe import Recipe, SyntheticDraft
from kit.recipe.figures import LatencyFigures, ReferencePoint
from kit.recipe.patterns import ForeignPoint, load_class
from kit.recipe.serving import REFERENCE_PROMPTS


def _combine(points: Sequence[ImportedPoint]) -> ReferencePoint:
    """One point's figures over its runs: each figure the mean of the runs that have it (a
    count only when every run agrees)."""
    if len(points) == 1:
        return points[0].figures
    figs = [p.figures for p in points]
    out: dict[str, Any] = {"runs": len(figs)}
    for name, field in ReferencePoint.model_fields.items():
        if name == "runs":
            continue
        values = [getattr(f, name) for f in figs if getattr(f, name) is not None]
        if not values:
            continue
        if field.annotation == (int | None):
            if len(set(values)) == 1 and len(values) == len(figs):
                out[name] = values[0]
        elif isinstance(values[0], LatencyFigures):
            stat = {}
            for key in LatencyFigures.model_fields:
                vs = [getattr(v, key) for v in values if getattr(v, key) is not None]
                if vs:
                    stat[key] = statistics.fmean(vs)
            out[name] = LatencyFigures(**stat)
        else:
            out[name] = statistics.fmean(values)
    return ReferencePoint(**out)


def _grouped(points: Sequence[ImportedPoint]) -> dict[str, list[ImportedPoint]]:
    out: dict[str, list[ImportedPoint]] = {}
    for p in points:
        out.setdefault(p.label, []).append(p)
    return out


def _load(imp: Imported, carried: list[str]) -> dict[str, Any] | None:
    loaded = [p.load for p in imp.points if p.load is not None]
    if not loaded:
        return None
    by_pattern: dict[str, list[ImportedLoad]] = {}
    for one in loaded:
        by_pattern.setdefault(one.pattern, []).append(one)
    pattern, mine = max(by_pattern.items(), key=lambda kv: len(kv[1]))  # the most points
    if len(mine) < len(loaded):
        carried.append(f"bench.load: the {pattern} points only; the others stay reference figures")
    cls = load_class(pattern)
    assert cls is not None  # an imported point's pattern is one of kit's
    counted = {id(p.load): p.figures.requests or p.figures.completed for p in imp.points}
    for p in imp.points:
        if p.load is not None and p.load.duration_s and not p.load.requests:
            carried.append(
                f"bench.load.requests at {p.label}: {counted[id(p.load)]}, the requests that "
                f"completed in the file's {p.load.duration_s:g} s (it bounded the point by time, "
                "kit bounds it by a count)"
            )
    points = [
        ForeignPoint(
            level=one.level,
            requests=one.requests or counted.get(id(one)),
            warmup_requests=one.warmup_requests,
            arrival=one.arrival,
            max_concurrency=one.max_concurrency,
        )
        for one in mine
    ]
    load = cls.from_foreign(points, carried)
    shown = ", ".join(f"{v:g}" for v in dict.fromkeys(p.level for p in points))
    carried.append(
        f"bench.load: {pattern} [{shown}], {load['requests']} requests a point"
        + (f" ({load['requests_per_stream']} per stream)" if "requests_per_stream" in load else "")
        + (f" ({mine[0].note})" if mine[0].note else "")
    )
    return load


def _dataset(imp: Imported, carried: list[str]) -> dict[str, Any] | None:
    w = imp.workload
    if not (w.input_tokens and w.output_tokens):
        carried.append("bench.dataset: not set, the file states no lengths (the prompts are sent)")
        return None
    data: dict[str, Any] = {
        "kind": "random",
        "input_tokens": w.input_tokens,
        "output_tokens": w.output_tokens,
    }
    if w.range_ratio:
        data["range_ratio"] = w.range_ratio
    if w.ignore_eos is not None:
        data["ignore_eos"] = w.ignore_eos
    how = f" ({w.lengths_from})" if w.lengths_from else ""
    eos = (
        f"ignore_eos {str(w.ignore_eos).lower()} as the file says"
        if w.ignore_eos is not None
        else "ignore_eos not stated (kit's default, true)"
    )
    carried.append(
        f"bench.dataset: random, {w.input_tokens} in / {w.output_tokens} out{how}; {eos}"
    )
    return data


def _context(data: dict[str, Any] | None) -> int:
    """The context a random dataset's longest request needs."""
    if data is None:
        return 0
    r = float(data.get("range_ratio", 0.0))
    return math.ceil((int(data["input_tokens"]) + int(data["output_tokens"])) * (1 + r))


def _spec_notes(spec: SpecDecode | None) -> list[str]:
    if spec is None or not spec.drafting:
        return []
    said = []
    if spec.acceptance_rate_pct is not None:
        said.append(f"acceptance rate {spec.acceptance_rate_pct:g} %")
    if spec.acceptance_length is not None:
        said.append(f"mean acceptance length {spec.acceptance_length:g} (1 + accepted / drafts)")
    if spec.per_position_rates:
        said.append("per position " + ", ".join(f"{r:.3g}" for r in spec.per_position_rates))
    out = [f"Speculative decoding ({spec.source}): " + "; ".join(said) + "."] if said else []
    if spec.scope:
        out.append(f"The acceptance counters cover {spec.scope}.")
    return out


def _reference(imp: Imported) -> dict[str, Any]:
    tool = imp.tool + (f" {imp.tool_version}" if imp.tool_version else "")
    notes = [f"Imported by kit import ({imp.layout})."]
    if imp.reference_only:
        notes.append(f"Reference-only: {imp.reference_only}.")
    for p in imp.points:
        for name, fig in p.other.items():
            shown = ", ".join(f"{k} {v:.4g}" for k, v in fig.model_dump().items() if v is not None)
            notes.append(f"{p.label}: {name}: {shown} ms.")
    notes += _spec_notes(imp.speculative)
    points = {
        label: _combine(group).model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        for label, group in _grouped(imp.points).items()
    }
    ref: dict[str, Any] = {"source": imp.file}
    if imp.date:
        ref["date"] = imp.date
    if imp.hardware:
        ref["rig"] = imp.hardware
    if imp.engine:
        ref["engine"] = imp.engine
    if imp.prompts:
        ref["prompts"] = {
            name: f.model_dump(mode="json", exclude_none=True) for name, f in imp.prompts.items()
        }
    if imp.prefill_tps:
        ref["prefill_tps"] = dict(imp.prefill_tps)
    spec = imp.speculative
    extras: dict[str, Any] = {
        "peak_vram_mib": imp.peak_vram_mib,
        "acceptance": spec.acceptance.model_dump(mode="json", exclude_none=True)
        if spec is not None and spec.acceptance is not None
        else None,
        "draft_memory_mib": imp.draft_memory_mib,
        "kv_cache_tokens": imp.kv_cache_tokens,
        "max_context_tokens": imp.max_context_tokens,
        "vram_growth_mib": imp.vram_growth_mib,
        "rig_detail": imp.rig_detail.model_dump(mode="json", exclude_defaults=True)
        if imp.rig_detail is not None
        else None,
    }
    ref |= {k: v for k, v in extras.items() if v is not None}
    ref["tool"] = tool
    ref["notes"] = " ".join(notes)
    if points:
        ref["points"] = points
    if imp.definitions:
        ref["definitions"] = {k: d.model_dump(mode="json") for k, d in imp.definitions.items()}
    if imp.reference_only:
        ref["reference_only"] = imp.reference_only
    if imp.open_pins:
        ref["open_pins"] = {pin.field: pin.reason for pin in imp.open_pins}
    return ref


def _speculative(imp: Imported, base: Recipe, carried: list[str]) -> dict[str, Any] | None:
    """The speculative section as far as the file says it; None keeps the base's (a stand-in
    for an open method, named in reference.open_pins)."""
    spec = imp.speculative
    k = spec.num_speculative_tokens if spec is not None else None
    if spec is not None and spec.drafting is False:
        carried.append(f"speculative: none, as the file states ({spec.source})")
        return {"method": "none"}
    if spec is not None and spec.drafting and spec.kit_method and k:
        draft = hub_id(spec.draft)
        needs = spec.kit_method in ("dflash", "dflash2", "draft_model")
        if not needs or draft:
            out: dict[str, Any] = {"method": spec.kit_method, "num_speculative_tokens": k}
            if draft:
                out["draft"] = {"source": "hub", "repo_id": draft, "revision": None}
            carried.append(f"speculative: {spec.kit_method}, {k} tokens a step ({spec.source})")
            return out
    # the method (or its draft) is open: the base's section stands in where it can
    mine = base.speculative
    usable = mine.method != "none" and not (imp.hub_repo and isinstance(mine.draft, SyntheticDraft))
    drafting = spec is not None and spec.drafting
    if usable and (drafting or not imp.hub_repo):
        if spec is not None and spec.kit_method:
            what = f"the file names {spec.kit_method} but no draft"
        else:
            what = "the file shows drafting but not how" if drafting else "the file does not say"
        carried.append(f"speculative: the base recipe's {mine.method} stands in ({what})")
        if k and k != mine.num_speculative_tokens:
            carried.append(f"speculative.num_speculative_tokens: {k}, as the file shows")
            return {"num_speculative_tokens": k}
        return None
    if not imp.hub_repo and not drafting:
        carried.append("speculative: the base recipe's (the file does not say)")
        return None
    carried.append(
        "speculative: none stands in"
        + (
            " (the file shows drafting, and kit cannot write an unknown method: set "
            "speculative before a run is compared with the reference)"
            if drafting
            else " (the file does not say; the base's draft cannot serve the file's model)"
        )
    )
    return {"method": "none"}


def _rig(imp: Imported, base: Recipe, carried: list[str]) -> dict[str, Any] | None:
    d = imp.rig_detail
    if d is None or not d.cards or not d.memory_mib:
        return None
    gib = round(d.memory_mib / 1024, 1)
    if base.server.engine.device == "cpu":
        carried.append(
            f"rig: {d.cards} card(s) of {gib:g} GiB in the file, not written (the base recipe "
            "serves on the CPU)"
        )
        return None
    carried.append(f"rig: {d.cards} card(s) of {gib:g} GiB, as the file states")
    return {"gpus": d.cards, "memory_gib": gib}


def _protocol(p: Prompts, carried: list[str]) -> dict[str, Any]:
    """bench.* for a sequential per-prompt protocol (Club-3090's canonical bench)."""
    bench: dict[str, Any] = {"ignore_eos": False}
    if p.warmups is not None:
        bench["warmups"] = p.warmups
    if p.runs is not None:
        bench["runs"] = p.runs
    canonical = {r.name: r for r in REFERENCE_PROMPTS}
    same = p.chars and all(
        n in canonical and len(canonical[n].text) == c for n, c in p.chars.items()
    )
    if same or (not p.chars and p.max_tokens):
        bench["prompts"] = [
            {"name": n, "text": canonical[n].text, "max_tokens": p.max_tokens.get(n, 0)}
            for n in canonical
            if n in p.max_tokens
        ]
        how = "their lengths are the canonical prompts'" if same else "the file's convention"
        shown = ", ".join(f"{n} {t}" for n, t in p.max_tokens.items())
        carried.append(
            f"bench.prompts: the canonical texts ({how}; the text is not printed), max_tokens "
            f"{shown}"
        )
    if p.prefill_depths:
        prefill: dict[str, Any] = {"depths": list(p.prefill_depths)}
        for key, value in (
            ("runs", p.prefill_runs),
            ("warmups", p.prefill_warmups),
            ("max_tokens", p.prefill_max_tokens),
        ):
            if value is not None:
                prefill[key] = value
        bench["prefill"] = prefill
        carried.append(f"bench.prefill: depths {', '.join(map(str, p.prefill_depths))}")
    else:
        carried.append("bench.prefill: the base recipe's (the file ran no prefill probe)")
    carried.append(
        f"bench: {p.warmups} warm-ups + {p.runs} runs a prompt, ignore_eos false (the runs "
        "stop where the model does)"
    )
    return bench


def overlay(imp: Imported, base: Recipe) -> tuple[dict[str, Any], list[str]]:
    """What the import sets over the base recipe, and a line per value carried or defaulted."""
    carried: list[str] = []
    data: dict[str, Any] = {}
    if imp.hub_repo:
        data["model"] = {"source": "hub", "repo_id": imp.hub_repo, "revision": None}
        data["quantization"] = {"method": "none"}
        carried.append(f"model: {imp.hub_repo} from the hub, revision open")
        stated = imp.quantization == "none"
        carried.append(
            "quantization: none, "
            + (
                "as the file states"
                if stated
                else "a stand-in (kit serves the checkpoint as it is)"
            )
        )
    else:
        carried.append("model, quantization: the base recipe's (the file names no hub repository)")
    spec = _speculative(imp, base, carried)
    if spec is not None:
        data["speculative"] = spec
    rig = _rig(imp, base, carried)
    if rig is not None:
        data["rig"] = rig
    bench: dict[str, Any] = {}
    load = _load(imp, carried)
    if load is not None:
        bench["load"] = load
        dataset = _dataset(imp, carried)
        if dataset is not None:
            bench["dataset"] = dataset
        need = _context(dataset)
        if need > base.server.max_model_len:
            length = 1024 * math.ceil(need / 1024)
            data.setdefault("server", {})["max_model_len"] = length
            carried.append(
                f"server.max_model_len: {length}, for the dataset's longest request ({need} tokens)"
            )
    elif imp.protocol is not None:
        bench |= _protocol(imp.protocol, carried)
    else:
        carried.append("bench: the base recipe's (the file states no load)")
    if imp.server_args:
        extra = [*base.server.extra_args, *imp.server_args]
        data.setdefault("server", {})["extra_args"] = extra
        carried.append("server.extra_args: " + " ".join(imp.server_args))
    if bench:
        data["bench"] = bench
    data["reference"] = _reference(imp)
    ref = data["reference"]
    figures = len(ref.get("points", {})) or len(ref.get("prompts", {}))
    kind = "point(s)" if ref.get("points") else "prompt(s)"
    carried.append(f"reference: {figures} {kind} of the file's figures")
    return data, carried
