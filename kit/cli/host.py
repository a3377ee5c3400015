"""``kit probe``: what this host is."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from kit.cli.options import examples

if TYPE_CHECKING:
    from kit.probe import HostProbe


def _probe_lines(host: HostProbe) -> list[str]:
    """One line for the host, then one per GPU (or why there are none)."""
    lines = [f"host: {host.os.name}, {host.cpu.model}, {host.cpu.logical_cores} CPUs"]
    if not host.gpus:
        lines.append(f"gpus: none ({host.nvml_error})")
    for g in host.gpus:
        lines.append(
            f"gpu {g.index}: {g.name}, {g.memory_total_mib} MiB, power limit "
            f"{g.power.limit_w} W, PCIe gen {g.pcie.gen_current}/{g.pcie.gen_max} "
            f"x{g.pcie.width_current}/{g.pcie.width_max}"
        )
    return lines


@click.command("probe", epilog=examples("kit probe", "kit probe --json > host.json"))
@click.option("--json", "as_json", is_flag=True, help="Print the full probe as JSON.")
@click.option("--no-redact", is_flag=True, help="Keep host name, paths, UUIDs and serials.")
def probe(as_json: bool, no_redact: bool) -> None:
    """Probe this host: GPUs (NVML), PCIe, NVLink, P2P, power limits, CPU, OS."""
    from kit.probe import probe_host, probe_to_json

    host = probe_host(redact=not no_redact)
    click.echo(probe_to_json(host) if as_json else "\n".join(_probe_lines(host)))
