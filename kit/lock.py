"""Lock resolution: what a recipe leaves open (:func:`kit.recipe.lock.open_fields`), resolved to
the exact bits, a commit sha asked of the hub and an image digest through the docker CLI, as a
:class:`~kit.recipe.lock.Lock` for ``kit lock`` to write beside the recipe."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kit.errors import EnvironmentProblem, KitError
from kit.recipe import load_recipe
from kit.recipe.lock import (
    COMMIT_SHA,
    Lock,
    LockedPin,
    is_exact,
    lock_path,
    open_fields,
    read_lock,
    write_lock,
)
from kit.recipe.schema import Recipe
from kit.recipe.sources import HubModel

# what else a run can do about an image tag kit cannot resolve to a digest
_IMAGE_HINT = (
    "or leave the image open with `kit lock RECIPE --no-image` (a native run does not use "
    "it), or pin it in the recipe (server.engine.image: NAME:TAG@sha256:...)"
)


def resolve_revision(repo_id: str, revision: str | None) -> str:
    """The commit sha of ``repo_id`` at ``revision`` (None: the default branch), asked of the
    hub (``HF_ENDPOINT``) by huggingface_hub."""
    try:
        # lazy: huggingface_hub is in the build extra
        from huggingface_hub import HfApi  # noqa: PLC0415
        from huggingface_hub.errors import HfHubHTTPError  # noqa: PLC0415
    except ImportError as exc:
        raise EnvironmentProblem(
            "huggingface_hub is not installed", hint="pip install 'kit[build]'"
        ) from exc
    try:
        # HF_ENDPOINT as set now (huggingface_hub reads it once, at import)
        info = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None).model_info(
            repo_id, revision=revision
        )
    except HfHubHTTPError as exc:
        raise EnvironmentProblem(
            f"{repo_id}@{revision or 'main'}: the hub could not resolve it: {exc}",
            hint="check repo_id and revision; set HF_TOKEN for gated models",
        ) from None
    except OSError as exc:  # connection errors
        raise EnvironmentProblem(
            f"{repo_id}@{revision or 'main'}: the hub is unreachable: {exc}",
            hint="kit lock needs the hub (or a mirror in HF_ENDPOINT); or pin the revision in the "
            "recipe (a 40-hex commit sha)",
        ) from None
    sha = getattr(info, "sha", None)
    if not isinstance(sha, str) or not COMMIT_SHA.match(sha):
        raise EnvironmentProblem(
            f"{repo_id}@{revision or 'main'}: the hub gave no commit sha",
            hint="is HF_ENDPOINT a Hugging Face hub? or pin the revision in the recipe "
            "(a 40-hex commit sha)",
        )
    return sha


def resolve_image(ref: str) -> str:
    """``NAME:TAG@sha256:...`` for an image tag: the digest of the local image, pulled with the
    docker CLI first when it is not here."""
    name = ref.split("@", 1)[0]
    repo = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name

    def digests() -> list[str]:
        proc = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .RepoDigests}}", name],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            return []
        found = json.loads(proc.stdout or "null") or []
        return [d for d in found if isinstance(d, str) and d.split("@", 1)[0] == repo]

    try:
        found = digests()
        if not found:
            pull = subprocess.run(["docker", "pull", name], capture_output=True, text=True)
            if pull.returncode != 0:
                raise EnvironmentProblem(
                    f"{name}: docker pull failed: {pull.stderr.strip()[-300:]}",
                    hint=f"check the image's name and the registry; {_IMAGE_HINT}",
                )
            found = digests()
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"{name}: no docker CLI to resolve the image's digest",
            hint=f"install Docker; {_IMAGE_HINT}",
        ) from None
    if not found:
        raise EnvironmentProblem(
            f"{name}: the image has no registry digest",
            hint=f"push it to a registry, or pull it from one; {_IMAGE_HINT}",
        )
    return f"{name}@{found[0].split('@', 1)[1]}"


def resolve(recipe: Recipe, recipe_file: str, base_sha256: str, *, images: bool = True) -> Lock:
    """A lock for every field of ``recipe`` that is open (not exact); the base image only with
    ``images`` (a native run does not use it, and resolving it needs the docker CLI)."""
    pins: list[LockedPin] = []
    for field, value in open_fields(recipe).items():
        if is_exact(field, value):
            continue
        if field == "server.engine.image":
            if not images:
                continue
            assert value is not None
            pins.append(LockedPin(field=field, value=resolve_image(value), resolved_from=value))
            continue
        spec = recipe.model if field == "model.revision" else recipe.speculative.draft
        assert isinstance(spec, HubModel)
        sha = resolve_revision(spec.repo_id, value)
        pins.append(
            LockedPin(field=field, value=sha, resolved_from=f"{spec.repo_id}@{value or 'main'}")
        )
    return Lock(
        recipe=recipe_file,
        recipe_sha256=base_sha256,
        resolved_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        pins=pins,
    )


@dataclass(frozen=True)
class RecipeLock:
    """What :func:`lock_recipe` did: the lock it wrote (None: nothing was open), and the old
    lock it removed because it no longer fitted the recipe (None: none)."""

    written: Path | None
    removed: Path | None = None


def lock_recipe(path: str | Path, images: bool) -> RecipeLock:
    """Resolve what the recipe at ``path`` leaves open and write its lock beside it; the GPU
    base image only with ``images``. When nothing is open no lock is written, and an old one
    that no longer fits the recipe (which every load would refuse) is removed."""
    loaded = load_recipe(path, use_lock=False)
    sha256 = loaded.recipe.sha256()
    lock = resolve(loaded.recipe, loaded.path.name, sha256, images=images)
    where = lock_path(loaded.path)
    if lock.pins:
        return RecipeLock(write_lock(where, lock))
    try:
        old = read_lock(where, str(path))
    except KitError:
        old = None  # malformed: it fits nothing
    if where.exists() and (old is None or old.recipe_sha256 != sha256):
        where.unlink()
        return RecipeLock(None, removed=where)
    return RecipeLock(None)
