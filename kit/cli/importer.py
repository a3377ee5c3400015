"""``kit import``: another tool's result file as a recipe whose reference is its figures."""

from __future__ import annotations

from pathlib import Path

import click

from kit.cli.options import examples
from kit.errors import BadInputError

DEFAULT_BASE = Path("recipes") / "cpu-tiny.yaml"


def default_base() -> Path:
    """recipes/cpu-tiny.yaml of the current directory, else of kit's own checkout."""
    if DEFAULT_BASE.is_file():
        return DEFAULT_BASE
    checkout = Path(__file__).resolve().parents[2] / DEFAULT_BASE
    if checkout.is_file():
        return checkout
    raise BadInputError(
        f"no base recipe: {DEFAULT_BASE} is not here",
        hint="name one with --base recipes/NAME.yaml",
    )


@click.command(
    "import",
    epilog=examples(
        "kit import result.json -o recipes/imported.yaml",
        "kit import out.json --base recipes/musgrave-llama3.1-8b-1xa100-concurrency.yaml",
        "kit import bench.log --base recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml -o mine.yaml",
        "kit import BENCHMARKS.md --row '@noonghunna 2026-05-03' -o row.yaml",
    ),
)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the recipe here (validated first; nothing is written when it does not "
    "validate). Without it the complete recipe goes to stdout.",
)
@click.option(
    "--base",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The recipe the import extends: its build and serving, the file's model, load, "
    "dataset shape and figures over them (default: recipes/cpu-tiny.yaml).",
)
@click.option(
    "--row",
    help="Which row of a Club-3090 BENCHMARKS.md to import: its line number, or words of its "
    "Rig and Date cells that only it holds ('@noonghunna 2026-05-03').",
)
def import_file(file: Path, output: Path | None, base: Path | None, row: str | None) -> None:
    """Read FILE, a result of vllm bench serve/sweep or the Rust vllm-bench, guidellm, AIPerf
    (a run or a sweep), SGLang bench_serving, LLMPerf, MLPerf LoadGen, or Club-3090 (a bench.sh
    log, a BENCHMARKS.md row), told apart by content, and write a recipe: the file's model,
    load or protocol over the base recipe, its figures as the reference, and a comment block
    with the open pins (what the file does not say) and every value carried or defaulted. Says
    what it detected on stderr. A file kit cannot use exits 2 with the reason (all requests
    failed, no figures, an unknown layout) and writes nothing.
    """
    from kit.importers import import_file as run_import

    done = run_import(file, base=base or default_base(), out=output, row=row)
    imp = done.imported
    version = imp.tool_version or "version not stated"
    click.echo(f"detected: {imp.tool} ({version}; {imp.layout})", err=True)
    for point in imp.points:
        f = point.figures
        shown = [
            f"{name} {value:.4g}"
            for name, value in (
                ("output tok/s", f.output_tps),
                ("req/s", f.request_throughput),
                ("TTFT p99 ms", f.ttft_ms.p99 if f.ttft_ms else None),
            )
            if value is not None
        ]
        click.echo(f"  {point.label}: {', '.join(shown) or 'no throughput'}", err=True)
    for name, figs in imp.prompts.items():
        said = [
            f"{what} {value:.4g}"
            for what, value in (
                ("decode tok/s", figs.decode_tps),
                ("wall tok/s", figs.wall_tps),
                ("TTFT ms", figs.ttft_ms),
            )
            if value is not None
        ]
        click.echo(f"  {name}: {', '.join(said)}", err=True)
    for depth, tps in imp.prefill_tps.items():
        click.echo(f"  prefill {depth}: {tps:.4g} tok/s", err=True)
    if imp.reference_only:
        click.echo(f"reference-only: {imp.reference_only}", err=True)
    for pin in imp.open_pins:
        click.echo(f"open pin: {pin.field}: {pin.reason}", err=True)
    for warning in imp.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(str(done.path) if done.path is not None else done.recipe, nl=done.path is not None)
