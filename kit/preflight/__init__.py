"""Preflight: what can be known to fail, checked in seconds, before any download or build.

Each item is ok, a problem (the recipe's fault exits 2, the machine's 3) or not checked, with
why; :func:`checks` takes the runtime's own items (kit.runtimes). The list: docs/pipeline.md.
"""

from __future__ import annotations

import logging
import os
import platform
from collections.abc import Sequence
from pathlib import Path

from kit import engine as engine_mod
from kit.errors import BadInputError, EnvironmentProblem
from kit.paths import kit_home
from kit.preflight.autoround import autoround_checks
from kit.preflight.check import Check, Fault, State
from kit.preflight.cpu import (
    cpu_isa,
    disk_check,
    int4_path_check,
    isa_check,
    mem_available_gib,
    memory_check,
    shm_check,
    shm_free_mib,
)
from kit.preflight.disk import gpu_disk_check, output_check
from kit.preflight.docker import container_checks
from kit.preflight.engine import engine_python_check
from kit.preflight.gpu import Card, Estimate, estimate, visible_cards
from kit.preflight.pins import image_pin_checks, pin_checks
from kit.preflight.port import port_check
from kit.preflight.shape import ModelShapes, Shape, Unknown, model_shapes
from kit.recipe import LoadedRecipe, Recipe

log = logging.getLogger(__name__)

__all__ = [
    "Card",
    "Check",
    "Estimate",
    "Fault",
    "ModelShapes",
    "Shape",
    "State",
    "Unknown",
    "assumed_rig",
    "checks",
    "container_checks",
    "disk_check",
    "engine_python_check",
    "gpu_checks",
    "image_pin_checks",
    "int4_path_check",
    "isa_check",
    "memory_check",
    "model_shapes",
    "not_checked",
    "output_check",
    "pin_checks",
    "place_checks",
    "port_check",
    "refuse",
    "serve_checks",
    "settle",
    "shm_check",
    "shm_free_mib",
    "table",
]


def gpu_checks(
    recipe: Recipe,
    cards: list[Card],
    why: str | None,
    shapes: ModelShapes,
    seen: str = "visible",
) -> list[Check]:
    """The cards against the recipe: their count, then each one's memory (where the model's
    shape is known, ``shapes``). ``seen`` says how the cards are known (``visible`` to NVML, or
    ``assumed`` with --rig)."""
    need = recipe.server.tensor_parallel_size
    shown = ", ".join(f"{c.name} {c.memory_gib:.0f} GiB" for c in cards) or why or "none"
    out = [
        Check(
            "gpus",
            len(cards) >= need,
            f"{len(cards)} {seen} ({shown}); tensor_parallel_size {need} needs {need}",
            "run it on a host with the GPUs (NVIDIA driver; in containers also the NVIDIA "
            "Container Toolkit), or pick a recipe for this rig (ls recipes/)",
        )
    ]
    if len(cards) < need:
        return out
    target, draft = shapes.target, shapes.draft_params
    if isinstance(target, Unknown) or isinstance(draft, Unknown):
        unknown = shapes.unknown()
        return [
            *out,
            Check(
                "gpu memory",
                None,
                "not estimated: " + "; ".join(dict.fromkeys(u.why for u in unknown)),
                "\n".join(dict.fromkeys(u.hint for u in unknown if u.hint)),
            ),
        ]
    est = estimate(recipe, target, draft)
    usable = min(c.memory_gib for c in cards[:need]) * recipe.server.gpu_memory_utilization
    out.append(
        Check(
            "gpu memory",
            est.total <= usable,
            f"about {est.total:.1f} GiB a card (weights {est.weights:.1f} + draft "
            f"{est.draft:.1f} + KV cache {est.kv_cache:.1f} at max_model_len "
            f"{recipe.server.max_model_len} + {est.fixed:g} fixed) of {usable:.1f} GiB usable "
            f"({recipe.server.gpu_memory_utilization:g} of the smallest card)",
            "lower server.max_model_len, use a KV cache dtype of 1 byte (fp8), or more cards",
        )
    )
    return out


def assumed_rig(spec: str) -> list[Card]:
    """``NxGIB`` (e.g. ``2x24``): that many cards of that memory, for checking a recipe
    against a rig this machine is not."""
    count, _, gib = spec.lower().partition("x")
    try:
        n, size = int(count), float(gib)
    except ValueError:
        n, size = 0, 0.0
    if n < 1 or size <= 0:
        raise BadInputError(f"--rig {spec}: expected CARDSxGIB, e.g. 2x24")
    return [Card(index=i, name="card", memory_gib=size) for i in range(n)]


def place_checks(port: int | None, out_dir: Path | None) -> list[Check]:
    """Where the run goes: the port it is to serve on (when given) and the output folder
    (when given)."""
    return [
        *([port_check(port)] if port is not None else []),
        *([output_check(out_dir)] if out_dir is not None else []),
    ]


