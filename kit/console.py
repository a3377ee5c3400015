"""What a person sees of a command: kit's log lines on stderr, and the one place an error becomes
a message and an exit code, for the CLI and the containers alike (library code never prints)."""

from __future__ import annotations

import logging
import os
import sys
import traceback

import click

from kit.errors import ServerError, Terminated, to_kit_error

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process it ended


def report_error(exc: BaseException) -> int:
    """``error:`` lines, the server's log tail, then the ``hint:`` line, all on stderr; returns
    the exit code. The one place an error becomes a message, for the CLI and the containers:
    any exception, through :func:`kit.errors.to_kit_error`; ``KIT_DEBUG=1`` adds the
    traceback first."""
    if os.environ.get("KIT_DEBUG") == "1":
        traceback.print_exception(exc)
    if isinstance(exc, Terminated):
        click.echo("error: stopped by SIGTERM", err=True)
        return EXIT_TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        click.echo("error: interrupted", err=True)
        return EXIT_INTERRUPTED
    err = to_kit_error(exc)
    for line in err.message.splitlines() or [""]:
        click.echo(f"error: {line}", err=True)
    if isinstance(err, ServerError) and err.log_tail:
        click.echo("server log (last lines):", err=True)
        click.echo(err.log_tail, err=True)
    for line in (err.hint or "").splitlines():
        click.echo(f"hint: {line}", err=True)
    return err.exit_code


def setup_logging(level: int) -> None:
    """kit's log lines, message only, on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("kit")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
