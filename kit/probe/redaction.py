"""Keyed redaction: identifiers in a probe become ``redacted:`` and 16 hex digits of an
HMAC-SHA256 under a secret of this install (:func:`redact_value`, :func:`redaction_secret`);
the free text of ``$container`` is reduced to a known runtime's name (:func:`runtime_name`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path

from kit.errors import BadInputError
from kit.paths import FileTooLarge, NotRegularFile, default_config_dir, read_regular

log = logging.getLogger(__name__)

SECRET_FILE = "redaction.key"
ENV_SECRET = "KIT_REDACTION_KEY"  # a secret file given to this process (a container's)
NO_SECRET = "/dev/null"
_SECRET_BYTES = 32
_process_secret: bytes | None = None


def redact_value(value: str, secret: bytes | None = None) -> str:
    """A stable stand-in for an identifier: ``redacted:`` and 16 hex digits of its HMAC-SHA256
    under ``secret`` (by default the install's, see :func:`redaction_secret`)."""
    key = redaction_secret() if secret is None else secret
    digest = hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()
    return "redacted:" + digest[:16]


def redaction_secret(config_dir: Path | None = None) -> bytes:
    """The install's redaction secret, made on first use.

    The secret (``redaction.key`` in kit's config dir, 32 random bytes as hex, mode 0600) is
    made once, on the first redacted probe, and reused after: the reports of one install name
    the same host by the same stand-in, so they correlate, while nobody without the secret can
    reverse a stand-in by hashing a list of likely host names. Where the config dir cannot be
    written (a read-only container home), the process uses a secret of its own, with a warning:
    its stand-ins then match within the run only. A container is given the host's secret as a
    file (``$KIT_REDACTION_KEY``, a compose secret: :func:`secret_file` on the host), so a
    compose run names the host as a native run of the same install does."""
    given = os.environ.get(ENV_SECRET, "") if config_dir is None else ""
    if given and given != NO_SECRET:
        try:
            return _read_secret(Path(given))
        except OSError as e:
            return _fallback(f"cannot read ${ENV_SECRET} ({given}): {e.strerror}")
    path = (default_config_dir() if config_dir is None else config_dir) / SECRET_FILE
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        return _fallback(f"cannot read {path}: {e.strerror}")
    try:
        return _create_secret(path)
    except FileExistsError:  # another process made it first
        return _read_secret(path)
    except OSError as e:
        return _fallback(f"cannot create {path}: {e.strerror}")


def secret_file() -> Path | None:
    """The install's secret file, made if need be, for a container to be given; None (with the
    warning) when it cannot be made here."""
    path = default_config_dir() / SECRET_FILE
    redaction_secret()
    return path.resolve() if path.is_file() else None


def _read_secret(path: Path) -> bytes:
    try:
        data, info = read_regular(path, 4 * _SECRET_BYTES)
    except NotRegularFile:
        raise BadInputError(f"{path}: not a regular file", hint=f"remove {path}") from None
    except FileTooLarge:
        data, info = b"", os.stat(path)  # refused below as not a secret
    text = data.decode("ascii", errors="replace").strip()
    if info.st_mode & 0o077:
        log.warning("probe: %s is readable by others; `chmod 600 %s`", path, path)
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != _SECRET_BYTES:
        raise BadInputError(
            f"{path}: not a kit redaction secret ({2 * _SECRET_BYTES} hex digits)",
            hint=f"remove {path}: kit makes a new one (host stand-ins then change)",
        )
    return secret


def _create_secret(path: Path) -> bytes:
    """Write a new secret in a private temporary file, then link it into place: the name never
    shows a half-written secret, and of two processes racing only one link succeeds."""
    secret = secrets.token_bytes(_SECRET_BYTES)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    try:
        _write_exclusive(partial, secret)
        try:
            os.link(partial, path)
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: create the name itself
            _write_exclusive(path, secret)
    finally:
        partial.unlink(missing_ok=True)
    return secret


def _write_exclusive(path: Path, secret: bytes) -> None:
    # O_EXCL: never write through an existing file or symlink; the mode is set at creation.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)  # the umask may have cleared bits; it never adds any
        f.write(secret.hex().encode("ascii") + b"\n")
        f.flush()
        os.fsync(f.fileno())


def _fallback(reason: str) -> bytes:
    global _process_secret
    if _process_secret is None:
        _process_secret = secrets.token_bytes(_SECRET_BYTES)
        log.warning(
            "probe: %s: host stand-ins of this run will not match other runs' "
            "(set KIT_CONFIG_DIR to a writable directory)",
            reason,
        )
    return _process_secret


# What systemd, WSL, Kubernetes and the container engines put in $container, and what kit
# detects otherwise. Anything else is "other": the variable is free text a report must not carry.
CONTAINER_RUNTIMES = frozenset(
    {
        "apptainer",
        "containerd",
        "crio",
        "docker",
        "kubernetes",
        "lxc",
        "lxc-libvirt",
        "oci",
        "openvz",
        "podman",
        "pouch",
        "proot",
        "rkt",
        "singularity",
        "systemd-nspawn",
        "wsl",
    }
)


def runtime_name(value: str) -> str:
    """A known container runtime's name for the text of ``$container``, else ``"other"``."""
    name = value.strip().lower()
    return name if name in CONTAINER_RUNTIMES else "other"
