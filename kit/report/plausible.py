"""A recipe's published reference against the roofline bound on the reference's own rig
(:mod:`kit.roofline.plausible`): what the bound is computed from, gathered from the recipe and
the runs at hand. A model, not a measurement; docs/roofline.md has the formula.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from kit.errors import BadInputError
from kit.model.hub import hub_cache_dir
from kit.recipe import Reference
from kit.recipe.serving import REFERENCE_PROMPTS
from kit.report.comparability import recipe_diff, section_diff
from kit.report.schema import Report
from kit.roofline import ModelBytes, draft_passes
from kit.roofline.bound import BoundSetup, mean_context
from kit.roofline.checkpoint import kv_element_bytes
from kit.roofline.estimate import config_bytes, quant_of
from kit.roofline.plausible import (
    Plausibility,
    Published,
    ReferenceModel,
    not_computed,
    plausibility,
    rig_bandwidth,
)

Bytes = tuple[ModelBytes, ModelBytes | None, str]


def reference_plausibility(
    ref: Reference, recipe: dict[str, Any], runs: Sequence[Report] = ()
) -> Plausibility | None:
    """The reference's published decode figures against the bound on its rig; None when it
    publishes none. ``recipe`` is the reference's recipe as JSON (its hub revisions pinned);
    ``runs`` are reports that may carry the model's bytes and each prompt's context."""
    published = {n: f.decode_tps for n, f in ref.prompts.items() if f.decode_tps}
    if not published:
        return None
    server = recipe.get("server") or {}
    spec = recipe.get("speculative") or {}
    method = str(spec.get("method") or "none")
    k = int(spec.get("num_speculative_tokens") or 0) if method != "none" else 0
    rig = rig_bandwidth(ref.rig, int(server.get("tensor_parallel_size") or 1))
    found = model_bytes_for(recipe, runs)
    missing = [m for m in (rig, found) if isinstance(m, str)]
    if missing:
        return not_computed(missing)
    assert not isinstance(rig, str) and not isinstance(found, str)
    target, draft, source = found
    acc = ref.acceptance
    length = 1 + acc.accepted / acc.drafts if acc is not None and acc.drafts else None
    model = ReferenceModel(
        setup=BoundSetup(
            target=target,
            draft=draft if method != "none" else None,
            passes=draft_passes(method, k),
            k=k,
            tp=rig.tensor_parallel_size,
            bandwidth_gbps=rig.bandwidth_gbps,
        ),
        rig=rig,
        bytes_from=source,
        spec_method=method,
        acceptance_length=length,
        acceptance_from=(
            f"the reference's counters: 1 + {acc.accepted} accepted / {acc.drafts} drafts"
            if acc is not None and length is not None
            else None
        ),
    )
    alike = [r for r in runs if _same_checkpoints(recipe, r.recipe)]  # its prompts' lengths too
    return plausibility(model, [_published(n, tps, recipe, alike) for n, tps in published.items()])


def of_recipe(recipe: dict[str, Any], runs: Sequence[Report] = ()) -> Plausibility | None:
    """:func:`reference_plausibility` of a recipe as a report embeds it; None without a
    reference that publishes decode figures, or one that does not read."""
    data = recipe.get("reference")
    if not isinstance(data, dict):
        return None
    try:
        ref = Reference.model_validate(data)
    except ValidationError:
        return None
    return reference_plausibility(ref, recipe, runs)


def _published(name: str, tps: float, recipe: dict[str, Any], runs: Sequence[Report]) -> Published:
    """A published figure with the context and tokens of a request of its prompt: the measured
    records of a run of the reference's model, else the recipe's max_tokens (prompt tokens not
    counted)."""
    for run in runs:
        if run.bench is None:
            continue
        context = mean_context(run.bench, name)
        done = [
            r.completion_tokens
            for r in run.bench.records
            if r.prompt == name and r.phase == "measured" and r.usable and r.completion_tokens
        ]
        if context is not None and done:
            return Published(
                name, tps, context, f"run {run.run_id}'s records", sum(done) / len(done)
            )
    prompts = (recipe.get("bench") or {}).get("prompts") or [
        p.model_dump() for p in REFERENCE_PROMPTS
    ]
    budget = next((float(p["max_tokens"]) for p in prompts if p.get("name") == name), 0.0)
    return Published(name, tps, budget / 2, "max_tokens / 2, prompt not counted", budget)


def model_bytes_for(recipe: dict[str, Any], runs: Sequence[Report] = ()) -> Bytes | str:
    """The target's and the draft's bytes for the recipe's model, quantization, draft and KV
    cache dtype, with where they come from; or why there are none. They come from a run that
    served the reference's model, quantization and draft (its report's roofline: the
    checkpoint's safetensors headers), else from ``config.json`` in kit's hub cache (``kit
    preflight RECIPE`` puts it there) with the recipe's quantization."""
    kv = str((recipe.get("server") or {}).get("kv_cache_dtype") or "auto")
    for run in runs:
        roof = run.roofline
        if roof is not None and _same_checkpoints(recipe, run.recipe):
            theirs = str((run.recipe.get("server") or {}).get("kv_cache_dtype") or "auto")
            return (
                _kv_as(roof.target, theirs, kv),
                _kv_as(roof.draft, theirs, kv) if roof.draft is not None else None,
                f"run {run.run_id}'s roofline: the safetensors headers of the checkpoint it "
                "served (the reference's model and quantization)",
            )
    return _from_configs(recipe, kv)


