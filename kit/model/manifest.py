"""What the model stage records: the sha256 of every file of a model directory, the
:class:`ModelManifest` kept beside it, and the way back from a manifest to its directory.

The manifest's ``identity`` (a hash over the file hashes) keys the quantization cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from kit.base import KitModel
from kit.paths import kit_home

log = logging.getLogger(__name__)

MANIFEST = "kit-model-manifest.json"


class FileHash(KitModel):
    path: str = Field(description="Path relative to the model directory.")
    size: int = Field(description="Size in bytes.")
    sha256: str = Field(description="sha256 of the file.")


class ModelManifest(KitModel):
    """What the model stage produced."""

    role: Literal["target", "draft"] = Field(description="Target model or speculative draft.")
    source: Literal["hub", "local", "synthetic"] = Field(description="Where it came from.")
    repo_id: str | None = Field(None, description="Hub repository id.")
    revision: str | None = Field(None, description="Revision asked for.")
    resolved_revision: str | None = Field(None, description="Commit sha the hub resolved.")
    spec: dict[str, Any] | None = Field(None, description="Synthetic spec (shape, seed).")
    architecture: str | None = Field(None, description="config.json architectures[0].")
    parameters: int | None = Field(None, description="Parameter count, when known.")
    files: list[FileHash] = Field(description="Every file with its sha256.")
    identity: str = Field(description="sha256 over the file hashes: the model's content id.")
    directory: str = Field(description="Where it lies, relative to KIT_HOME when inside it.")
    duration_s: float = Field(description="Time the stage took (0 on a cache hit).")
    cached: bool = Field(description="Whether this run reused an earlier result.")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def hash_tree(root: Path, skip: tuple[str, ...] = (MANIFEST,)) -> list[FileHash]:
    files = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name not in skip and ".cache" not in p.relative_to(root).parts:
            files.append(
                FileHash(
                    path=str(p.relative_to(root)), size=p.stat().st_size, sha256=sha256_file(p)
                )
            )
    return files


def identity_of(files: list[FileHash]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.path}\0{f.sha256}\n".encode())
    return h.hexdigest()


def read_manifest(directory: Path) -> ModelManifest | None:
    """The manifest kept in ``directory``; None when there is none or it cannot be read."""
    path = directory / MANIFEST
    if not path.exists():
        return None
    try:
        return ModelManifest.model_validate_json(path.read_text())
    except ValueError:
        log.warning("ignoring unreadable manifest %s", path)
        return None


def write_manifest(directory: Path, manifest: ModelManifest) -> None:
    tmp = directory / (MANIFEST + ".tmp")
    tmp.write_text(manifest.model_dump_json(indent=2))
    os.replace(tmp, directory / MANIFEST)


def architecture(directory: Path) -> str | None:
    """``architectures[0]`` of the directory's config.json, when it has one."""
    try:
        cfg = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return None
    arch = cfg.get("architectures") or [None]
    return str(arch[0]) if arch[0] else None


def model_dir(manifest: ModelManifest) -> Path:
    d = manifest.directory
    if d.startswith("$KIT_HOME/"):
        return kit_home() / d[len("$KIT_HOME/") :]
    if d.startswith("~/"):
        return Path.home() / d[2:]
    return Path(d)
