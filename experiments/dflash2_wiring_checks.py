"""The small pieces of patches/vllm-0.26.0 that live in large vLLM modules (which cannot be
imported without vLLM), run by experiments/dflash2-cpu-check.py: each function is taken out of the
patched file by its syntax tree and run on its own, or read as data.

  0001  _dflash_layer_causal: a top-level is_causal first, then dflash_config.causal, then
        layer_types
  0008  the registry entry; init_speculator picks DFlash2Speculator by architecture;
        VllmConfig._is_dflash2_draft and use_v2_model_runner (the env variable still wins)
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from dflash2_harness import check, load

DFLASH = "vllm/model_executor/models/qwen3_dflash.py"
CONFIG = "vllm/config/vllm.py"
REGISTRY = "vllm/model_executor/models/registry.py"
SELECT = "vllm/v1/worker/gpu/spec_decode/__init__.py"


def _functions(path: Path, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Compile the named functions of `path` (methods too, wherever they are) and its module
    assignments to those names into `namespace`; returns it."""
    tree = ast.parse(path.read_text())
    picked: list[ast.stmt] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.decorator_list = []  # a property's getter, called as a function
            picked.append(node)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in names for t in stmt.targets
        ):
            picked.insert(0, stmt)
    exec(compile(ast.Module(body=picked, type_ignores=[]), str(path), "exec"), namespace)
    return namespace


def check_wiring(site: Path, spec: ModuleType, vllm_config: Any) -> None:
    ns = _functions(
        site / DFLASH, {"_dflash_layer_causal", "_SLIDING_ATTENTION"}, {"Qwen3Config": object}
    )
    causal = ns["_dflash_layer_causal"]

    def cfg(**kw: Any) -> Any:
        return SimpleNamespace(**kw)

    swa, full = "sliding_attention", "full_attention"
    cases = [
        (cfg(is_causal=False, layer_types=[swa, swa]), [False, False]),
        (cfg(is_causal=True, dflash_config={"causal": False}), [True, True]),
        (cfg(dflash_config={"causal": False}, layer_types=[swa, swa]), [False, False]),
        (cfg(layer_types=[swa, full]), [True, False]),
        (cfg(), [False, False]),
    ]
    got = [[causal(c, i) for i in range(2)] for c, _ in cases]
    check(
        "0001: is_causal, then dflash_config.causal, then layer_types", got == [w for _, w in cases]
    )

    tree = ast.parse((site / REGISTRY).read_text())
    entries = {
        ast.literal_eval(k): ast.literal_eval(v)
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for k, v in zip(node.keys, node.values, strict=True)
        if isinstance(k, ast.Constant) and k.value == "DFlash2DraftModel"
    }
    want = ("qwen3_dflash2", "DFlash2Qwen3ForCausalLM")
    check(
        "0008: registry maps DFlash2DraftModel to the new model",
        entries == {"DFlash2DraftModel": want},
    )

    select = load(site, SELECT)
    kinds = []
    for arch in ("DFlash2DraftModel", "DFlashDraftModel"):
        c = vllm_config()
        c.speculative_config.method = "dflash"
        c.speculative_config.draft_model_config.architectures = [arch]
        kinds.append(type(select.init_speculator(c, torch.device("cpu"))).__name__)
    check(
        "0008: init_speculator picks DFlash2Speculator by architecture",
        kinds == ["DFlash2Speculator", "SpeculatorBase"],  # SpeculatorBase: DFlash's stand-in
        f"{kinds}",
    )

    envs = SimpleNamespace(VLLM_USE_V2_MODEL_RUNNER=None)
    ns = _functions(site / CONFIG, {"_is_dflash2_draft", "use_v2_model_runner"}, {"envs": envs})

    def config(method: str, arch: str) -> Any:
        draft = SimpleNamespace(architectures=[arch])
        self = SimpleNamespace(
            speculative_config=SimpleNamespace(method=method, draft_model_config=draft),
            _dflash_needs_multi_kv_group=lambda: False,
            model_config=SimpleNamespace(is_diffusion=False),
            _is_default_v2_model_runner_model=lambda: False,
        )
        self._is_dflash2_draft = lambda: ns["_is_dflash2_draft"](self)
        return self

    runner = ns["use_v2_model_runner"]
    v2 = [
        runner(config("dflash", "DFlash2DraftModel")),
        runner(config("dflash", "DFlashDraftModel")),
        runner(config("eagle3", "DFlash2DraftModel")),
    ]
    envs.VLLM_USE_V2_MODEL_RUNNER = False
    v2.append(runner(config("dflash", "DFlash2DraftModel")))
    check(
        "0008: V2 model runner forced for a DFlash2 draft, unless VLLM_USE_V2_MODEL_RUNNER says",
        v2 == [True, False, False, False],
        f"{v2}",
    )
