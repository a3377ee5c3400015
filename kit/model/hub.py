"""Models that already exist: a hub repository downloaded at a pinned revision, or a local
directory. Either way every file is hashed into the manifest."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Literal

from kit.errors import BadInputError, EnvironmentProblem
from kit.model.manifest import ModelManifest, architecture, hash_tree, identity_of
from kit.paths import display_path, kit_home
from kit.recipe import HubModel, LoadedRecipe, LocalModel

log = logging.getLogger(__name__)


def hub_cache_dir() -> Path:
    """Where kit's huggingface_hub downloads go (its cache layout): ``$KIT_HOME/hub``."""
    return kit_home() / "hub"


def download(spec: HubModel, role: Literal["target", "draft"]) -> tuple[Path, ModelManifest]:
    """Download a pinned revision with huggingface_hub (token only from the environment)."""
    try:
        # lazy: huggingface_hub is in the build extra
        from huggingface_hub import snapshot_download  # noqa: PLC0415
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError  # noqa: PLC0415
    except ImportError as exc:
        raise EnvironmentProblem(
            "huggingface_hub is not installed", hint="pip install 'kit[build]'"
        ) from exc
    if spec.revision is None:
        raise BadInputError(
            f"{role} {spec.repo_id}: revision is not pinned",
            hint="pin the commit you reproduce: --set model.revision=<40-hex sha> (or "
            "speculative.draft.revision for the draft)",
        )
    cache = hub_cache_dir()
    t0 = time.monotonic()
    log.info("model: downloading %s@%s", spec.repo_id, spec.revision)
    try:
        path = Path(
            snapshot_download(
                repo_id=spec.repo_id,
                revision=spec.revision,
                allow_patterns=spec.allow_patterns,
                cache_dir=str(cache),
                endpoint=os.environ.get("HF_ENDPOINT") or None,  # as set now, not at import
            )
        )
    except LocalEntryNotFoundError as exc:
        raise EnvironmentProblem(
            f"{spec.repo_id}@{spec.revision}: not in the local cache and the hub is unreachable",
            hint="check the network, or unset HF_HUB_OFFLINE; set HF_TOKEN for gated models",
        ) from exc
    except HfHubHTTPError as exc:
        raise EnvironmentProblem(
            f"{spec.repo_id}@{spec.revision}: download failed: {exc}",
            hint="check repo_id and revision; set HF_TOKEN in the environment for gated models",
        ) from exc
    resolved = path.name  # snapshots/<commit sha>
    files = hash_tree(path)
    manifest = ModelManifest(
        role=role,
        source="hub",
        repo_id=spec.repo_id,
        revision=spec.revision,
        resolved_revision=resolved,
        architecture=architecture(path),
        files=files,
        identity=identity_of(files),
        directory=display_path(path),
        duration_s=round(time.monotonic() - t0, 3),
        cached=False,
    )
    return path, manifest


def local(
    spec: LocalModel, loaded: LoadedRecipe, role: Literal["target", "draft"], field: str
) -> tuple[Path, ModelManifest]:
    path = loaded.resolve_path(spec.path)
    if not (path / "config.json").is_file():
        raise BadInputError(
            f"{loaded.path.name}: {field}.path: {spec.path}: no config.json there",
            hint="point at a Hugging Face model directory",
        )
    files = hash_tree(path)
    return path, ModelManifest(
        role=role,
        source="local",
        architecture=architecture(path),
        files=files,
        identity=identity_of(files),
        directory=display_path(path),
        duration_s=0.0,
        cached=False,
    )
