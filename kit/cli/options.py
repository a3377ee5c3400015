"""Options that several command groups share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

SET_HELP = "Override a recipe value, validated like the file (repeatable): --set a.b=value"


def examples(*lines: str) -> str:
    """A command's ``epilog``: its examples, printed after Options as written (``\\b`` stops
    click from rewrapping them); a line may hold a newline for a continued command."""
    head = "Example:" if len(lines) == 1 else "Examples:"
    body = "\n".join("  " + line.replace("\n", "\n  ") for line in lines)
    return f"\b\n{head}\n{body}"


def base_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: ``value`` must be an http(s) URL with a host, else a BadInputError
    that names the option (exit 2), before any request."""
    from urllib.parse import urlsplit

    from kit.errors import BadInputError

    if value is None:
        return None
    option = param.opts[0] if param.opts else str(param.name)
    hint = f"{option} takes a server's base URL, such as {option} http://127.0.0.1:8000"
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unclosed [IPv6]
        ok = False
    if not ok:
        raise BadInputError(f"{option} {value}: not an http(s) URL with a host", hint=hint)
    try:
        port = parts.port
    except ValueError:  # not a number, or not in 0-65535
        digits = parts.netloc.rpartition(":")[2]
        if not digits.isdigit():
            raise BadInputError(
                f"{option} {value}: the port {digits!r} is not a number", hint=hint
            ) from None
        port = int(digits)
    if port is not None and not 0 < port < 65536:
        raise BadInputError(f"{option} {value}: port {port} is out of range (1-65535)", hint=hint)
    return value


def set_option(f: F) -> F:
    """``--set a.b=value`` (repeatable), passed on as ``overrides``."""
    return click.option("--set", "overrides", multiple=True, help=SET_HELP)(f)


def sign_options(f: F) -> F:
    """``--key`` and ``--no-sign``: how the report is signed."""
    f = click.option("--no-sign", is_flag=True, help="Write an unsigned report.")(f)
    return click.option(
        "--key",
        "key_path",
        default=None,
        type=click.Path(dir_okay=False),
        help="Private key to sign with (default: $KIT_SIGNING_KEY, else kit's config dir).",
    )(f)


FAIL_ON_WORDS = ("different", "worse", "never")


def _fail_on(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """different, worse, never, or figure keys of the figure table, comma-separated."""
    from kit.figures import BY_KEY  # lazy: the CLI imports each command's stages inside it

    if value in FAIL_ON_WORDS:
        return value
    keys = [k.strip() for k in value.split(",") if k.strip()]
    unknown = [k for k in keys if k not in BY_KEY]
    if not keys or unknown:
        raise click.BadParameter(
            f"{', '.join(unknown) or repr(value)}: not {', '.join(FAIL_ON_WORDS)} or a figure "
            f"key ({', '.join(sorted(BY_KEY))}; docs/figures.md)"
        )
    return ",".join(keys)


def fail_on_option(f: F) -> F:
    """``--fail-on``: which DIFFERENT verdict exits 4 (kit.report.verdict.verdict_exit)."""
    return click.option(
        "--fail-on",
        default="different",
        show_default=True,
        callback=_fail_on,
        metavar="different|worse|never|KEY[,KEY...]",
        help="Which DIFFERENT verdict exits 4: any, only one with a worse (slower) or missing "
        "figure, none, or only one where a figure of these keys (docs/figures.md: decode_tps, "
        "ttft_ms, ...) is outside or missing. NOT COMPARABLE exits 1 and INCONCLUSIVE 5 "
        "whatever it says.",
    )(f)


def exit_by_verdict(verdict: Any, fail_on: str) -> None:
    """Exit with the verdict's code (0 REPRODUCED returns)."""
    import sys

    from kit.report.verdict import verdict_exit

    code = verdict_exit(verdict, fail_on)
    if code:
        sys.exit(code)
