"""Fixtures of the unit tests: the 2x3090 seed recipe's models, pinned and in a real
huggingface_hub cache (kit's own), for the preflight tests; and no ``repo_root``, since unit
tests read their data from tests/fixtures/ only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

import pytest

from kit.model.hub import hub_cache_dir
from kit.patches.series import ENV_PATCHES_DIR

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

MODEL_REV, DRAFT_REV = "a" * 40, "b" * 40
# Qwen3-class 27B dims (hidden 5120, 64 layers, 8 KV heads of 128) and a 1-layer DFlash2 draft
TARGET_CONFIG = {
    "hidden_size": 5120,
    "intermediate_size": 17408,
    "num_hidden_layers": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
}
DRAFT_CONFIG = {**TARGET_CONFIG, "num_hidden_layers": 1}


def hub_cache(root: Path, repo_id: str, revision: str, config: Mapping[str, object]) -> None:
    """A huggingface_hub cache entry as the hub client writes one: snapshots/<sha>/config.json."""
    snapshot = root / f"models--{repo_id.replace('/', '--')}" / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))


@pytest.fixture(autouse=True)
def patch_series_from_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    """kit finds a recipe's patch series under $KIT_PATCHES_DIR first: the copies in
    tests/fixtures/patches, so no unit test reads the repository's patches/ (a test may set it
    again)."""
    monkeypatch.setenv(ENV_PATCHES_DIR, str(FIXTURES / "patches"))


@pytest.fixture
def seed_pins() -> list[str]:
    """The ``--set`` pins of the seed's model and draft revisions: those ``cached_models``
    caches."""
    return [f"model.revision={MODEL_REV}", f"speculative.draft.revision={DRAFT_REV}"]


@pytest.fixture
def cached_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """kit's hub cache (in a fresh KIT_HOME) holding the seed's model and draft configs at the
    pinned revisions."""
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kit"))
    cache = hub_cache_dir()  # kit's own huggingface_hub cache
    hub_cache(cache, "Qwen/Qwen3.8-27B", MODEL_REV, TARGET_CONFIG)
    hub_cache(cache, "incoai/Qwen3.8-27B-DFlash2", DRAFT_REV, DRAFT_CONFIG)
    return cache


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No hub: ``HF_HUB_OFFLINE`` for kit (read at call time) and for huggingface_hub, which
    reads it once, at import; imported here first, so that the setting ends with the test."""
    # imported before the variable is set, never under it
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)


@pytest.fixture
def repo_root() -> NoReturn:
    """Refused here: unit tests read no file outside tests/. Take ``fixtures_dir``; a check of
    the repository's own files belongs in tests/repo."""
    pytest.fail("unit tests read only tests/: take fixtures_dir, or move the check to tests/repo")
