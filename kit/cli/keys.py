"""``kit keys``: the signing keys for reports."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.group("keys")
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
    from kit.signing import generate_keypair

    pair = generate_keypair(Path(dest) if dest else None, name, force=force)
    data = {
        "private_key": str(pair.private_key),
        "public_key": str(pair.public_key),
        "fingerprint": pair.fingerprint,
    }
    click.echo(json.dumps(data, indent=2))
