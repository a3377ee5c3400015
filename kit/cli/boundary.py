"""The CLI's one error boundary: every exception from a command, click's own usage errors
included, becomes kit's ``error:``/``hint:`` lines on stderr (:func:`kit.console.report_error`)
and the documented exit code; a hint's ``RECIPE`` names the recipe the command was given."""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any

import click
from click.exceptions import NoArgsIsHelpError

from kit.console import report_error
from kit.errors import BadInputError, KitError, to_kit_error

_LEAF = "kit.innermost"  # ctx.meta key: the innermost context (meta is shared down the chain)
# the word RECIPE of a hint, not RECIPE= (make's) nor RECIPE.lock.yaml
_RECIPE = re.compile(r"\bRECIPE\b(?![=\w]|\.\w)")
_RECIPE_SUFFIXES = (".yaml", ".yml")


class KitContext(click.Context):
    """A click context that notes itself as the innermost one, so that the boundary knows the
    command that failed and the arguments it was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.meta[_LEAF] = self


class KitGroup(click.Group):
    """The top-level group: the one error boundary. Every exception from a command but a
    deliberate exit (``ctx.exit``, ``sys.exit``, a group's help when called bare) becomes
    'error:'/'hint:' lines and the documented exit code; click's usage errors exit 2."""

    context_class = KitContext

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        _use_kit_context(cmd)
        super().add_command(cmd, name)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except NoArgsIsHelpError:
            raise
        except click.ClickException as exc:  # `kit --bogus`: before any context exists
            sys.exit(report_error(usage_error(exc)))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, NoArgsIsHelpError):
            raise
        except click.ClickException as exc:
            ctx.exit(report_error(usage_error(exc, ctx.meta.get(_LEAF))))
        except KeyboardInterrupt as exc:
            ctx.exit(report_error(exc))
        except Exception as exc:
            err = to_kit_error(exc)
            err.hint = fill_recipe(err.hint, ctx.meta.get(_LEAF))
            ctx.exit(report_error(err))


def _use_kit_context(cmd: click.Command) -> None:
    cmd.context_class = KitContext
    for sub in getattr(cmd, "commands", {}).values():
        _use_kit_context(sub)


def fill_recipe(hint: str, ctx: click.Context | None) -> str:
    """``hint`` with its ``RECIPE`` placeholder replaced by the recipe file the command was
    given (its ``path`` argument, when that names a .yaml file), quoted for a shell."""
    path = ctx.params.get("path") if ctx is not None else None
    if not isinstance(path, str) or not path.endswith(_RECIPE_SUFFIXES):
        return hint
    return _RECIPE.sub(lambda _: shlex.quote(path), hint)


def usage_error(exc: click.ClickException, innermost: click.Context | None = None) -> KitError:
    """Click's own error (an unknown option, a missing argument, a directory where a file
    goes) as a BadInputError, exit 2: the command and what was wrong, then a hint that says
    what to do and the command's usage line. ``innermost`` stands in for the error's context
    where click gave it none."""
    ctx = getattr(exc, "ctx", None) or innermost
    command = ctx.command_path if ctx is not None else "kit"
    hints: list[str] = []
    if isinstance(exc, click.NoSuchOption | click.exceptions.NoSuchCommand):
        message = _sentence(exc.message)
        if exc.possibilities:
            hints.append(f"did you mean {' or '.join(exc.possibilities)}?")
    elif isinstance(exc, click.MissingParameter) and exc.param is not None:
        kind = exc.param_type or exc.param.param_type_name
        message = f"missing {kind} {_param_name(exc, ctx)}"
    elif isinstance(exc, click.BadParameter):
        name = _param_name(exc, ctx)
        message = f"{name}: {_sentence(exc.message)}" if name else _sentence(exc.message)
        hints.extend(_path_hints(exc, ctx))
    else:
        message = _sentence(exc.format_message())
    if ctx is not None:
        usage = " ".join(ctx.get_usage().split())
        hints.append(f"{usage} (`{command} --help` says more)")
    err = BadInputError(f"{command}: {message}", hint="\n".join(hints) or None)
    err.__cause__ = exc
    return err


def _sentence(text: str) -> str:
    """Click's sentence as kit writes a message: lower case first, no full stop."""
    text = text.strip().removesuffix(".")
    return text[:1].lower() + text[1:]


def _param_name(exc: click.BadParameter, ctx: click.Context | None) -> str:
    """The option or argument a bad value was given to: ``--key``, ``PATHS``."""
    if exc.param_hint is not None:
        hint = exc.param_hint if isinstance(exc.param_hint, str) else " / ".join(exc.param_hint)
    elif exc.param is not None:
        hint = str(exc.param.get_error_hint(ctx)) if ctx is not None else str(exc.param.name)
    else:
        return ""
    return hint.replace("'", "").removesuffix("...")


def _takes(ctx: click.Context, name: str) -> bool:
    return any(p.name == name for p in ctx.command.params)


def _path_hints(exc: click.BadParameter, ctx: click.Context | None) -> list[str]:
    """What to give instead of a path click refused (a directory, an unreadable file)."""
    text = exc.message
    param = exc.param.name if exc.param is not None else None
    if "is a directory" in text:
        if param == "key_path" and ctx is not None and _takes(ctx, "keys_dir"):
            return ["--key takes one public key file; --keys DIR takes a folder of them"]
        return ["name a file there, not the folder (a run's folder holds report.json)"]
    if "is not readable" in text:
        return ["check the file's permissions (ls -l), or read it as its owner"]
    if "does not exist" in text:
        return ["check the path"]
    return []
