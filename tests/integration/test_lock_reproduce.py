"""A recipe that leaves its hub revisions open, locked and reproduced for real: `kit reproduce
--resolve` asks the hub (the local stand-in of tests/hubserver.py, through the real
huggingface_hub client and HF_ENDPOINT) for the commits, writes the lock, downloads both models
at those commits with snapshot_download, serves and measures them; the report records each
resolved sha and that it came from --resolve. A plain load after it reads the lock."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import small
from hubserver import HUB_TINY_RECIPE, serving_hub

from kit.build import Built
from kit.engine import EngineEnv
from kit.model.hub import hub_cache_dir
from kit.recipe import load_recipe
from kit.recipe.lock import lock_path, read_lock
from kit.report.assemble import new_report

pytestmark = pytest.mark.integration

SMALL = small(warmups=0, runs=1, max_tokens=16)


def reproduce(recipe: Path, out: Path, endpoint: str, *extra: str) -> dict[str, object]:
    sets = [a for s in SMALL for a in ("--set", s)]
    proc = subprocess.run(
        [sys.executable, "-m", "kit.cli", "reproduce", str(recipe), *sets, "--no-sign",
         "-o", str(out), *extra],
        capture_output=True, text=True, check=False,
        env={**os.environ, "HF_ENDPOINT": endpoint},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    envelope = json.loads(Path(proc.stdout.strip()).read_bytes())
    report: dict[str, object] = json.loads(base64.b64decode(envelope["payload"]))
    return report


def test_reproduce_resolve_locks_downloads_and_records_the_shas(
    built: Built, engine_env: EngineEnv, repo_root: Path, tmp_path: Path
) -> None:
    assert built.draft_dir is not None
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "cpu-tiny.yaml").write_text((repo_root / "recipes" / "cpu-tiny.yaml").read_text())
    recipe = recipes / "hub-tiny.yaml"
    recipe.write_text(HUB_TINY_RECIPE)
    repos = {"kit-test/tiny": built.model_dir, "kit-test/tiny-draft": built.draft_dir}
    for repo in repos:  # an earlier session's download would be a cache hit: download again
        shutil.rmtree(hub_cache_dir() / f"models--{repo.replace('/', '--')}", ignore_errors=True)
    with serving_hub(repos) as hub:
        report = reproduce(recipe, tmp_path / "reports", hub.url, "--resolve")
        lock = read_lock(lock_path(recipe))
        assert lock is not None
        assert {p.field: p.value for p in lock.pins} == {
            "model.revision": hub.sha["kit-test/tiny"],
            "speculative.draft.revision": hub.sha["kit-test/tiny-draft"],
        }
        assert report["status"] == "complete", report.get("incomplete_reason")
        assert report["pins"] == [
            {"field": "model.revision", "value": hub.sha["kit-test/tiny"], "source": "resolve"},
            {
                "field": "speculative.draft.revision",
                "value": hub.sha["kit-test/tiny-draft"],
                "source": "resolve",
            },
        ]
        model = report["model"]
        assert isinstance(model, dict)
        assert model["resolved_revision"] == hub.sha["kit-test/tiny"]
        downloads = [r for r in hub.requests if "/resolve/" in r]
        assert any(hub.sha["kit-test/tiny"] in r for r in downloads)  # fetched at the commit
    # a plain run after it reads the lock: the same recipe, the same shas, now from the lock
    again = load_recipe(recipe, SMALL)
    assert again.recipe.sha256() == report["recipe_sha256"]
    pins = new_report(again, "20261201T120000Z-abcdef").pins
    assert [(p.value, p.source) for p in pins] == [
        (hub.sha["kit-test/tiny"], "lock"),
        (hub.sha["kit-test/tiny-draft"], "lock"),
    ]
