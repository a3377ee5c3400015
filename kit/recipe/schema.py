"""The recipe: one model that holds the build half (:mod:`kit.recipe.sources`), the run half
(:mod:`kit.recipe.serving`) and the reference (:mod:`kit.recipe.protocol`), checks how they
combine, and gives the JSON Schema and the sha256 that reports carry."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kit.paths import display_path
from kit.recipe.acceptance import synthetic_problems
from kit.recipe.base import RecipeModel, drop_late_defaults
from kit.recipe.protocol import Reference, departures
from kit.recipe.serving import Bench, Rig, Server
from kit.recipe.sources import (
    AutoRoundQuantization,
    HubCalibration,
    ModelSource,
    Quantization,
    Speculative,
    SyntheticDraft,
    SyntheticModel,
)

SCHEMA_VERSION = 1


class Recipe(RecipeModel):
    """A complete, resolved recipe (after ``extends`` and ``--set``)."""

    late_fields = frozenset({"rig"})
    schema_version: Literal[1] = Field(description="Recipe format version.")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="Short identifier.")
    description: str = Field("", description="What this recipe reproduces.")
    model: ModelSource = Field(description="Where the model comes from.")
    quantization: Quantization = Field(description="How the model is quantized.")
    speculative: Speculative = Field(default_factory=Speculative, description="Spec decoding.")
    server: Server = Field(description="How the model is served.")
    rig: Rig | None = Field(
        None, description="The GPUs it is made for, for `make reproduce` to pick it."
    )
    bench: Bench = Field(default_factory=Bench, description="The measurement protocol.")
    reference: Reference | None = Field(None, description="Published figures to compare with.")

    @field_validator("schema_version", mode="before")
    @classmethod
    def _integer_version(cls, value: Any) -> Any:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"must be an integer, not {json.dumps(value, default=str)}")
        return value

    @model_validator(mode="after")
    def _combinations(self) -> Recipe:
        problems = self._shape_problems() + self._length_problems() + self._draft_problems()
        problems += synthetic_problems(self.speculative, self.reference)
        problems += self._quantization_problems() + self._placement_problems()
        problems += self._bench_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _quantization_problems(self) -> list[str]:
        """AutoRound's settings against the model it quantizes and the engine that serves it."""
        q, out = self.quantization, list[str]()
        if not isinstance(q, AutoRoundQuantization):
            return out
        if isinstance(self.model, SyntheticModel) and q.group_size > 0:
            shape = self.model.shape
            for field in ("hidden_size", "intermediate_size"):
                value = getattr(shape, field)
                if value % q.group_size:
                    out.append(
                        f"quantization.group_size {q.group_size} does not divide "
                        f"model.shape.{field} {value}"
                    )
        if q.format == "auto_awq" and q.bits != 4:
            out.append(
                f"quantization.bits {q.bits}: format auto_awq takes 4 (vLLM's AWQ kernels are "
                "4-bit): set bits 4, or format auto_gptq (2, 3, 4 or 8 bits)"
            )
        if q.iters == 0 and not q.disable_opt_rtn:
            if isinstance(q.calibration, HubCalibration) and isinstance(self.model, SyntheticModel):
                out.append(
                    "quantization: iters 0 still calibrates from the hub; set disable_opt_rtn"
                )
        if q.device == "cuda" and self.server.engine.device == "cpu":
            out.append(
                f"quantization.device: cuda, but server.engine.name {self.server.engine.name} "
                "runs on the CPU (a CPU machine has no card to quantize on): set cpu or auto"
            )
        return out

    def _placement_problems(self) -> list[str]:
        """Tensor parallelism and the rig against the engine's device."""
        out: list[str] = []
        if self.server.engine.device == "cpu" and self.server.tensor_parallel_size > 1:
            out.append("server.tensor_parallel_size: the CPU engine serves with 1")
        if self.rig is not None:
            if self.server.engine.device == "cpu":
                out.append("rig: is for GPU recipes (a CPU recipe runs on any machine)")
            elif self.rig.gpus < self.server.tensor_parallel_size:
                out.append(
                    f"rig.gpus {self.rig.gpus} is fewer than server.tensor_parallel_size "
                    f"{self.server.tensor_parallel_size}"
                )
        return out

    def _bench_problems(self) -> list[str]:
        """The prefill depths and the prompts' names."""
        out: list[str] = []
        if self.bench.prefill is not None:
            if not self.bench.prefill.depths:
                out.append(
                    "bench.prefill.depths: empty, so the probe measures nothing: give at least "
                    "one depth, or drop bench.prefill"
                )
            if any(depth <= 0 for depth in self.bench.prefill.depths):
                out.append("bench.prefill.depths: depths must be positive")
        names = [p.name for p in self.bench.prompts]
        if len(set(names)) != len(names):
            out.append("bench.prompts: prompt names must be unique")
        return out

    def _shape_problems(self) -> list[str]:
        """The synthetic model's shape against the server that splits it."""
        if not isinstance(self.model, SyntheticModel):
            return []
        shape, s = self.model.shape, self.server
        out: list[str] = []
        tp = s.tensor_parallel_size
        if shape.num_attention_heads % tp:
            out.append(
                f"server.tensor_parallel_size {tp} does not divide "
                f"model.shape.num_attention_heads {shape.num_attention_heads}"
            )
        kv = shape.num_key_value_heads
        if kv % tp and tp % kv:  # vLLM splits KV heads, or replicates them when fewer
            out.append(
                f"server.tensor_parallel_size {tp} and model.shape.num_key_value_heads {kv}: "
                "one must divide the other"
            )
        if s.max_model_len > shape.max_position_embeddings:
            out.append(
                f"server.max_model_len {s.max_model_len} exceeds "
                f"model.shape.max_position_embeddings {shape.max_position_embeddings}"
            )
        return out

    def _draft_problems(self) -> list[str]:
        """A synthetic DFlash or DFlash2 draft against its target, and the deterministic
        settings of both (docs/dflash2-draft.md)."""
        model, spec = self.model, self.speculative
        out: list[str] = []
        if isinstance(model, SyntheticModel) and model.mask_picks_token0:
            if not model.zero_final_norm:
                out.append(
                    "model.mask_picks_token0 needs model.zero_final_norm: true (the zero norm "
                    "keeps the target's own logits at 0 whatever lm_head row 0 holds)"
                )
        draft = spec.draft
        if not isinstance(draft, SyntheticDraft):
            return out
        if not isinstance(model, SyntheticModel):
            return [*out, "speculative.draft: a synthetic draft needs a synthetic model"]
        if draft.block_size < 1 + spec.num_speculative_tokens:
            out.append(
                f"speculative.draft.block_size {draft.block_size} is less than 1 + "
                f"speculative.num_speculative_tokens ({1 + spec.num_speculative_tokens}): a "
                "DFlash block is the anchor token and the masks drafted after it, so the draft "
                "proposes at most block_size - 1 tokens a step"
            )
        shape = model.shape
        n = shape.num_hidden_layers
        ids = draft.target_layer_ids
        if ids is not None and any(i < 0 or i > n - 2 for i in ids):
            out.append(
                f"speculative.draft.target_layer_ids must lie in 0..{n - 2} "
                "(the last layer's output cannot feed a DFlash draft)"
            )
        d2 = draft.dflash2
        if d2 is None:
            return out
        if spec.method != "dflash2":
            return [
                *out,
                f"speculative.draft.dflash2: only for method dflash2 (the method is {spec.method})",
            ]
        if shape.hidden_size % d2.conv_group_size:
            out.append(
                f"speculative.draft.dflash2.conv_group_size {d2.conv_group_size} does not divide "
                f"model.shape.hidden_size {shape.hidden_size}"
            )
        block = 1 + spec.num_speculative_tokens
        if d2.conv_kernel_size > block:
            out.append(
                f"speculative.draft.dflash2.conv_kernel_size {d2.conv_kernel_size} exceeds the "
                f"{block} query tokens of a draft step (1 + speculative.num_speculative_tokens)"
            )
        tp = self.server.tensor_parallel_size
        if d2.selector_top_k > shape.vocab_size // tp:
            out.append(
                f"speculative.draft.dflash2.selector_top_k {d2.selector_top_k} exceeds the "
                f"vocabulary of one shard, model.shape.vocab_size {shape.vocab_size} / "
                f"server.tensor_parallel_size {tp}"
            )
        if d2.weights == "token0":
            if not model.mask_picks_token0:
                out.append(
                    "speculative.draft.dflash2.weights token0 needs model.mask_picks_token0: true "
                    "(and model.zero_final_norm: true)"
                )
            if draft.zero_final_norm:
                out.append(
                    "speculative.draft.dflash2.weights token0 needs the draft's final norm: "
                    "set speculative.draft.zero_final_norm: false"
                )
        return out

    def _length_problems(self) -> list[str]:
        """Every request fits the served context."""
        limit = self.server.max_model_len
        out = [
            f"bench.prompts.{i}.max_tokens {p.max_tokens} exceeds server.max_model_len {limit}"
            for i, p in enumerate(self.bench.prompts)
            if p.max_tokens > limit
        ]
        pre = self.bench.prefill  # its depths beyond the context are skipped, not refused
        if pre is not None and pre.max_tokens >= limit:
            out.append(
                f"bench.prefill.max_tokens {pre.max_tokens} leaves no room for a prompt in "
                f"server.max_model_len {limit}"
            )
        return out

    @property
    def canonical(self) -> bool:
        """Whether the bench follows the reference protocol exactly (see ``departures``)."""
        return not departures(self.bench)

    def to_json_dict(self) -> dict[str, Any]:
        # a recipe without a rig, an AutoRound placement, a load pattern or any later field
        # dumps as it did before those fields existed (RecipeModel.late_fields): the same
        # sha256, and comparable with the reports then
        data = self.model_dump(mode="json")
        drop_late_defaults(self, data)
        return data

    def sha256(self) -> str:
        return recipe_sha256(self.to_json_dict())