def _same_checkpoints(recipe: dict[str, Any], run: dict[str, Any]) -> bool:
    draft = (
        (recipe.get("speculative") or {}).get("draft"),
        (run.get("speculative") or {}).get("draft"),
    )
    return not (
        recipe_diff("model", recipe, run)
        or recipe_diff("quantization", recipe, run)
        or section_diff(draft[0], draft[1], "draft")
    )


def _kv_as(mb: ModelBytes, served: str, wanted: str) -> ModelBytes:
    """The bytes with the KV cache at the reference's dtype instead of the run's."""
    a, b = kv_element_bytes({}, served), kv_element_bytes({}, wanted)
    return (
        mb
        if a == b
        else mb.model_copy(update={"kv_bytes_per_token": mb.kv_bytes_per_token * b // a})
    )


def _from_configs(recipe: dict[str, Any], kv: str) -> Bytes | str:
    model = recipe.get("model") or {}
    config, why = _config(model, None)
    if config is None:
        return f"no bytes for the model: {why}"
    spec = recipe.get("speculative") or {}
    draft_spec = spec.get("draft") if spec.get("method", "none") != "none" else None
    names = [_name(model)]
    try:
        target = config_bytes(config, "target", quant_of(recipe, config), kv, names[0])
        draft = None
        if isinstance(draft_spec, dict):
            draft_config, why = _config(draft_spec, config)
            if draft_config is None:
                return f"no bytes for the draft: {why}"
            names.append(_name(draft_spec))
            draft = config_bytes(draft_config, "draft", None, kv, names[1])
    except BadInputError as exc:
        return f"no bytes: {exc.message}"
    except (TypeError, ValueError, ZeroDivisionError):  # a config.json of another kind
        return f"no bytes: the config.json of {' and '.join(names)} has no decoder shape kit reads"
    return (
        target,
        draft,
        f"estimated from the config.json of {' and '.join(names)} (its shape at the recipe's "
        "quantization; norms, embedding and lm_head bf16; a bf16 draft)",
    )


def _name(spec: dict[str, Any]) -> str:
    if spec.get("source") == "hub":
        return f"{spec.get('repo_id')}@{str(spec.get('revision'))[:12]}"
    return f"{spec.get('source')} {spec.get('path') or 'model'}"


def _config(
    spec: dict[str, Any], target: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, str]:
    """A model's config.json: from kit's hub cache (never fetched here), a synthetic shape, or
    a synthetic draft built on ``target``'s; or why not."""
    source = spec.get("source")
    if source == "synthetic":
        if target is not None:  # a synthetic draft matches its target, fewer layers
            return {**target, "num_hidden_layers": spec.get("num_hidden_layers", 1)}, ""
        return dict(spec.get("shape") or {}), ""
    if source != "hub":
        return None, f"a {source} model's config.json is not read here"
    repo, rev = str(spec.get("repo_id")), spec.get("revision")
    if not rev:
        return None, f"{repo} is not pinned to a revision"
    folder = hub_cache_dir() / f"models--{repo.replace('/', '--')}"
    ref = folder / "refs" / str(rev)
    sha = ref.read_text().strip() if ref.is_file() else str(rev)
    path = folder / "snapshots" / sha / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, (
            f"config.json of {repo}@{str(rev)[:12]} is not in kit's hub cache "
            "(kit preflight RECIPE fetches it, a few KB)"
        )
    return (data, "") if isinstance(data, dict) else (None, f"{path.name} is not a mapping")


__all__ = ["model_bytes_for", "of_recipe", "reference_plausibility"]
