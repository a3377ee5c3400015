"""Fixtures of the unit tests: the 2x3090 seed recipe's models, pinned and in a real
huggingface_hub cache (kit's own), for the preflight tests; a package index on localhost that
every test's engine install would use (preflight asks it, and no unit test asks the network);
and no ``repo_root``, since unit tests read their data from tests/fixtures/ only."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


# the settings that name package locations for an install (kit.installer.package_sources)
INDEX_SETTINGS = (
    "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "UV_INDEX_URL", "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL", "UV_NO_INDEX", "UV_OFFLINE", "KIT_TORCH_INDEX",
)  # fmt: skip


@pytest.fixture(scope="session")
def local_index() -> Iterator[str]:
    """A package index on localhost that answers every request with an empty simple page."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def package_index(local_index: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """pip's index is :func:`local_index`, and no pip config file or other index setting applies
    (a test may set them again): the engine install a preflight asks about is this machine's."""
    for name in INDEX_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", local_index)
    return local_index


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
