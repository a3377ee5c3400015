"""``kit recipe``: validate and show recipes."""

from __future__ import annotations

import json
import sys

import click

from kit.cli.options import set_option
from kit.errors import EXIT_BAD_INPUT, KitError
from kit.recipe import load_recipe


@click.group("recipe")
def recipe() -> None:
    """Validate and show recipes."""


@recipe.command("validate")
@click.argument("recipes", nargs=-1, required=True, type=click.Path())
@set_option
def recipe_validate(recipes: tuple[str, ...], overrides: tuple[str, ...]) -> None:
    """Check recipe files; one line per problem, exit 2 on any.

    \b
    Examples:
      kit recipe validate recipes/*.yaml
      kit recipe validate recipes/cpu-tiny.yaml --set server.max_model_len=4096
    """
    problems: list[str] = []
    for path in recipes:
        from kit.engine import series_problems

        try:
            loaded = load_recipe(path, overrides)
        except KitError as exc:
            problems.extend(exc.message.splitlines())
            continue
        server = loaded.recipe.server
        found = series_problems(server.engine, server.patches, path)
        if found:
            problems.extend(found)
            continue
        click.echo(f"ok: {path} ({loaded.recipe.name}, sha256 {loaded.recipe.sha256()[:12]})")
    if problems:
        for p in problems:
            click.echo(p, err=True)
        sys.exit(EXIT_BAD_INPUT)


@recipe.command("show")
@click.argument("path", type=click.Path())
@set_option
def recipe_show(path: str, overrides: tuple[str, ...]) -> None:
    """Print the resolved recipe (extends and --set applied) as JSON.

    \b
    Example:
      kit recipe show recipes/cpu-tiny.yaml --set bench.runs=2
    """
    loaded = load_recipe(path, overrides)
    data = {"sha256": loaded.recipe.sha256(), "recipe": loaded.recipe.to_json_dict()}
    click.echo(json.dumps(data, indent=2))
