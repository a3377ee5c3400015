"""Free disk, before any download: for a GPU recipe's downloads and quantized checkpoint under
``$KIT_HOME`` (:func:`gpu_disk_check`), and for a run's folder under ``-o`` (:func:`output_check`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kit.paths import display_path
from kit.preflight import hub
from kit.preflight.check import Check
from kit.preflight.gpu import GIB, estimate
from kit.preflight.shape import ModelShapes, Shape
from kit.recipe import AutoRoundQuantization, LoadedRecipe, SyntheticModel
from kit.recipe.sources import HubModel

SCRATCH_GIB = 1.0
OUTPUT_GIB = 0.25  # a run's folder: the report, the server log, the peer tools' files


def nearest(path: Path) -> Path:
    """``path`` or, where it is not there yet, its nearest existing parent."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def free_gib(home: Path) -> float:
    """Free GiB on the disk that holds ``home`` (or would: its nearest existing parent)."""
    return shutil.disk_usage(nearest(home)).free / GIB


def output_check(out: Path, free: float | None = None) -> Check:
    """The folder run folders are written to (``-o``), checked apart from the downloads: a folder
    (or one that can be made) this user may write in, with :data:`OUTPUT_GIB` free for a run's
    folder: its report, server log and the logs of the tools beside the bench."""
    probe = nearest(out.absolute())
    shown = display_path(probe)
    made = "" if probe == out.absolute() else f" (to be made in {shown})"
    hint = "pass -o a folder this user may write in"
    if not probe.is_dir():
        return Check("output", False, f"{out}: {shown} is not a folder", hint)
    if not os.access(probe, os.W_OK | os.X_OK):
        return Check("output", False, f"{out}{made}: this user may not write in {shown}", hint)
    free = shutil.disk_usage(probe).free / GIB if free is None else free
    return Check(
        "output",
        free >= OUTPUT_GIB,
        f"{out}{made}: writable, {free:.1f} GiB free, {OUTPUT_GIB:g} GiB needed for a run's folder",
        "free disk space there, or pass -o a folder on another disk",
    )


def gpu_disk_check(
    loaded: LoadedRecipe, home: Path, shapes: ModelShapes, free: float | None = None
) -> Check:
    """The downloads and the quantized output against free disk under ``home``; not checked
    where a size is not known and what is known fits.

    The downloads are what the hub says kit would download of the model and the draft (the
    files ``allow_patterns`` select at the pinned revision, less what is cached already); the
    quantized output is the checkpoint AutoRound writes::

        need = downloads not yet cached + quantized output + 1 GiB scratch
        quantized output = the estimate's weights x TP (:func:`kit.preflight.gpu.estimate`),
                           where the shape is known; else the model's download x bits / 16
                           (a bf16 source)

    A synthetic model is generated instead of downloaded: its bf16 size counts as the download.
    Where the hub does not answer (offline, unpinned), the check is not made: it says what it
    could not size, and fails only when what it could size does not fit already (a preflight
    does not refuse what it cannot know, nor call it ok)."""
    recipe = loaded.recipe
    free = free_gib(home) if free is None else free
    parts: list[str] = []
    unknown: list[str] = []
    hints: list[str] = []
    download = 0.0
    model_download: float | None = None
    sources = [("model", recipe.model), ("draft", recipe.speculative.draft)]
    for role, spec in sources:
        if isinstance(spec, HubModel):
            files, why = hub.repo_files(spec)
            if files is None:
                unknown.append(f"{role} {spec.repo_id} ({why})")
                hints.append(hub.fix(why, display_path(loaded.path)))
                continue
            size = files.to_download / GIB
            download += size
            if role == "model":
                model_download = files.total_bytes / GIB
            cached = " cached" if files.to_download == 0 else ""
            parts.append(f"{role} {files.total_bytes / GIB:.1f} GiB{cached}")
        elif role == "model" and isinstance(spec, SyntheticModel):
            if isinstance(shapes.target, Shape):
                model_download = shapes.target.params() * 2 / GIB
                download += model_download
                parts.append(f"synthetic model {model_download:.1f} GiB")
    quantized = 0.0
    quant = recipe.quantization
    if isinstance(quant, AutoRoundQuantization):
        if isinstance(shapes.target, Shape):
            est = estimate(recipe, shapes.target, 0)
            quantized = est.weights * recipe.server.tensor_parallel_size
        elif model_download is not None:
            quantized = model_download * quant.bits / 16
        else:
            unknown.append("the quantized checkpoint (the model's shape is not known)")
            hints.append(shapes.target.hint)
        if quantized:
            parts.append(f"quantized {quantized:.1f} GiB")
    need = download + quantized + SCRATCH_GIB
    where = f"{free:.1f} GiB free for {display_path(home)}"
    sized = f" ({', '.join(parts)})" if parts else ""
    fix = "free disk space, or point KIT_HOME at a larger disk"
    if not unknown:
        return Check("disk", free >= need, f"{where}, about {need:.1f} GiB needed{sized}", fix)
    not_sized = "not sized: " + ", ".join(unknown)
    if free < need:  # what is known does not fit already
        return Check("disk", False, f"{where}, over {need:.1f} GiB needed{sized}; {not_sized}", fix)
    return Check(
        "disk",
        None,
        f"{where}; {not_sized}" + (f"; the rest about {need:.1f} GiB{sized}" if parts else ""),
        "\n".join(dict.fromkeys(h for h in hints if h)),
    )
