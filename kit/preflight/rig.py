"""The recipe for this rig: what ``make reproduce`` runs when no RECIPE is named (:func:`pick`).

``kit recipe pick`` prints the chosen path; ``--rig 1x24`` asks for a rig this machine is not.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from kit.errors import EnvironmentProblem, KitError
from kit.paths import display_path
from kit.preflight.gpu import Card
from kit.recipe import Recipe, Rig, load_recipe

log = logging.getLogger(__name__)

# a card sold as 24 GB shows 23.99 GiB (RTX 4090, A5000) or 24.00 (RTX 3090) to NVML
MEMORY_SLACK = 0.97


@dataclass(frozen=True)
class Entry:
    """One recipe file, loaded (or why it did not load)."""

    path: Path
    recipe: Recipe | None
    error: str = ""


@dataclass(frozen=True)
class Pick:
    """The chosen recipe and why."""

    path: Path
    reason: str


def recipe_files(directory: Path) -> list[Path]:
    """The recipes in ``directory`` (lock files are not recipes)."""
    return sorted(p for p in directory.glob("*.yaml") if not p.name.endswith(".lock.yaml"))


def load_entries(directory: Path) -> list[Entry]:
    out = []
    for path in recipe_files(directory):
        try:
            out.append(Entry(path, load_recipe(path, use_lock=False).recipe))
        except KitError as exc:
            out.append(Entry(path, None, exc.message.splitlines()[0]))
    return out


def meets(rig: Rig, cards: list[Card]) -> bool:
    """Whether ``rig.gpus`` of the cards each have the memory the rig asks for."""
    enough = [c for c in cards if c.memory_gib >= rig.memory_gib * MEMORY_SLACK]
    return len(enough) >= rig.gpus


def needs(recipe: Recipe) -> str:
    """What a recipe needs, in a few words."""
    if recipe.server.nodes is not None:
        return f"{recipe.server.nodes.count} nodes (server.nodes); only when named"
    if recipe.server.engine.device == "cpu":
        return "no GPU: any x86-64 CPU (AVX2 or AVX512), picked where no GPU is visible"
    rig = recipe.rig
    if rig is None:
        tp = recipe.server.tensor_parallel_size
        return f"{tp} GPU{'s' if tp > 1 else ''} (memory: kit preflight); only when named"
    return f"{rig.gpus} x >= {rig.memory_gib:g} GiB" + ("" if rig.auto else "; only when named")


def _rig_text(cards: list[Card]) -> str:
    """``2 x NVIDIA GeForce RTX 3090 24 GiB``: alike cards counted once."""
    kinds = Counter(f"{c.name} {c.memory_gib:.0f} GiB" for c in cards)
    return ", ".join(f"{n} x {kind}" for kind, n in kinds.items())


def pick(directory: Path, cards: list[Card], why: str | None = None) -> Pick:
    """The recipe in ``directory`` for these cards (none: no GPU, ``why`` says why not);
    raises EnvironmentProblem listing every recipe and its needs when none fits.

    The cards NVML shows are matched against each recipe's ``rig`` (cards, memory per card):

    - no GPU visible: the CPU recipe (it runs on any x86-64 machine);
    - else every recipe with ``rig.auto`` whose rig the cards meet (at least ``rig.gpus``
      cards, each within 3 % of ``rig.memory_gib`` or more); of those, the one that uses the
      most cards, then the one made for the largest cards, then by name;
    - nothing met: an error that lists every recipe and what it needs (exit 3)."""
    entries = load_entries(directory)
    for bad in (e for e in entries if e.recipe is None):
        log.warning("recipe pick: %s does not load: %s", display_path(bad.path), bad.error)
    loaded = [(e.path, e.recipe) for e in entries if e.recipe is not None]
    if not cards:
        # one host's recipe: a recipe served across nodes is run only when named
        cpu = [
            (p, r) for p, r in loaded if r.server.engine.device == "cpu" and r.server.nodes is None
        ]
        if cpu:
            return Pick(cpu[0][0], f"no NVIDIA GPU visible ({why or 'none found'}): the CPU recipe")
    else:
        fits = [
            (p, r) for p, r in loaded if r.rig is not None and r.rig.auto and meets(r.rig, cards)
        ]
        if fits:
            fits.sort(key=lambda pr: (-pr[1].rig.gpus, -pr[1].rig.memory_gib, pr[0].name))  # type: ignore[union-attr]
            path, recipe = fits[0]
            assert recipe.rig is not None
            return Pick(
                path,
                f"{len(cards)} GPU{'s' if len(cards) > 1 else ''} ({_rig_text(cards)}) meet "
                f"{recipe.name}'s rig ({needs(recipe)})",
            )
    found = _rig_text(cards) if cards else f"no GPU ({why or 'none found'})"
    width = max((len(display_path(p)) for p, _ in loaded), default=0)
    listing = "\n".join(f"  {display_path(p):{width}}  {needs(r)}" for p, r in loaded)
    raise EnvironmentProblem(
        f"no recipe in {display_path(directory)} is made for this rig: {found}\n{listing}",
        hint="name one (make reproduce RECIPE=recipes/NAME.yaml; kit preflight RECIPE says "
        "whether it fits), or add a recipe with a rig: block for these cards",
    )
