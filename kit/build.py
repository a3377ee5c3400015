"""Build stage: the model (and draft), then its quantization, then the quality probe's
reference (the unquantized model's scores), each cached. Both runtimes call :func:`build`:
natively before serving, in containers in the ``prepare`` service."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kit.model import ModelManifest, fetch_draft, fetch_model
from kit.paths import display_path
from kit.quality import ReferenceScores, build_reference
from kit.quantize import QuantManifest, quantize
from kit.recipe import LoadedRecipe

log = logging.getLogger(__name__)


@dataclass
class Built:
    """What the build stages produced."""

    model_dir: Path
    model: ModelManifest
    draft_dir: Path | None
    draft: ModelManifest | None
    served_dir: Path
    quantization: QuantManifest | None
    # the quality probe's reference, where kit scores it (the probe reads it from the cache)
    reference: ReferenceScores | None = None


def build(loaded: LoadedRecipe) -> Built:
    """Model (and draft) + quantization + the quality reference, each cached."""
    model_dir, model = fetch_model(loaded)
    log.info(
        "model: %s (%s, %s)",
        display_path(model_dir),
        model.source,
        "cached" if model.cached else f"{model.duration_s:.1f} s",
    )
    draft = fetch_draft(loaded)
    served_dir, qman = quantize(loaded, model_dir, model)
    reference = build_reference(loaded, model_dir, model)
    return Built(
        model_dir=model_dir,
        model=model,
        draft_dir=draft[0] if draft else None,
        draft=draft[1] if draft else None,
        served_dir=served_dir,
        quantization=qman,
        reference=reference,
    )
