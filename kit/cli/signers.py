"""What the report readers share: the signer options (--key, --keys, --allow-untrusted,
--allow-unsigned) and the public key and trust store they name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

PUB_HELP = "Public key (.pub) the report must be signed with; without it the signature is "
PUB_HELP += "checked against the trusted keys (`kit keys trust`)."
_UNTRUSTED_HELP = "Read a report signed by a key that is neither given nor trusted: its "
_UNTRUSTED_HELP += "signature is then not checked and the run is labelled UNTRUSTED."
_UNSIGNED_HELP = "Read an unsigned report: its signature is then not checked instead of failed."
_KEYS_HELP = "Folder of signers' public keys (every *.pub in it, e.g. examples/keys): each "
_KEYS_HELP += "report is checked against the one whose fingerprint its signature names, in place "
_KEYS_HELP += "of the trusted keys."


def public_key(path: str | None) -> Any:
    from kit.signing import load_public_key

    return load_public_key(Path(path)) if path else None


def trust_store(key: Any) -> Any:
    """The trust store, consulted only without --key."""
    from kit.signing import TrustStore

    return None if key is not None else TrustStore.default()


def signers(key_path: str | None, keys_dir: str | None) -> tuple[Any, Any]:
    """(public key, trust store) for the readers: --key PUB, else --keys DIR (each report
    matched to its key by fingerprint), else kit's trust store."""
    if key_path and keys_dir:
        from kit.errors import BadInputError

        raise BadInputError(
            "--key and --keys both given",
            hint="--key PUB checks every report against one key; --keys DIR matches each "
            "report to the key in DIR whose fingerprint its signature names",
        )
    if keys_dir:
        from kit.report.table import keys_store

        return None, keys_store(Path(keys_dir))
    key = public_key(key_path)
    return key, trust_store(key)


def keys_option(f: Any) -> Any:
    return click.option("--keys", "keys_dir", type=click.Path(file_okay=False), help=_KEYS_HELP)(f)


def allow_untrusted_option(f: Any) -> Any:
    return click.option("--allow-untrusted", is_flag=True, help=_UNTRUSTED_HELP)(f)


def allow_unsigned_option(f: Any) -> Any:
    return click.option("--allow-unsigned", is_flag=True, help=_UNSIGNED_HELP)(f)
