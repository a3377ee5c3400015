"""The quality probe's reference: the unquantized model's scores of kit's evaluation text.

The build stage scores it once per model identity (and window and k), cached as
``$KIT_HOME/quality/<key>/reference.json``; the probe reads it from there. A recipe's
``reference.quality`` file takes its place for a model kit cannot score here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kit.errors import BadInputError, EnvironmentProblem
from kit.model import ModelManifest
from kit.paths import display_path, kit_home
from kit.quality.schema import ReferenceScores
from kit.quality.text import text_sha256
from kit.recipe import LoadedRecipe
from kit.recipe.quality import Quality, ReferenceQuality

log = logging.getLogger(__name__)

SCORER_VERSION = "1"  # bump when the scorer's output changes for the same inputs
DTYPE = "float32"
AUTO_MAX_BYTES = 8 << 30  # reference auto: weights up to this size are scored on the CPU
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
REFERENCE_FILE = "reference.json"


def window(settings: Quality, max_model_len: int) -> int:
    """Tokens of the text scored, at most: the recipe's cap, and what one request may hold
    with the one token it generates."""
    return min(settings.max_tokens, max_model_len - 1)


@dataclass(frozen=True)
class ReferenceJob:
    """Scoring one model's reference: what the cache key hashes, and where it goes."""

    model_dir: Path
    model_identity: str
    max_tokens: int
    top_k: int

    @property
    def inputs(self) -> dict[str, object]:
        return {
            "scorer": SCORER_VERSION,
            "model_identity": self.model_identity,
            "text_sha256": text_sha256(),
            "max_tokens": self.max_tokens,
            "top_k": self.top_k,
            "dtype": DTYPE,
        }

    @property
    def key(self) -> str:
        blob = json.dumps(self.inputs, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def root(self) -> Path:
        return kit_home() / "quality" / self.key[:24]

    @property
    def log_path(self) -> Path:
        return self.root.with_name(self.root.name + ".log")


def weights_bytes(model: ModelManifest) -> int:
    """The size of a model's weight files."""
    return sum(f.size for f in model.files if f.path.endswith(WEIGHT_SUFFIXES))


def reference_job(
    loaded: LoadedRecipe, model_dir: Path, model: ModelManifest
) -> ReferenceJob | str:
    """The job of scoring the recipe's reference here, or why kit does not."""
    settings = loaded.recipe.bench.quality
    if settings is None:
        return "bench.quality is off"
    if settings.reference == "none":
        return "bench.quality.reference is none"
    size = weights_bytes(model)
    if settings.reference == "auto" and size > AUTO_MAX_BYTES:
        return (
            f"the model's weights ({size / 1e9:.1f} GB) are over {AUTO_MAX_BYTES >> 30} GiB, "
            "more than bench.quality.reference auto scores on the CPU (transformers scores it "
            "anyway; reference.quality gives scores made elsewhere)"
        )
    max_len = loaded.recipe.server.max_model_len
    return ReferenceJob(model_dir, model.identity, window(settings, max_len), settings.top_k)


def cached_reference(job: ReferenceJob) -> ReferenceScores | None:
    """The cached scores of a job; None when there are none or they cannot be read."""
    path = job.root / REFERENCE_FILE
    if not path.is_file():
        return None
    scores = _read(path)
    if scores is None:
        log.warning("quality: ignoring an unreadable reference %s", display_path(path))
    return scores if scores is not None and scores.provenance.key == job.key else None


def _read(path: Path) -> ReferenceScores | None:
    try:
        return ReferenceScores.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def _scorer_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


def build_reference(
    loaded: LoadedRecipe, model_dir: Path, model: ModelManifest
) -> ReferenceScores | None:
    """Build stage: the reference scored (or found cached) where the recipe has kit score it,
    or the recipe's own scores (reference.quality), checked; None where kit does not score it
    (logged)."""
    if loaded.recipe.bench.quality is None:
        return None
    given = recipe_file(loaded)
    if given is not None:
        return read_reference_file(loaded, given, model)
    job = reference_job(loaded, model_dir, model)
    if isinstance(job, str):
        log.info("quality: no reference: %s", job)
        return None
    cached = cached_reference(job)
    if cached is not None:
        log.info("quality: reference cache hit %s, no work done", display_path(job.root))
        return cached
    if not _scorer_installed():
        settings = loaded.recipe.bench.quality
        if settings is not None and settings.reference == "transformers":
            raise EnvironmentProblem(
                "bench.quality.reference transformers: torch and transformers are not installed "
                "in kit's environment",
                hint="pip install 'kit[build]'",
            )
        log.info("quality: no reference: torch and transformers are not installed")
        return None
    return _score(job)


def _score(job: ReferenceJob) -> ReferenceScores:
    """Run the scorer (transformers on the CPU) in a child interpreter, ``python -m
    kit.quality.scorer JOB OUT``, its output in the log beside the cache entry, and cache what
    it writes."""
    work = job.root.with_name(job.root.name + f".partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spec = {"model": str(job.model_dir), "key": job.key, **job.inputs}
    (work / "job.json").write_text(json.dumps(spec))
    log.info(
        "quality: scoring the reference (%d tokens, top %d) with transformers on the CPU; "
        "messages -> %s",
        job.max_tokens,
        job.top_k,
        display_path(job.log_path),
    )
    t0 = time.monotonic()
    argv = [
        sys.executable,
        "-m",
        "kit.quality.scorer",
        str(work / "job.json"),
        str(work / REFERENCE_FILE),
    ]
    with job.log_path.open("wb") as out:
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    scores = _read(work / REFERENCE_FILE) if code == 0 else None
    if scores is None:
        raise EnvironmentProblem(
            f"scoring the quality reference failed (exit {code})",
            hint=f"its messages: {display_path(job.log_path)}",
        )
    (work / "job.json").unlink()
    theirs = cached_reference(job)
    if theirs is not None:  # another run on this host scored it meanwhile: keep theirs
        shutil.rmtree(work, ignore_errors=True)
        return theirs
    shutil.rmtree(job.root, ignore_errors=True)
    os.replace(work, job.root)
    log.info("quality: reference scored in %.1f s", time.monotonic() - t0)
    return scores


def recipe_file(loaded: LoadedRecipe) -> ReferenceQuality | None:
    """The recipe's reference.quality, when it has one."""
    ref = loaded.recipe.reference
    return ref.quality if ref is not None else None


def read_reference_file(
    loaded: LoadedRecipe, given: ReferenceQuality, model: ModelManifest
) -> ReferenceScores:
    """The scores a recipe gives, checked against its pin, kit's text and the model."""
    where = f"{loaded.path.name}: reference.quality"
    path = loaded.resolve_path(given.path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"{where}.path: {given.path}: {exc.strerror}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != given.sha256:
        raise BadInputError(
            f"{where}.sha256: the file's is {digest}, the recipe pins {given.sha256}"
        )
    try:
        scores = ReferenceScores.model_validate_json(data)
    except ValueError as exc:
        raise BadInputError(f"{where}.path: {given.path}: not reference scores: {exc}") from None
    problems = []
    if scores.text_sha256 != text_sha256():
        problems.append(
            f"scores text sha256 {scores.text_sha256[:12]}, kit's evaluation text is "
            f"{text_sha256()[:12]}"
        )
    ident = scores.provenance.model_identity
    if ident is not None and ident != model.identity:
        problems.append(f"scores model {ident[:12]}, the recipe's model is {model.identity[:12]}")
    limit = loaded.recipe.server.max_model_len - 1
    if len(scores.token_ids) > limit:
        problems.append(
            f"{len(scores.token_ids)} tokens, more than server.max_model_len - 1 ({limit})"
        )
    if problems:
        raise BadInputError(f"{where}: {'; '.join(problems)}")
    provenance = scores.provenance.model_copy(
        update={"method": "file", "source": given.source, "file_sha256": digest}
    )
    return scores.model_copy(update={"provenance": provenance})


def find_reference(
    loaded: LoadedRecipe, model_dir: Path, model: ModelManifest
) -> tuple[ReferenceScores | None, str | None]:
    """The probe's reference: the recipe's file, else kit's cached scores; else None and why
    there is none."""
    given = recipe_file(loaded)
    if given is not None:
        return read_reference_file(loaded, given, model), None
    job = reference_job(loaded, model_dir, model)
    if isinstance(job, str):
        return None, job
    cached = cached_reference(job)
    if cached is None:
        return None, (
            "not in kit's cache: the build stage scores it where torch and transformers are "
            f"installed ({display_path(job.log_path)})"
        )
    return cached, None
