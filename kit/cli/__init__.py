"""The ``kit`` command line: the top-level group, logging, and the one error boundary
(:mod:`kit.cli.boundary`; the messages are :mod:`kit.console`'s, shared with the containers).

Each command lives in the module of its group and is a thin call of one stage function; this
file only registers them.
"""

from __future__ import annotations

import logging

import click

from kit import __version__
from kit.cli import (
    containers,
    fleet,
    host,
    importer,
    keys,
    patches,
    recipe,
    report,
    report_files,
    run,
    schema,
)
from kit.cli.boundary import KitGroup
from kit.cli.options import examples
from kit.console import setup_logging


@click.group(
    "kit",
    cls=KitGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=examples(
        "kit reproduce recipes/cpu-tiny.yaml",
        "kit recipe validate recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml",
        "kit bench --target http://127.0.0.1:8000 recipes/cpu-tiny.yaml",
    ),
)
@click.version_option(__version__, prog_name="kit")
@click.option("-v", "--verbose", count=True, help="More log output.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def main(verbose: int, quiet: bool) -> None:
    """kit: rebuild, serve and measure a published LLM-serving result from a recipe."""
    setup_logging(logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO))


for _command in (
    recipe.recipe,
    recipe.lock,
    schema.schema,
    run.build,
    run.serve,
    run.bench,
    run.preflight,
    run.reproduce,
    patches.patches,
    report.report,
    containers.image,
    containers.compose,
    keys.keys,
    host.probe,
    fleet.sweep,
    fleet.fleet,
    importer.import_file,
):
    main.add_command(_command)
# the report group's commands of kit/cli/report_files.py (no command module imports another)
report.report.add_command(report_files.report_table)
report.report.add_command(report_files.report_attest)
