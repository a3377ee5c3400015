"""Free disk for a GPU recipe, before any download: what the hub says kit would download of the
model and the draft (the files ``allow_patterns`` select at the pinned revision, less what is
cached already), plus the quantized checkpoint AutoRound writes, against the free space under
``$KIT_HOME``.

    need = downloads not yet cached + quantized output + 1 GiB scratch
    quantized output = the estimate's weights x TP (:mod:`kit.preflight.gpu`), where the shape
                       is known; else the model's download x bits / 16 (a bf16 source)

A synthetic model is generated instead of downloaded: its bf16 size counts as the download.
Where the hub does not answer (offline, unpinned), the check says what it could not size and
passes: a preflight does not refuse what it cannot know.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kit.paths import display_path
from kit.preflight import hub
from kit.preflight.check import Check
from kit.preflight.gpu import GIB, estimate, model_shape
from kit.recipe import AutoRoundQuantization, Recipe, SyntheticModel
from kit.recipe.sources import HubModel

SCRATCH_GIB = 1.0


def free_gib(home: Path) -> float:
    """Free GiB on the disk that holds ``home`` (or would: its nearest existing parent)."""
    probe = home
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free / GIB


def gpu_disk_check(recipe: Recipe, home: Path, free: float | None = None) -> Check:
    free = free_gib(home) if free is None else free
    parts: list[str] = []
    unknown: list[str] = []
    download = 0.0
    model_download: float | None = None
    sources = [("model", recipe.model), ("draft", recipe.speculative.draft)]
    for role, spec in sources:
        if isinstance(spec, HubModel):
            files, why = hub.repo_files(spec)
            if files is None:
                unknown.append(f"{role} {spec.repo_id} ({why})")
                continue
            size = files.to_download / GIB
            download += size
            if role == "model":
                model_download = files.total_bytes / GIB
            cached = " cached" if files.to_download == 0 else ""
            parts.append(f"{role} {files.total_bytes / GIB:.1f} GiB{cached}")
        elif role == "model" and isinstance(spec, SyntheticModel):
            shape = model_shape(recipe)
            if shape is not None:
                model_download = shape.params() * 2 / GIB
                download += model_download
                parts.append(f"synthetic model {model_download:.1f} GiB")
    quantized = 0.0
    quant = recipe.quantization
    if isinstance(quant, AutoRoundQuantization):
        est = estimate(recipe)
        if est is not None:
            quantized = est.weights * recipe.server.tensor_parallel_size
        elif model_download is not None:
            quantized = model_download * quant.bits / 16
        else:
            unknown.append("the quantized checkpoint")
        if quantized:
            parts.append(f"quantized {quantized:.1f} GiB")
    need = download + quantized + SCRATCH_GIB
    detail = f"{free:.1f} GiB free for {display_path(home)}, about {need:.1f} GiB needed" + (
        f" ({', '.join(parts)})" if parts else ""
    )
    if unknown:
        detail += "; not sized: " + ", ".join(unknown)
    return Check(
        "disk",
        free >= need,
        detail,
        "free disk space, or point KIT_HOME at a larger disk",
    )
