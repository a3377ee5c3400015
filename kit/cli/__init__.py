"""The ``kit`` command line: the top-level group, logging, and the one place where errors
become messages.

Each command lives in the module of its group and is a thin call of one stage function; this
file only registers them.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import Any

import click

from kit import __version__
from kit.cli import containers, fleet, host, keys, patches, recipe, report, run, schema
from kit.errors import KitError, ServerError, Terminated

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process it ended


def report_error(exc: KitError | KeyboardInterrupt) -> int:
    """``error:`` lines, the server's log tail, then the ``hint:`` line, all on stderr; returns
    the exit code. The one place an error becomes a message, for the CLI and the containers."""
    if isinstance(exc, Terminated):
        click.echo("error: stopped by SIGTERM", err=True)
        return EXIT_TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        click.echo("error: interrupted", err=True)
        return EXIT_INTERRUPTED
    if os.environ.get("KIT_DEBUG") == "1":
        traceback.print_exc()
    for line in exc.message.splitlines() or [""]:
        click.echo(f"error: {line}", err=True)
    if isinstance(exc, ServerError) and exc.log_tail:
        click.echo("server log (last lines):", err=True)
        click.echo(exc.log_tail, err=True)
    if exc.hint:
        click.echo(f"hint: {exc.hint}", err=True)
    return exc.exit_code


class KitGroup(click.Group):
    """Turns KitError into 'error:'/'hint:' lines and the documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (KitError, KeyboardInterrupt) as exc:
            ctx.exit(report_error(exc))


def setup_logging(level: int) -> None:
    """kit's log lines, message only, on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("kit")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


@click.group(cls=KitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kit")
@click.option("-v", "--verbose", count=True, help="More log output.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def main(verbose: int, quiet: bool) -> None:
    """kit: rebuild, serve and measure a published LLM-serving result from a recipe.

    \b
    Examples:
      kit reproduce recipes/cpu-tiny.yaml
      kit recipe validate recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml
      kit bench --target http://127.0.0.1:8000 recipes/cpu-tiny.yaml
    """
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
):
    main.add_command(_command)