def recipe_sha256(data: dict[str, Any]) -> str:
    """sha256 of a resolved recipe's RFC 8785 canonical JSON: the same bytes whether the
    recipe comes from the models or back from a report (1.0 and 1 canonicalise alike)."""
    # lazy: kit.signing loads cryptography (35 ms), and every command loads recipes
    from kit.signing import canonical_bytes  # noqa: PLC0415

    return hashlib.sha256(canonical_bytes(data)).hexdigest()


def shown_recipe(recipe: Recipe) -> dict[str, Any]:
    """The recipe as a report embeds it: an absolute ``path`` of a local model or draft, and
    an absolute path in ``server.extra_args``, written as :func:`kit.paths.display_path` shows
    it, so the report names no machine's directories. A recipe without one is embedded as it
    is."""
    data = recipe.to_json_dict()
    for source in (data.get("model"), (data.get("speculative") or {}).get("draft")):
        if isinstance(source, dict) and source.get("source") == "local":
            path = Path(source["path"])
            if path.is_absolute():
                source["path"] = display_path(path)
    server = data.get("server") or {}
    if isinstance(server.get("extra_args"), list):
        server["extra_args"] = [shown_override(a) for a in server["extra_args"]]
    return data


# An absolute path inside an override's value: after '=', a space, a quote or a bracket.
_ABSOLUTE_IN_OVERRIDE = re.compile(r"(?:(?<=[=\s'\"{\[,])|^)/[^\s,'\"{}\[\]]+")


