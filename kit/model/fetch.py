"""The model stage's entry points: a recipe's target and draft, each as a directory and its
manifest, from wherever the recipe says they come from."""

from __future__ import annotations

from pathlib import Path

from kit.model.hub import download, local
from kit.model.manifest import ModelManifest
from kit.model.synthetic import synthesise, synthesise_draft
from kit.recipe import HubModel, LoadedRecipe, SyntheticDraft, SyntheticModel


def fetch_model(loaded: LoadedRecipe) -> tuple[Path, ModelManifest]:
    """The target model of a recipe, as a directory and its manifest."""
    spec = loaded.recipe.model
    if isinstance(spec, SyntheticModel):
        return synthesise(spec)
    if isinstance(spec, HubModel):
        return download(spec, "target")
    return local(spec, loaded, "target", "model")


def fetch_draft(loaded: LoadedRecipe) -> tuple[Path, ModelManifest] | None:
    """The speculative draft of a recipe, when it has one."""
    draft = loaded.recipe.speculative.draft
    if draft is None:
        return None
    if isinstance(draft, SyntheticDraft):
        target = loaded.recipe.model
        assert isinstance(target, SyntheticModel)  # the recipe validator guarantees it
        return synthesise_draft(target, draft, loaded.recipe.speculative.method)
    if isinstance(draft, HubModel):
        return download(draft, "draft")
    return local(draft, loaded, "draft", "speculative.draft")
