"""The peers beside kit (bench.peers) against the real vLLM CPU server: kit's bench at two load
points, then `vllm bench serve` (the engine's), guidellm and AIPerf (each from PyPI at its pin,
in its own venv under KIT_HOME) with the same requests, each read back through kit's importer,
side by side in a report. A few short requests a point: this checks the plumbing, not the
agreement (two cores shared by the server and four clients in turn agree on little)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import build_report

from kit.bench import Bencher, model_info
from kit.build import Built
from kit.engine import EngineEnv
from kit.peers import PEERS, PeerJob, run_peers
from kit.peers.aiperf import VERSION as AIPERF
from kit.peers.guidellm import VERSION as GUIDELLM
from kit.recipe import LoadedRecipe, load_recipe
from kit.report.show import peer_lines, side_by_side_rows
from kit.serve import RunningServer

pytestmark = pytest.mark.integration

SETS = [
    "bench.prefill=null",
    "bench.load={pattern: concurrency, levels: [1, 2], requests: 2, warmup_requests: 1}",
    "bench.dataset={kind: random, input_tokens: 48, output_tokens: 8}",
    "bench.peers=[vllm_bench, guidellm, aiperf]",
]
LABELS = ["concurrency-1", "concurrency-2"]


def test_three_peers_beside_kit_at_each_point(
    cpu_recipe: LoadedRecipe,
    server: RunningServer,
    built: Built,
    engine_env: EngineEnv,
    tmp_path: Path,
    repo_root: Path,
) -> None:
    bench = load_recipe(cpu_recipe.path, SETS).recipe.bench
    name, _ = model_info(server.url)
    measured = Bencher(server.url, bench, name).measure()
    result = measured.result
    assert result.complete, result.incomplete_reason
    job = PeerJob(
        url=server.url, model=name, tokenizer=built.served_dir, bench=bench, out_dir=tmp_path,
        python=engine_env.python, pythonpath=engine_env.pythonpath,
        engine_version=engine_env.version, torch=engine_env.versions.get("torch"),
    )  # fmt: skip
    plan = list(measured.plan) if measured.plan is not None else None
    peers = run_peers(job, [PEERS[n] for n in bench.peers], result, plan)
    assert [r.tool for r in peers.runs] == ["vllm_bench", "guidellm", "aiperf"]
    versions = [r.version for r in peers.runs]
    assert versions == [engine_env.version, GUIDELLM, AIPERF]
    assert [k.label for k in peers.kit] == LABELS
    for run in peers.runs:
        assert run.error is None, run.error
        assert [p.label for p in run.points] == LABELS
        for point in run.points:
            assert point.error is None, f"{run.name} {point.label}: {point.error}"
            assert point.result_file is not None and (tmp_path / point.result_file).is_file()
            assert point.log_file is not None and (tmp_path / point.log_file).is_file()
            # every request the tool counted completed, and it counted kit's measured ones
            # (guidellm at times loses its last request as it stops: one fewer, then)
            counted = (1, 2) if run.tool == "guidellm" else (2,)
            assert point.completed == point.requests and point.requests in counted, point
            assert point.failed == 0, point
            figures = {f.key: f for f in point.figures}
            for key in ("output_tps", "ttft_p50", "tpot_p50"):
                f = figures[key]
                assert f.peer is not None and f.peer > 0 and f.kit is not None, (run.name, f)
                assert f.delta_pct is not None and f.within is not None
            assert point.agree in (True, False)
    # read back through the importer, each tool's own file says what it sent
    aiperf = peers.runs[2].points[0]
    rows = [json.loads(line) for line in (tmp_path / "peers/aiperf/concurrency-1.jsonl").open()]
    assert len(rows) == 3 and all(r["output_length"] == 8 for r in rows)
    assert "--warmup-request-count" in aiperf.argv
    guidellm = {f.key: f for f in peers.runs[1].points[1].figures}
    assert guidellm["itl_p50"].peer is None  # guidellm has no per-chunk ITL
    vllm = {f.key: f for f in peers.runs[0].points[1].figures}
    assert vllm["ttft_p50"].compared_with == "first_chunk_ms p50"
    # in a report, side by side: all four tools at each point
    report = build_report(repo_root).model_copy(update={"peers": peers})
    rows_by_point = {label: [r.tool for r in side_by_side_rows(report) if r.point == label]
                     for label in LABELS}  # fmt: skip
    for label in LABELS:
        assert rows_by_point[label] == ["kit", "vllm bench serve", "guidellm", "AIPerf"]
    assert len(peer_lines(report)) >= 3 + 4 * len(LABELS)
