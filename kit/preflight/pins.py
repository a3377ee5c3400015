"""Pins: everything a recipe downloads or builds on must name the exact bits, checked before any
of it starts, all at once (the model stage would otherwise refuse one at a time, the later ones
after a 54 GB download). A hub revision is asked of kit's hub cache or the hub
(:func:`revision_check`); a calibration set loaded by name is not checked: kit cannot pin it."""

from __future__ import annotations

from kit.bench.load import file_requests
from kit.errors import BadInputError
from kit.image import CUDA_BASE_IMAGE, base_image_for, engine_source, is_pinned
from kit.paths import display_path
from kit.preflight import hub
from kit.preflight.check import Check
from kit.preflight.hub import lock_hint
from kit.recipe import LoadedRecipe
from kit.recipe.sources import HubCalibration, HubModel
from kit.recipe.traffic import FileDataset

# each hint is one line under lock_hint's (the lines of all failed items are shown once each)
HINT_REVISION = "or pin the commit you reproduce: --set {field}=<40-hex sha> (make: SET=...)"
HINT_IMAGE = (
    "kit lock {recipe} pins the base image by digest (or kit reproduce --runtime compose "
    "{recipe} --resolve)\nor docker pull {base}, then --set server.engine.image="
    "NAME:TAG@sha256:... (docker image inspect --format '{{{{index .RepoDigests 0}}}}')"
)


def pin_checks(loaded: LoadedRecipe) -> list[Check]:
    """One item per pin the recipe needs wherever it runs: hub revisions, the calibration set,
    a load pattern's dataset file. A missing pin is the recipe's fault (exit 2)."""
    recipe = loaded.recipe
    file = display_path(loaded.path)
    out: list[Check] = []
    sources: list[tuple[str, object]] = [("model", recipe.model)]
    if recipe.speculative.draft is not None:
        sources.append(("speculative.draft", recipe.speculative.draft))
    for field, spec in sources:
        if not isinstance(spec, HubModel):
            continue
        if spec.revision is None:
            out.append(
                Check(
                    f"pin {field}",
                    False,
                    f"{field}.revision: {spec.repo_id} is not pinned to a revision",
                    f"{lock_hint(file)}\n{HINT_REVISION.format(field=f'{field}.revision')}",
                    fault="recipe",
                )
            )
        else:
            out.append(revision_check(field, spec, file))
    calibration = getattr(recipe.quantization, "calibration", None)
    if isinstance(calibration, HubCalibration):
        out.append(
            Check(
                "pin calibration",
                None,
                f"{calibration.dataset}: AutoRound loads the data set by name (its default "
                "branch); kit cannot pin it, the report records the name",
                "a calibration set kit pins by its content: quantization.calibration with "
                "source: file (a text file beside the recipe) or source: inline",
                fault="recipe",
            )
        )
    return out + dataset_checks(loaded)


def image_pin_checks(loaded: LoadedRecipe) -> list[Check]:
    """The base image of a GPU recipe by digest, for a runtime that serves the image (none for
    a CPU recipe, whose base is built locally)."""
    recipe = loaded.recipe
    if recipe.server.engine.device != "cuda":
        return []
    if engine_source(loaded) == "pypi":
        return [
            Check(
                "pin image",
                True,
                f"{recipe.server.engine.name} {recipe.server.engine.version} from PyPI onto "
                f"the local {CUDA_BASE_IMAGE} (KIT_ENGINE_FROM=pypi): no registry image to "
                "pin; the report records the image id",
                fault="recipe",
            )
        ]
    base = base_image_for(recipe.server.engine)
    pinned = is_pinned(base)
    hint = "" if pinned else HINT_IMAGE.format(recipe=display_path(loaded.path), base=base)
    return [
        Check(
            "pin image",
            pinned,
            base if pinned else f"server.engine.image: {base} is not pinned by digest",
            hint,
            fault="recipe",
        )
    ]


def revision_check(field: str, spec: HubModel, recipe_file: str) -> Check:
    """A pinned hub revision: known to kit's hub cache or to the hub (ok), unknown to the hub
    (a problem), or neither could say (not checked: offline, no network; its form alone proves
    nothing)."""
    name, at = f"pin {field}", f"{spec.repo_id}@{spec.revision}"
    if hub.cached(spec):
        return Check(name, True, f"{at}: in kit's hub cache", fault="recipe")
    files, why = hub.repo_files(spec)
    if files is not None:
        return Check(name, True, f"{at}: the hub has it", fault="recipe")
    fix = hub.fix(why, recipe_file)
    if why.startswith(hub.NOT_FOUND):
        return Check(name, False, f"{field}.revision: {at}: {why}", fix, fault="recipe")
    return Check(name, None, f"{at}: not in kit's hub cache, and {why}", fix, fault="recipe")


def dataset_checks(loaded: LoadedRecipe) -> list[Check]:
    """A load pattern's dataset file: there, readable in its format, and the file its sha256
    pins (before the server boots, not after)."""
    ds = loaded.recipe.bench.dataset
    if not isinstance(ds, FileDataset):
        return []
    try:
        prompts = file_requests(ds, loaded.path.parent)
    except BadInputError as exc:
        return [Check("pin dataset", False, exc.message, exc.hint or "", fault="recipe")]
    return [
        Check(
            "pin dataset",
            True,
            f"{ds.path}: {len(prompts)} prompt(s), sha256 {ds.sha256[:12]}... as pinned",
            fault="recipe",
        )
    ]
