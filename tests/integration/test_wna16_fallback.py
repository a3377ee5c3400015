"""Patch 0003: vLLM CPU's W4A16 kernel on every x86-64 CPU, checked where it runs.

- The torch path (forced) against a plain dequantize-and-matmul reference, on any machine.
- The compiled ``cpu_gemm_wna16`` against both, where this CPU's kernel build has it (AVX512).
- A real server with the fallback forced beside the session's server: greedy tokens and their
  logprobs agree. On an AVX512 machine that compares the torch path with the compiled kernel;
  on an AVX2 machine both servers take the torch path (the compiled one is not there), and the
  server logs say which path each took.
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
        assert case["torch_path_flag"] is True
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
        assert case["compiled_path_flag"] is False
        for m in (1, 7, 64):
            assert case[f"compiled_m{m}_max_rel_err"] <= REL_TOL, case
            assert case[f"torch_vs_compiled_m{m}_max_rel_err"] <= REL_TOL, case


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
    if compiled:
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
