"""``kit build``, ``kit serve``, ``kit bench`` and ``kit reproduce``: the stages of a run."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from kit.cli.options import (
    F,
    base_url,
    examples,
    fail_on_option,
    set_option,
    sign_options,
)
from kit.errors import EXIT_ENVIRONMENT, ServerError
from kit.recipe import load_recipe
from kit.recipe.protocol import REFERENCE_PROTOCOL

if TYPE_CHECKING:
    from kit.report.schema import Report

log = logging.getLogger(__name__)


def _out_option(f: F) -> F:
    return click.option(
        "-o",
        "--out",
        "out_dir",
        default="reports",
        show_default=True,
        type=click.Path(file_okay=False),
        help="Directory for run folders.",
    )(f)


def _serve_options(f: F) -> F:
    """``--port`` and ``--engine-python``: where and with which engine the server runs."""
    f = click.option(
        "--engine-python",
        default=None,
        help="Use this interpreter's installed engine instead of kit's own venv.",
    )(f)
    return click.option(
        "--port",
        type=click.IntRange(1, 65535),
        default=None,
        help="Port to serve on (default: a free one).",
    )(f)


def _runtime_option(text: str) -> Callable[[F], F]:
    return click.option(
        "--runtime",
        type=click.Choice(["native", "compose"]),
        default="native",
        show_default=True,
        help=text,
    )


def _trust_options(f: F) -> F:
    """``--report-key``, ``--allow-untrusted``, ``--allow-unsigned``: who a shared report
    (``kit reproduce REPORT.json``) must be signed by."""
    f = click.option(
        "--allow-unsigned",
        is_flag=True,
        help="REPORT.json: re-run an unsigned report (nothing then shows who wrote it or that "
        "it is unaltered).",
    )(f)
    f = click.option(
        "--allow-untrusted",
        is_flag=True,
        help="REPORT.json: re-run a report whose signer is neither given nor trusted (its "
        "signature then proves nothing; a tampered report cannot be told apart).",
    )(f)
    return click.option(
        "--report-key",
        "report_key",
        type=click.Path(dir_okay=False),
        help="REPORT.json: the public key (.pub) it must be signed with; without it, the "
        "trusted keys (`kit keys trust`).",
    )(f)


def _echo_run(report: Report, where: Path, code: int | None = None) -> None:
    """The summary table on stderr, the report's path on stdout; then exit ``code`` (default:
    3 unless complete)."""
    from kit.report.show import summary_table

    click.echo(summary_table(report), err=True)
    click.echo(str(where))
    if code is None:
        code = EXIT_ENVIRONMENT if report.status != "complete" else 0
    if code:
        sys.exit(code)


@click.command("build", epilog=examples("kit build recipes/cpu-tiny.yaml"))
@click.argument("path", type=click.Path())
@set_option
def build(path: str, overrides: tuple[str, ...]) -> None:
    """Build the model: fetch or synthesise it, then quantize (both cached)."""
    from kit.build import build as build_stage

    built = build_stage(load_recipe(path, overrides))
    out = {
        "model": built.model.model_dump(mode="json"),
        "draft": built.draft.model_dump(mode="json") if built.draft else None,
        "quantization": built.quantization.model_dump(mode="json") if built.quantization else None,
    }
    click.echo(json.dumps(out, indent=2))


@click.command(
    "serve",
    epilog=examples(
        "kit serve recipes/cpu-tiny.yaml --port 8000",
        "kit serve recipes/cpu-tiny-2nodes.yaml --node-rank 1",
    ),
)
@click.argument("path", type=click.Path())
@set_option
@_serve_options
@click.option(
    "--node-rank",
    type=click.IntRange(min=1),
    default=None,
    help="Run only worker node R of a recipe with server.nodes (headless), for a node on "
    "another host; the head is started by kit serve or kit reproduce without it.",
)
def serve(
    path: str,
    overrides: tuple[str, ...],
    port: int | None,
    engine_python: str | None,
    node_rank: int | None,
) -> None:
    """Build if needed, then serve the recipe's model until Ctrl-C."""
    from kit.pipeline import serve as serve_recipe
    from kit.pipeline import serve_node
    from kit.serve import install_sigterm_handler

    install_sigterm_handler()
    loaded = load_recipe(path, overrides)
    if node_rank is not None:
        node_log = Path("reports") / f"serve-{loaded.recipe.name}.node{node_rank}.log"
        code = serve_node(loaded, node_rank, node_log, engine_python=engine_python)
        raise ServerError(f"node {node_rank} exited with code {code}", hint=f"see {node_log}")
    log_path = Path("reports") / f"serve-{loaded.recipe.name}.log"
    with serve_recipe(loaded, log_path, engine_python=engine_python, port=port) as server:
        click.echo(server.url)
        log.info(
            "serving %s at %s; Ctrl-C stops it", loaded.recipe.server.served_model_name, server.url
        )
        while server.alive():
            time.sleep(1)
        raise ServerError(server.exit_reason(), hint=f"see {log_path}")


