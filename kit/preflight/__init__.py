"""Preflight: what can be known to fail, checked in seconds, before any expensive work.

A run that would die after minutes of downloads, quantization and a server boot is refused at
once instead, with every reason and a hint, all in one run (``kit preflight RECIPE``, and the
first step of ``kit reproduce`` in both runtimes):

- pins (:mod:`kit.preflight.pins`): hub revisions of the model and the draft, the calibration
  data set, and in containers the GPU base image's digest;
- for a GPU recipe (:mod:`kit.preflight.gpu`): the cards NVML shows against the tensor-parallel
  size, and each card's memory against the written-down estimate;
- for a GPU recipe that quantizes (:mod:`kit.preflight.autoround`): AutoRound's peak per block
  on the cards its placement names, and host RAM for the model it holds;
- for a CPU recipe (:mod:`kit.preflight.cpu`): the CPU's ISA against the engine's kernels, the
  memory for KV cache, model and engine, and free disk under ``$KIT_HOME``;
- for a GPU recipe, free disk against the hub's sizes of what would be downloaded plus the
  quantized output (:mod:`kit.preflight.disk`, :mod:`kit.preflight.hub`);
- natively, the engine's Python (:mod:`kit.preflight.engine`); in containers, a Docker engine
  this user may use and, for a GPU recipe, its NVIDIA runtime (:mod:`kit.preflight.docker`).

A failed pin is the recipe's fault (exit 2); the rest is the machine's (exit 3). When both
fail, the recipe's exit code wins: fix the recipe first.
"""

from __future__ import annotations

import logging
import os
import platform

from kit import engine as engine_mod
from kit.errors import BadInputError, EnvironmentProblem
from kit.paths import kit_home
from kit.preflight.autoround import autoround_checks
from kit.preflight.check import Check, Fault
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
from kit.preflight.disk import gpu_disk_check
from kit.preflight.docker import container_checks
from kit.preflight.engine import engine_python_check
from kit.preflight.gpu import Card, Estimate, estimate, visible_cards
from kit.preflight.pins import pin_checks
from kit.recipe import LoadedRecipe, Recipe

log = logging.getLogger(__name__)

__all__ = [
    "Card",
    "Check",
    "Estimate",
    "Fault",
    "assumed_rig",
    "checks",
    "disk_check",
    "gpu_checks",
    "int4_path_check",
    "isa_check",
    "memory_check",
    "preflight",
    "table",
]


def gpu_checks(
    recipe: Recipe, cards: list[Card], why: str | None, seen: str = "visible"
) -> list[Check]:
    """The cards against the recipe: their count, then each one's memory (where estimated).
    ``seen`` says how the cards are known (``visible`` to NVML, or ``assumed`` with --rig)."""
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
    est = estimate(recipe)
    if est is None:
        out.append(
            Check(
                "gpu memory",
                True,
                "not estimated: the model's config.json is not in kit's cache, and the hub "
                "did not give it (offline, or a revision not pinned)",
            )
        )
        return out
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


def checks(
    loaded: LoadedRecipe,
    runtime: str = "native",
    rig: list[Card] | None = None,
    engine_python: str | None = None,
) -> list[Check]:
    """Every preflight item for the recipe on this machine, for ``runtime`` (native, compose);
    ``rig`` stands in for the GPUs NVML shows (:func:`assumed_rig`); ``engine_python`` is the
    interpreter a native run is given (else ``KIT_ENGINE_PYTHON``, else kit's managed venv)."""
    recipe = loaded.recipe
    gpu = recipe.server.engine.device == "cuda"
    items = pin_checks(loaded, runtime)
    if runtime == "compose":
        items += container_checks(gpu)
    else:
        items += [engine_python_check(recipe, engine_python), shm_check(shm_free_mib())]
    if gpu:
        if rig is not None:
            items += gpu_checks(recipe, rig, None, "assumed")
            items += autoround_checks(recipe, rig, None)  # host RAM: not this machine's
        else:
            cards, why = visible_cards()
            items += gpu_checks(recipe, cards, why)
            items += autoround_checks(recipe, cards, mem_available_gib())
        return [*items, gpu_disk_check(recipe, kit_home())]
    model, isa = cpu_isa()
    engine_dir = engine_mod.managed_dir(recipe.server.engine, recipe.server.patches)
    installed = (
        bool(os.environ.get("KIT_ENGINE_PYTHON")) or (engine_dir / engine_mod.MARKER).exists()
    )
    return [
        *items,
        isa_check(recipe, model, isa, platform.machine()),
        int4_path_check(recipe, isa),
        memory_check(recipe, mem_available_gib()),
        disk_check(recipe, kit_home(), installed),
    ]


def table(items: list[Check]) -> str:
    """What was checked, one line each: ``ok``/``FAILED``, the item, what was found."""
    width = max((len(c.name) for c in items), default=0)
    lines = [f"{'ok' if c.ok else 'FAILED':6}  {c.name:{width}}  {c.detail}" for c in items]
    return "\n".join(lines)


def preflight(
    loaded: LoadedRecipe,
    runtime: str = "native",
    rig: list[Card] | None = None,
    engine_python: str | None = None,
) -> list[Check]:
    """Run the checks; raise naming every failed one: ``BadInputError`` (exit 2) when one is
    the recipe's fault, else ``EnvironmentProblem`` (exit 3)."""
    items = checks(loaded, runtime, rig, engine_python)
    for item in items:  # the failures go into the error; passes are for -v / KIT_DEBUG
        log.debug("preflight: %s: %s: %s", item.name, "ok" if item.ok else "FAILED", item.detail)
    failed = [c for c in items if not c.ok]
    if failed:
        error = BadInputError if any(c.fault == "recipe" for c in failed) else EnvironmentProblem
        raise error(
            f"preflight: {loaded.recipe.name} cannot run here:\n"
            + "\n".join(f"  {c.name}: {c.detail}" for c in failed),
            hint="; ".join(dict.fromkeys(c.hint for c in failed if c.hint)),
        )
    return items
