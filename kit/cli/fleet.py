"""``kit sweep`` and ``kit fleet``: recipe sweeps here or over a Ray cluster of rigs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kit.cli.options import examples, set_option
from kit.errors import EXIT_FAILED


@click.command(
    "sweep",
    epilog=examples(
        "kit sweep recipes/cpu-tiny.yaml --vary bench.runs=3 --vary bench.runs=5",
        "kit sweep recipes/a.yaml recipes/b.yaml --ray http://head:8265 --keys rigs/ \\\n"
        "    --rig 2x-nvidia-geforce-rtx-3090-24g --rig 1x-nvidia-h200-140g",
    ),
)
@click.argument("recipes", nargs=-1, required=True, type=click.Path())
@set_option
@click.option(
    "--vary",
    multiple=True,
    metavar="KEY=VALUE",
    help="A value a key takes, one cell each (repeat: a key's values; several keys: every "
    "combination).",
)
@click.option(
    "--rig",
    "rigs",
    multiple=True,
    metavar="CLASS",
    help="Run each cell on this rig class (repeat for several; see `kit fleet resources`).",
)
@click.option(
    "-o",
    "--out",
    "out_dir",
    default="sweep",
    show_default=True,
    type=click.Path(file_okay=False),
    help="One folder per cell: report.json, cell.log, cell.json.",
)
@click.option(
    "--ray",
    "ray_address",
    default=None,
    metavar="ADDRESS",
    help="Run the cells as Ray jobs on this cluster (its dashboard, e.g. http://HEAD:8265).",
)
@click.option(
    "--keys",
    "keys_dir",
    default=None,
    type=click.Path(file_okay=False, exists=True),
    help="Folder of the rigs' public keys (.pub) the reports must be signed with (default: "
    "the keys this install trusts).",
)
@click.option(
    "--key",
    "key_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Local runs: the private key to sign with (Ray: each rig signs with its own).",
)
def sweep(
    recipes: tuple[str, ...],
    overrides: tuple[str, ...],
    vary: tuple[str, ...],
    rigs: tuple[str, ...],
    out_dir: str,
    ray_address: str | None,
    keys_dir: str | None,
    key_path: str | None,
) -> None:
    """Run RECIPES x the --vary values x the --rig classes, each cell one whole `kit
    reproduce`, and print a line per cell; with --keys, OUT/BENCHMARKS.md from the reports
    (`kit report table`). A cell whose report is already in OUT and verifies is skipped: run
    the same command again to resume. Exit 1 when a cell failed (its log is
    OUT/<cell>/cell.log), 2 on a bad recipe or --set (checked before anything runs).
    """
    from kit.fleet import expand
    from kit.fleet import sweep as run_sweep

    cells = expand(recipes, overrides, vary, rigs)
    extra = ["--key", key_path] if key_path and not ray_address else []
    results = run_sweep(
        cells,
        Path(out_dir),
        keys_dir=Path(keys_dir) if keys_dir else None,
        ray_address=ray_address,
        extra=extra,
    )
    for r in results:
        detail = r.error or f"{r.report}, signed by {(r.signed_by or '')[:19]}"
        click.echo(f"{r.status:<8} {r.cell.name}: {detail}")
    reports = [Path(out_dir) / r.report for r in results if r.report and r.status != "failed"]
    if keys_dir and reports:  # the results table of what came back, verified again
        from kit.report.table import build_table, markdown

        table = Path(out_dir) / "BENCHMARKS.md"
        table.write_text(markdown(build_table(reports, Path(keys_dir))))
        click.echo(f"table: {table}")
    if any(r.status == "failed" for r in results):
        sys.exit(EXIT_FAILED)


@click.group(
    "fleet",
    epilog=examples(
        "kit fleet resources",
        'ray start --address=HEAD:6379 --resources "$(kit fleet resources)"',
    ),
)
def fleet() -> None:
    """A Ray cluster of rigs for kit sweep (docs/fleet.md)."""


@fleet.command(
    "resources",
    epilog=examples(
        "kit fleet resources",
        'ray start --address=HEAD:6379 --resources "$(kit fleet resources)"',
    ),
)
def fleet_resources() -> None:
    """Print this machine's Ray resource, {"rig:<class>": 1}, for `ray start --resources`: the
    class from the host probe (e.g. 1x-nvidia-h200-140g, cpu-avx512)."""
    from kit.fleet import node_resources

    click.echo(json.dumps(node_resources()))