@click.command(
    "bench",
    epilog=examples(
        "kit bench --target http://127.0.0.1:8000",
        "kit bench --target http://127.0.0.1:8000 recipes/cpu-tiny.yaml --set bench.runs=3",
        "kit bench --target http://127.0.0.1:8000 --fidelity 5 --set bench.runs=4",
    ),
)
@click.argument("path", type=click.Path(), required=False)
@click.option(
    "--target",
    required=True,
    callback=base_url,
    help="Base URL of a running OpenAI-compatible server.",
)
@set_option
@_out_option
@sign_options
@click.option(
    "--fidelity",
    "fidelity_rounds",
    type=click.IntRange(min=1),
    default=None,
    help="Instead of a report: ROUNDS of kit, kit without its samplers, an independent "
    "stdlib client and the whole kit bench in its own process, in turn on the recipe's first "
    "prompt: does kit slow the server it measures?",
)
def bench(
    path: str | None,
    target: str,
    overrides: tuple[str, ...],
    out_dir: str,
    key_path: str | None,
    no_sign: bool,
    fidelity_rounds: int | None,
) -> None:
    """Bench a running server with a recipe's protocol (default: the reference protocol)."""
    from kit.pipeline import bench_target
    from kit.signing import signing_key

    loaded = load_recipe(path or str(REFERENCE_PROTOCOL), overrides)
    if fidelity_rounds is not None:
        from kit.fidelity import bench_fidelity, fidelity_table

        result, out = bench_fidelity(target, loaded, fidelity_rounds, Path(out_dir))
        click.echo(fidelity_table(result), err=True)
        click.echo(str(out))
        return
    key = signing_key(key_path, not no_sign)
    _echo_run(*bench_target(target, loaded, Path(out_dir), key))


@click.command(
    "preflight",
    epilog=examples(
        "kit preflight recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml --runtime compose",
        "kit preflight recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml --rig 2x24",
        "kit preflight recipes/cpu-tiny.yaml --port 8000 -o /tmp/reports",
    ),
)
@click.argument("path", type=click.Path())
@set_option
@_out_option
@_serve_options
@_runtime_option("Check for a native run, or for the container stack (adds the image pin).")
@click.option(
    "--rig",
    default=None,
    metavar="NxGIB",
    help="Check against N cards of GIB GiB each (e.g. 2x24) instead of this machine's GPUs.",
)
def preflight(
    path: str,
    overrides: tuple[str, ...],
    out_dir: str,
    port: int | None,
    engine_python: str | None,
    runtime: str,
    rig: str | None,
) -> None:
    """Check every pin and resource a run needs, before any download, build or quantization:
    a table on stdout (each item ok, FAILED or not checked, then the hints of those not checked
    and how many), every problem at once on stderr. Exit 2 when the recipe is at fault (a
    missing pin), 3 when the machine is (GPUs, memory, disk, CPU, the port, the output folder,
    the engine's package index); items not checked (a size not known offline) fail nothing.
    `kit reproduce` runs the same checks first, with the same --port, -o and --engine-python.
    """
    from kit.preflight import assumed_rig, refuse, table
    from kit.runtimes import BY_NAME, Place

    loaded = load_recipe(path, overrides)
    cards = assumed_rig(rig) if rig else None
    place = Place(port, Path(out_dir), engine_python)
    items = BY_NAME[runtime].for_recipe(loaded.recipe).checks(loaded, place, cards)
    click.echo(table(items))
    refuse(loaded.recipe.name, items)


REPRODUCE_HELP = """All stages: build, serve, bench, report (signed when a key is available). The
recipe's lock file applies where there is one (`kit lock`); --resolve writes it first.

PATH may also be a shared report (REPORT.json): it is verified first (exit 1 on a bad
signature or a tampered file), its embedded recipe is run natively with the pins it ran with
(its patch series must be this checkout's), and the new report ends with the verdict on this run
against it: REPRODUCED (exit 0), DIFFERENT (which figures, which way, and the likely
causes; exit 4, see --fail-on), INCONCLUSIVE (a side INVALID or a band too wide; exit 5)
or NOT COMPARABLE (exit 1). --set makes the run a variation.

A recipe whose reference has load points (`kit import` of another tool's result file) ends
likewise with this run's points judged against the file's, point by point and overall, and
exits by that verdict.
"""


@click.command(
    "reproduce",
    help=REPRODUCE_HELP,
    epilog=examples(
        "kit reproduce recipes/cpu-tiny.yaml",
        "kit reproduce recipes/cpu-tiny.yaml --set bench.runs=3 -o /tmp/reports",
        "kit reproduce --runtime compose recipes/cpu-tiny.yaml",
        "kit reproduce shared/report.json --report-key their.pub",
    ),
)
@click.argument("path", type=click.Path())
@set_option
@_out_option
@_serve_options
@sign_options
@_runtime_option("Serve natively, or run the whole stack in containers (compose.yaml).")
@click.option(
    "--resolve",
    is_flag=True,
    help="Resolve what the recipe leaves open and write its lock first (as `kit lock`; the "
    "base image only with --runtime compose).",
)
@_trust_options
@fail_on_option
def reproduce(
    path: str,
    overrides: tuple[str, ...],
    out_dir: str,
    port: int | None,
    engine_python: str | None,
    key_path: str | None,
    no_sign: bool,
    runtime: Literal["native", "compose"],
    resolve: bool,
    report_key: str | None,
    allow_untrusted: bool,
    allow_unsigned: bool,
    fail_on: str,
) -> None:
    from kit.reproduce import ReportTrust, ReproduceRequest
    from kit.reproduce import reproduce as run
    from kit.serve import install_sigterm_handler

    install_sigterm_handler()
    trust = ReportTrust(Path(report_key) if report_key else None, allow_untrusted, allow_unsigned)
    request = ReproduceRequest(
        path=path,
        overrides=overrides,
        runtime=runtime,
        out_dir=Path(out_dir),
        port=port,
        engine_python=engine_python,
        key_path=key_path,
        sign=not no_sign,
        resolve=resolve,
        trust=trust,
        fail_on=fail_on,
    )
    result = run(request)
    for verdict in (result.report.reproduction, result.points):
        if verdict is not None:
            click.echo(verdict.text(), err=True)
    _echo_run(result.report, result.path, result.exit_code)
