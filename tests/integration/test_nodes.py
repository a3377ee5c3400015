"""One model across two nodes with vLLM's own multi-node launcher, natively: `kit reproduce` of
recipes/cpu-tiny-2nodes.yaml starts the head and the headless worker on this host (pipeline
parallel 2, gloo over TCP between them), benches through the head, and the signed report names
both nodes, their logs and the transport each used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from clirun import small

from kit.build import Built
from kit.engine import EngineEnv
from kit.report.files import read_report
from kit.signing import generate_keypair, load_public_key

pytestmark = pytest.mark.integration

# the smallest run that still streams through both stages
SMALL = small(runs=1, max_tokens=24)


def test_two_nodes_serve_one_model_natively(
    built: Built, engine_env: EngineEnv, repo_root: Path, tmp_path: Path
) -> None:
    keys = generate_keypair(tmp_path / "keys", "nodes-test")
    sets = [a for s in SMALL for a in ("--set", s)]
    proc = subprocess.run(
        [sys.executable, "-m", "kit.cli", "reproduce", "recipes/cpu-tiny-2nodes.yaml", *sets,
         "--key", str(keys.private_key), "-o", str(tmp_path / "reports")],
        capture_output=True, text=True, cwd=repo_root, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "serve: node 1 of 2 here" in proc.stderr
    path = Path(proc.stdout.strip())
    report, check = read_report(path, load_public_key(keys.public_key))
    assert check.valid and report.status == "complete"
    assert report.server is not None and report.server.nodes is not None
    nodes = [(n.rank, n.role, n.started_by, n.transport) for n in report.server.nodes]
    assert nodes == [(0, "head", "kit", "gloo"), (1, "worker", "kit", "gloo")]
    assert "--nnodes" in report.server.argv and "--headless" not in report.server.argv
    # each node's log beside the report; the worker's shows it ran the second stage
    worker_log = path.parent / "server.node1.log"
    assert worker_log.is_file() and "world_size=2 rank=1" in worker_log.read_text()
    tokens = [r.completion_tokens for r in report.bench.records]  # type: ignore[union-attr]
    assert tokens and all(t == 24 for t in tokens)
