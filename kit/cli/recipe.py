"""``kit recipe``: validate and show recipes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kit.cli.options import examples, set_option
from kit.errors import EXIT_BAD_INPUT, BadInputError, KitError
from kit.recipe import load_recipe


@click.group(
    "recipe",
    epilog=examples(
        "kit recipe validate recipes/*.yaml",
        "kit recipe show recipes/cpu-tiny.yaml --set bench.runs=2",
        "kit recipe pick",
    ),
)
def recipe() -> None:
    """Validate and show recipes."""


@recipe.command(
    "validate",
    epilog=examples(
        "kit recipe validate recipes/*.yaml",
        "kit recipe validate recipes/cpu-tiny.yaml --set server.max_model_len=4096",
    ),
)
@click.argument("recipes", nargs=-1, required=True, type=click.Path())
@set_option
def recipe_validate(recipes: tuple[str, ...], overrides: tuple[str, ...]) -> None:
    """Check recipe files; one line per problem, exit 2 on any."""
    problems: list[str] = []
    for path in recipes:
        try:
            loaded = load_recipe(path, overrides)
        except KitError as exc:
            problems.extend(exc.message.splitlines())
            continue
        click.echo(f"ok: {path} ({loaded.recipe.name}, sha256 {loaded.recipe.sha256()[:12]})")
    if problems:
        for p in problems:
            click.echo(p, err=True)
        sys.exit(EXIT_BAD_INPUT)


@recipe.command("show", epilog=examples("kit recipe show recipes/cpu-tiny.yaml --set bench.runs=2"))
@click.argument("path", type=click.Path())
@set_option
def recipe_show(path: str, overrides: tuple[str, ...]) -> None:
    """Print the resolved recipe (extends and --set applied) as JSON."""
    loaded = load_recipe(path, overrides)
    data = {"sha256": loaded.recipe.sha256(), "recipe": loaded.recipe.to_json_dict()}
    click.echo(json.dumps(data, indent=2))


IMAGE = "server.engine.image"


@click.command(
    "lock",
    epilog=examples(
        "kit lock recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml",
        "kit lock recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml --no-image",
        "HF_ENDPOINT=http://127.0.0.1:8080 kit lock my-recipe.yaml",
    ),
)
@click.argument("path", type=click.Path())
@click.option(
    "--no-image",
    is_flag=True,
    help="Leave the GPU base image open (native runs do not use it; no docker CLI needed).",
)
def lock(path: str, no_image: bool) -> None:
    """Resolve what RECIPE leaves open (hub revisions to commit shas through huggingface_hub,
    honouring HF_ENDPOINT; a GPU base image tag to its digest through the docker CLI) and write
    RECIPE.lock.yaml beside it. Every kit command then applies the lock, until the recipe
    changes; --set still wins. Prints the lock's path and what it pinned; when every pin is
    exact already, says so on stderr and writes no lock.
    """
    from kit.lock import lock_recipe
    from kit.recipe.lock import is_exact, open_fields, read_lock

    locked = lock_recipe(path, images=not no_image)
    if locked.removed is not None:
        click.echo(
            f"removed {locked.removed}: it locked an earlier version of the recipe", err=True
        )
    written = locked.written
    if written is None:
        image = open_fields(load_recipe(path, use_lock=False).recipe).get(IMAGE, "")
        said = f"every pin of {path} is exact"
        if no_image and image and not is_exact(IMAGE, image):
            said = f"every other pin of {path} is exact, and --no-image leaves {image} open"
        click.echo(f"nothing to resolve: {said}; no lock written", err=True)
        return
    lock = read_lock(written, path)
    assert lock is not None
    for pin in lock.pins:
        click.echo(f"{pin.field}: {pin.value}  ({pin.resolved_from})", err=True)
    click.echo(str(written))


@recipe.command("pick", epilog=examples("kit recipe pick", "kit recipe pick --rig 2x24"))
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("recipes"),
    show_default=True,
    help="Where the recipes are.",
)
@click.option("--rig", help="Pick for these cards instead of NVML's: CARDSxGIB, e.g. 1x24.")
def recipe_pick(directory: Path, rig: str | None) -> None:
    """Print the recipe for this rig: the GPUs NVML shows against each recipe's rig: block
    (none visible: the CPU recipe). Says why on stderr; exit 3, listing every recipe and what
    it needs, when none fits. `make reproduce` runs it when no RECIPE is given.
    """
    from kit.preflight import assumed_rig
    from kit.preflight.gpu import visible_cards
    from kit.preflight.rig import pick

    if not directory.is_dir():
        raise BadInputError(f"--dir {directory}: no such directory")
    if rig is not None:
        cards, why = assumed_rig(rig), None
    else:
        cards, why = visible_cards()
    chosen = pick(directory, cards, why)
    click.echo(f"kit: {chosen.reason}: {chosen.path}", err=True)
    click.echo(str(chosen.path))
