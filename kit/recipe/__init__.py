"""Recipes: the YAML file that says how a result is built, served and measured.

A recipe is validated by pydantic models with unknown keys forbidden: the build half in
:mod:`kit.recipe.sources`, the run half in :mod:`kit.recipe.serving`, the reference protocol
and figures in :mod:`kit.recipe.protocol`, the whole in :mod:`kit.recipe.schema`. Reading a
file (``extends:``, ``--set a.b=value``) is :mod:`kit.recipe.load`.
"""

from kit.recipe.load import (
    UPGRADES,
    LoadedRecipe,
    load_embedded,
    load_recipe,
    parse_override,
    validate_data,
)
from kit.recipe.protocol import AcceptanceFigures, PromptFigures, Reference, departures
from kit.recipe.schema import (
    SCHEMA_VERSION,
    Recipe,
    recipe_json_schema,
    recipe_sha256,
    shown_override,
    shown_recipe,
    shown_recipe_sha256,
)
from kit.recipe.serving import (
    REFERENCE_PROMPTS,
    Bench,
    Engine,
    Prefill,
    Prompt,
    Rig,
    RooflineSettings,
    Sampling,
    Server,
    VllmBenchSettings,
)
from kit.recipe.sources import (
    AutoRoundQuantization,
    Calibration,
    DraftSource,
    FileCalibration,
    GeneratedCalibration,
    HubCalibration,
    HubModel,
    InlineCalibration,
    LocalModel,
    ModelSource,
    NoQuantization,
    Quantization,
    SpecMethod,
    Speculative,
    SyntheticDraft,
    SyntheticModel,
    SyntheticShape,
)

__all__ = [
    "REFERENCE_PROMPTS",
    "SCHEMA_VERSION",
    "UPGRADES",
    "AcceptanceFigures",
    "AutoRoundQuantization",
    "Bench",
    "Calibration",
    "DraftSource",
    "Engine",
    "FileCalibration",
    "GeneratedCalibration",
    "HubCalibration",
    "HubModel",
    "InlineCalibration",
    "LoadedRecipe",
    "LocalModel",
    "ModelSource",
    "NoQuantization",
    "Prefill",
    "Prompt",
    "PromptFigures",
    "Quantization",
    "Recipe",
    "Reference",
    "Rig",
    "RooflineSettings",
    "Sampling",
    "Server",
    "SpecMethod",
    "Speculative",
    "SyntheticDraft",
    "SyntheticModel",
    "SyntheticShape",
    "VllmBenchSettings",
    "departures",
    "load_embedded",
    "load_recipe",
    "parse_override",
    "recipe_json_schema",
    "recipe_sha256",
    "shown_override",
    "shown_recipe",
    "shown_recipe_sha256",
    "validate_data",
]
