"""``kit schema``: the recipe and report JSON Schemas, generated from the models."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kit.cli.options import examples
from kit.errors import EXIT_FAILED


@click.command("schema", epilog=examples("kit schema", "kit schema --check"))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="schemas",
    show_default=True,
    help="Where the JSON Schemas are written.",
)
@click.option(
    "--docs",
    "docs_dir",
    type=click.Path(file_okay=False),
    default="docs",
    show_default=True,
    help="Where the figure table (figures.md) is written.",
)
@click.option("--check", is_flag=True, help="Exit 1 if the committed schemas differ.")
def schema(out_dir: str, docs_dir: str, check: bool) -> None:
    """Generate the recipe, recipe file and report JSON Schemas from the models, and the figure
    table (docs/figures.md) from kit/figures.py."""
    from kit.figures import markdown
    from kit.recipe import recipe_file_json_schema, recipe_json_schema
    from kit.report.schema import report_json_schema

    outputs = {
        Path(out_dir) / "recipe.schema.json": recipe_json_schema(),
        Path(out_dir) / "recipe-file.schema.json": recipe_file_json_schema(),
        Path(out_dir) / "report.schema.json": report_json_schema(),
        Path(docs_dir) / "figures.md": markdown(),
    }
    drift = []
    for path, data in outputs.items():
        text = data if isinstance(data, str) else json.dumps(data, indent=2, sort_keys=True) + "\n"
        if check:
            if not path.exists() or path.read_text() != text:
                drift.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            click.echo(f"wrote {path}", err=True)
    if drift:
        for p in drift:
            click.echo(f"error: {p} is out of date with the models", err=True)
        click.echo("hint: run `make schema` and commit the result", err=True)
        sys.exit(EXIT_FAILED)
