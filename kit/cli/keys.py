"""``kit keys``: the signing keys for reports."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kit.cli.options import examples


@click.group(
    "keys",
    epilog=examples("kit keys generate", "kit keys trust ./alice.pub", "kit keys list"),
)
def keys() -> None:
    """Signing keys for reports, and the keys trusted to have signed them."""


@keys.command(
    "generate",
    epilog=examples("kit keys generate", "kit keys generate --dir ./keys --name lab-rig"),
)
@click.option(
    "--dir",
    "dest",
    default=None,
    type=click.Path(file_okay=False),
    help="Where to write the key pair (default: kit's config dir).",
)
@click.option("--name", default="kit", show_default=True, help="File name stem.")
@click.option("--force", is_flag=True, help="Replace an existing key pair.")
@click.option(
    "--no-trust", is_flag=True, help="Do not add the new public key to this install's trust store."
)
def keys_generate(dest: str | None, name: str, force: bool, no_trust: bool) -> None:
    """Write an Ed25519 key pair (private key mode 0600), trust its public key here (your own
    reports then verify without --key), and print the fingerprint.
    """
    from kit.signing import TrustStore, generate_keypair

    pair = generate_keypair(Path(dest) if dest else None, name, force=force)
    data: dict[str, object] = {
        "private_key": str(pair.private_key),
        "public_key": str(pair.public_key),
        "fingerprint": pair.fingerprint,
    }
    if not no_trust:
        data["trusted_as"] = TrustStore.default().add_own(pair.public_key).name
    click.echo(json.dumps(data, indent=2))


@keys.command(
    "export",
    epilog=examples("kit keys export > kit.ssh.pub", "kit keys export ./lab-rig.pub --format pem"),
)
@click.argument("pub", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openssh", "pem"]),
    default="openssh",
    show_default=True,
    help="openssh: one `ssh-ed25519 AAAA...` line, as ssh-keygen reads; pem: as kit writes.",
)
def keys_export(pub: str | None, fmt: str) -> None:
    """Print the public key PUB (PEM or OpenSSH; default: kit.pub in kit's config dir) in
    another form. Every command that reads a .pub accepts both forms.
    """
    from kit.paths import default_config_dir
    from kit.signing import load_public_key, public_key_bytes

    path = Path(pub) if pub else default_config_dir() / "kit.pub"
    key = load_public_key(path)
    click.echo(public_key_bytes(key, "openssh" if fmt == "openssh" else "pem"), nl=False)


@keys.command(
    "trust",
    epilog=examples(
        "kit keys trust ./alice.pub", "kit keys trust ~/Downloads/kit.pub --name lab-rig"
    ),
)
@click.argument("pub", type=click.Path(dir_okay=False))
@click.option("--name", default=None, help="Name in the trust store (default: PUB's file stem).")
def keys_trust(pub: str, name: str | None) -> None:
    """Trust the Ed25519 public key PUB (PEM, or OpenSSH `ssh-ed25519 ...`): `kit report
    verify`, `show` and `compare` then accept reports it signed without --key. Prints the name
    and fingerprint; check the fingerprint with the key's owner first.
    """
    from kit.signing import TrustStore

    entry = TrustStore.default().add(Path(pub), name)
    click.echo(json.dumps(entry.model_dump(mode="json"), indent=2))


@keys.command("list", epilog=examples("kit keys list"))
def keys_list() -> None:
    """Print the trusted keys (name, fingerprint, file) as JSON."""
    from kit.signing import TrustStore

    entries = [entry.model_dump(mode="json") for entry in TrustStore.default().trusted()]
    click.echo(json.dumps(entries, indent=2))


@keys.command(
    "untrust", epilog=examples("kit keys untrust lab-rig", "kit keys untrust sha256:3f2a...")
)
@click.argument("name_or_fingerprint")
def keys_untrust(name_or_fingerprint: str) -> None:
    """Stop trusting a key, named by its trust-store name or its fingerprint; a unique prefix
    of the fingerprint (4 or more hex digits) will do.
    """
    from kit.signing import TrustStore

    entry = TrustStore.default().remove(name_or_fingerprint)
    click.echo(json.dumps(entry.model_dump(mode="json"), indent=2))