def serve_checks(
    loaded: LoadedRecipe, port: int | None, engine_python: str | None = None
) -> list[Check]:
    """What ``kit serve`` checks before it builds: the engine (its Python, or the indexes of
    one still to be installed) and the port."""
    return [engine_python_check(loaded.recipe, engine_python), *place_checks(port, None)]


def checks(
    loaded: LoadedRecipe, own: Sequence[Check] = (), rig: list[Card] | None = None
) -> list[Check]:
    """Every preflight item for the recipe on this machine: its pins, ``own`` (the runtime's
    items, kit.runtimes ``own_checks``), then the GPUs (``rig`` stands in for those NVML shows:
    :func:`assumed_rig`), or for a CPU recipe the ISA, memory and disk. The model's shape is
    derived once here, for every item that sizes something."""
    recipe = loaded.recipe
    items = [*pin_checks(loaded), *own]
    shapes = model_shapes(loaded)
    if recipe.server.engine.device == "cuda":
        if rig is not None:
            items += gpu_checks(recipe, rig, None, shapes, "assumed")
            # host RAM: not this machine's
            items += autoround_checks(recipe, rig, None, shapes.target)
        else:
            cards, why = visible_cards()
            items += gpu_checks(recipe, cards, why, shapes)
            items += autoround_checks(recipe, cards, mem_available_gib(), shapes.target)
        return [*items, gpu_disk_check(loaded, kit_home(), shapes)]
    model, isa = cpu_isa()
    engine_dir = engine_mod.managed_dir(recipe.server.engine, recipe.server.patches)
    installed = (
        bool(os.environ.get("KIT_ENGINE_PYTHON")) or (engine_dir / engine_mod.MARKER).exists()
    )
    return [
        *items,
        isa_check(recipe, model, isa, platform.machine()),
        int4_path_check(recipe, isa),
        memory_check(recipe, mem_available_gib(), shapes),
        disk_check(recipe, kit_home(), installed, shapes),
    ]


LABELS: dict[State, str] = {"ok": "ok", "problem": "FAILED", "not checked": "not checked"}


def table(items: list[Check]) -> str:
    """What was checked, one line each (``ok``, ``FAILED`` or ``not checked``, the item, what
    was found), then :func:`not_checked`'s lines."""
    width = max((len(c.name) for c in items), default=0)
    label = max(len(LABELS[c.state]) for c in items) if items else 0
    lines = [f"{LABELS[c.state]:{label}}  {c.name:{width}}  {c.detail}" for c in items]
    return "\n".join([*lines, *not_checked(items)])


def not_checked(items: list[Check]) -> list[str]:
    """The hints of the items not checked, one a line, then ``N checks not made: ...``; nothing
    when every item was checked. Items not checked fail nothing: the exit code is the
    problems'."""
    skipped = [c for c in items if c.state == "not checked"]
    if not skipped:
        return []
    hints = dict.fromkeys(line for c in skipped for line in c.hint.splitlines() if line)
    names = ", ".join(c.name for c in skipped)
    count = (
        f"{len(skipped)} checks not made ({names}): they do not fail preflight; the run may "
        "still fail on them"
        if len(skipped) > 1
        else f"1 check not made ({names}): it does not fail preflight; the run may still fail on it"
    )
    return [*(f"hint: {h}" for h in hints), count]


def refuse(name: str, items: list[Check]) -> None:
    """Raise naming every problem among ``items`` (for the recipe called ``name``), their hints
    one a line: ``BadInputError`` (exit 2) when one is the recipe's fault, else
    ``EnvironmentProblem`` (exit 3). Items not checked fail nothing."""
    failed = [c for c in items if c.state == "problem"]
    if failed:
        error = BadInputError if any(c.fault == "recipe" for c in failed) else EnvironmentProblem
        hints = (line for c in failed for line in c.hint.splitlines() if line)
        raise error(
            f"preflight: {name} cannot run here:\n"
            + "\n".join(f"  {c.name}: {c.detail}" for c in failed),
            hint="\n".join(dict.fromkeys(hints)),
        )


def settle(name: str, items: list[Check]) -> list[Check]:
    """Log the items not checked (a warning each, with why, and :func:`not_checked`'s lines);
    raise naming every problem (:func:`refuse`); else return ``items``."""
    for item in items:  # problems go into the error; passes are for -v / KIT_DEBUG
        if item.state == "not checked":
            log.warning("preflight: not checked: %s: %s", item.name, item.detail)
        else:
            log.debug("preflight: %s: %s: %s", item.name, LABELS[item.state], item.detail)
    for line in not_checked(items):
        log.warning("preflight: %s", line)
    refuse(name, items)
    return items
