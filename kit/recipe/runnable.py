"""What a valid recipe needs of this checkout to run: the patch series it names, present and
made for its engine. :func:`kit.recipe.load_recipe` checks it, so ``kit recipe validate``,
``kit recipe show`` and preflight refuse alike."""

from __future__ import annotations

from kit import patches
from kit.errors import BadInputError
from kit.recipe.serving import Engine


def series_problems(engine: Engine, series_name: str | None, label: str) -> list[str]:
    """Recipe problems with its patch series: missing, malformed, or for another engine;
    ``label`` names the place of ``server.patches``."""
    if series_name is None:
        return []
    try:
        series = patches.series_named(series_name)
    except BadInputError as exc:
        return [
            f"{label}: server.patches: {line.removeprefix('server.patches: ')}"
            for line in exc.message.splitlines()
        ]
    if (series.engine, series.version) != (engine.name, engine.version):
        return [
            f"{label}: server.patches: series {series_name} is for {series.engine} "
            f"{series.version}, the recipe's engine is {engine.name} {engine.version}"
        ]
    return []
