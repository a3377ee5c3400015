"""What the hub says about a pinned repository, before anything is downloaded: the size of each
file the recipe's ``allow_patterns`` select (for the disk check), and its ``config.json`` (for
the GPU memory estimate), fetched into kit's huggingface_hub cache. Only where the hub is
reachable: else the caller gets the reason instead (:data:`OFFLINE`, :data:`NOT_FOUND`, ...).
"""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.model.hub import hub_cache_dir
from kit.recipe.sources import HubModel

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
# why a size is not known (and :func:`fix` gives the hint): HF_HUB_OFFLINE set, an unpinned
# revision, or a hub that does not answer within TIMEOUT_S, and the checks that needed the answer
# say they were not made; a hub that answers that it has no such repository or revision
# (NOT_FOUND) makes the pin a problem
NOT_PINNED = "not pinned"
OFFLINE = "HF_HUB_OFFLINE is set"
NO_ANSWER = "the hub did not answer"
NOT_FOUND = "the hub has no such repository or revision"
# what the hub answers for a repository or revision it does not have (or will not show)
_MISSING = {"RepositoryNotFoundError", "RevisionNotFoundError"}


@dataclass(frozen=True)
class RepoFiles:
    """The files of one pinned repository that kit downloads, and how much of it is cached."""

    repo_id: str
    revision: str
    sizes: dict[str, int]
    cached_bytes: int

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes.values())

    @property
    def to_download(self) -> int:
        return max(self.total_bytes - self.cached_bytes, 0)


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def selected(names: list[str], patterns: list[str]) -> list[str]:
    """The names ``snapshot_download(allow_patterns=...)`` takes (fnmatch on the whole path)."""
    return [n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)]


def _snapshot(spec: HubModel) -> Path | None:
    assert spec.revision is not None
    folder = "models--" + spec.repo_id.replace("/", "--")
    path = hub_cache_dir() / folder / "snapshots" / spec.revision
    return path if path.is_dir() else None


@functools.lru_cache(maxsize=32)
def _listing(repo_id: str, revision: str, endpoint: str) -> dict[str, int] | str:
    """Every file of the revision with its size (one metadata call, no retries), or why not. The
    client is huggingface_hub itself, so ``HF_ENDPOINT`` (read at call time) and ``HF_TOKEN``
    apply."""
    try:
        # lazy: huggingface_hub is in the build extra
        from huggingface_hub import HfApi  # noqa: PLC0415

        info = HfApi(endpoint=endpoint or None).model_info(
            repo_id, revision=revision, files_metadata=True, timeout=TIMEOUT_S
        )
    except Exception as exc:  # unreachable, gated, unknown: the check says so, nothing fails here
        log.debug("preflight: hub metadata of %s failed", repo_id, exc_info=True)
        name = type(exc).__name__
        return f"{NOT_FOUND if name in _MISSING else NO_ANSWER}: {name}"
    return {s.rfilename: int(s.size or 0) for s in info.siblings or []}


def cached(spec: HubModel) -> bool:
    """Whether kit's hub cache holds the pinned revision (the hub client resolved it once)."""
    return spec.revision is not None and _snapshot(spec) is not None


def repo_files(spec: HubModel) -> tuple[RepoFiles | None, str]:
    """The sizes of what kit would download of ``spec`` (its pinned revision), or the reason
    they are not known."""
    if spec.revision is None:
        return None, NOT_PINNED
    if offline():
        return None, OFFLINE
    listing = _listing(spec.repo_id, spec.revision, os.environ.get("HF_ENDPOINT", ""))
    if isinstance(listing, str):
        return None, listing
    sizes = dict(listing)
    sizes = {n: sizes[n] for n in selected(sorted(sizes), spec.allow_patterns)}
    snapshot = _snapshot(spec)
    cached = 0
    if snapshot is not None:
        for name, size in sizes.items():
            if (snapshot / name).exists():
                cached += size
    return RepoFiles(spec.repo_id, spec.revision, sizes, cached), ""


def config(spec: HubModel) -> tuple[dict[str, Any] | None, str]:
    """``config.json`` of the pinned revision: from kit's cache, else fetched there (a few KB)
    where the hub is reachable; else None and why not."""
    if spec.revision is None:
        return None, NOT_PINNED
    try:
        # lazy: huggingface_hub is in the build extra
        from huggingface_hub import hf_hub_download, try_to_load_from_cache  # noqa: PLC0415

        path = try_to_load_from_cache(
            spec.repo_id, "config.json", revision=spec.revision, cache_dir=str(hub_cache_dir())
        )
        if not isinstance(path, str):
            # fetched only from a hub that answered the metadata call: hf_hub_download retries
            # an unreachable one for half a minute
            files, why = repo_files(spec)
            if files is None:
                return None, f"config.json is not in kit's cache, and {why}"
            path = hf_hub_download(
                spec.repo_id,
                "config.json",
                revision=spec.revision,
                cache_dir=str(hub_cache_dir()),
                etag_timeout=TIMEOUT_S,
                endpoint=os.environ.get("HF_ENDPOINT") or None,
            )
    except Exception as exc:  # no huggingface_hub, unreachable, a bad id: no estimate
        log.debug("preflight: config.json of %s failed", spec.repo_id, exc_info=True)
        return None, f"config.json did not come: {type(exc).__name__}"
    if not isinstance(path, str):
        return None, "config.json did not come"
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        return None, f"config.json does not read ({type(exc).__name__})"
    return (data, "") if isinstance(data, dict) else (None, "config.json is not a mapping")


def lock_hint(recipe_file: str) -> str:
    """How to pin every hub revision the recipe leaves open."""
    return (
        f"kit lock {recipe_file} pins the hub revisions the recipe leaves open (or kit "
        f"reproduce {recipe_file} --resolve; make: ARGS=--resolve)"
    )


def fix(why: str, recipe_file: str) -> str:
    """The hint for one of this module's reasons, for the recipe at ``recipe_file``."""
    if why.endswith(NOT_PINNED):
        return f"{lock_hint(recipe_file)}, and preflight then sizes them from the hub"
    if why.endswith(OFFLINE):
        return (
            f"unset HF_HUB_OFFLINE and run kit preflight {recipe_file} again: it reads "
            "config.json and the file sizes from the hub (a few KB, no weights)"
        )
    if NOT_FOUND in why:
        return (
            f"check the repo_id and the revision in {recipe_file} (kit lock {recipe_file} pins "
            "the current commit of an open one; a private or gated repository needs HF_TOKEN)"
        )
    if NO_ANSWER in why:
        return (
            "check the network and HF_ENDPOINT (HF_TOKEN for a gated repository), then run "
            f"kit preflight {recipe_file} again"
        )
    return ""