def shown_override(override: str) -> str:
    """A ``--set`` override as a report shows it: each absolute path in it as
    :func:`kit.paths.display_path` shows it (``model.path=/data/m`` -> ``model.path=…/data/m``)."""
    return _ABSOLUTE_IN_OVERRIDE.sub(lambda m: display_path(Path(m.group())), override)


def shown_recipe_sha256(recipe: Recipe) -> str:
    """The ``recipe_sha256`` a report of ``recipe`` carries: over :func:`shown_recipe`, the
    recipe it embeds (the recipe's own sha256 when nothing was rewritten)."""
    return recipe_sha256(shown_recipe(recipe))


def recipe_json_schema() -> dict[str, Any]:
    """The schema of a complete, resolved recipe (the one a report embeds)."""
    schema = Recipe.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://kit.invalid/schemas/recipe-v{SCHEMA_VERSION}.json"
    return schema


_DATA_KEYS = frozenset({"default", "const", "enum", "examples"})  # values, not schemas
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "patternProperties"})


def _partial(node: Any) -> Any:
    """``node`` with no field required: every ``required`` dropped, each union an ``anyOf``
    (a partial object may fit several members), refs pointed at the ``Partial`` copies."""
    if isinstance(node, list):
        return [_partial(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("required", "discriminator"):
            continue
        if key in _DATA_KEYS:
            out[key] = value
        elif key in _NAMED_SCHEMAS:
            out[key] = {name: _partial(sub) for name, sub in value.items()}
        elif key == "$ref":
            out[key] = value.replace("#/$defs/", "#/$defs/Partial", 1)
        else:
            out["anyOf" if key == "oneOf" else key] = _partial(value)
    return out


def recipe_file_json_schema() -> dict[str, Any]:
    """The schema of a recipe file as written, for editors: without ``extends`` a complete
    recipe; with it, a partial one (every field optional, unknown keys still refused)."""
    full = Recipe.model_json_schema()
    defs: dict[str, Any] = full.pop("$defs")
    partial = _partial(full)
    partial["title"] = "PartialRecipe"
    partial["description"] = "A recipe file with `extends`: only what it overrides."
    extends = {"type": "string", "description": "The recipe file this one overrides (relative)."}
    partial["properties"] = {"extends": extends, **partial["properties"]}
    partial["required"] = ["extends"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://kit.invalid/schemas/recipe-file-v{SCHEMA_VERSION}.json",
        "title": "RecipeFile",
        "description": "A recipe file: a complete recipe, or with `extends` a partial one.",
        "type": "object",
        "if": {"required": ["extends"]},
        "then": {"$ref": "#/$defs/PartialRecipe"},
        "else": {"$ref": "#/$defs/Recipe"},
        "$defs": {
            **defs,
            "Recipe": full,
            **{f"Partial{name}": _partial(sub) for name, sub in defs.items()},
            "PartialRecipe": partial,
        },
    }
