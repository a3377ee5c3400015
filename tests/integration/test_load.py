"""Load patterns against the real vLLM CPU server: concurrency and rate points with each
dataset, written as a report by ``kit bench --target`` and checked by ``kit report verify``
(which recomputes every point from the raw records)."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kit.build import Built
from kit.engine import EngineEnv
from kit.recipe import LoadedRecipe
from kit.serve import RunningServer
from kit.signing import canonical_bytes

pytestmark = pytest.mark.integration


def bench_report(
    recipe: Path, url: str, sets: list[str], out: Path
) -> tuple[dict[str, Any], Path, subprocess.CompletedProcess[str]]:
    args = [a for s in sets for a in ("--set", s)]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kit.cli",
            "bench",
            "--target",
            url,
            "--no-sign",
            str(recipe),
            *args,
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip())
    envelope = json.loads(path.read_bytes())
    return json.loads(base64.b64decode(envelope["payload"])), path, proc


def verify(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kit.cli", "report", "verify", "--allow-unsigned", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


# no prefill probe, and no context ladder or soak after the bench (test_claims has them)
QUIET = ["bench.prefill=null", "bench.context=null", "bench.soak=null"]


def test_concurrency_points_with_random_prompts(
    cpu_recipe: LoadedRecipe, server: RunningServer, tmp_path: Path
) -> None:
    load = "{pattern: concurrency, levels: [1, 3], requests: 6, warmup_requests: 1}"
    dataset = "{kind: random, input_tokens: 96, output_tokens: 12, range_ratio: 0.25, seed: 3}"
    sets = [*QUIET, f"bench.load={load}", f"bench.dataset={dataset}", "bench.slo={ttft_ms: 60000}"]
    report, path, proc = bench_report(cpu_recipe.path, server.url, sets, tmp_path)
    bench = report["bench"]
    assert report["status"] == "complete", report.get("incomplete_reason")
    assert not bench["prompts"]  # the load points replace the sequential protocol
    one, three = bench["load_points"]
    assert (one["label"], three["label"]) == ("concurrency-1", "concurrency-3")
    for point in (one, three):
        assert point["requests"] == point["completed"] == 6
        measured = [
            r for r in bench["records"] if r["prompt"] == point["label"] and r["phase"] == "load"
        ]
        # ignore_eos: each request generates exactly the drawn length (12 +- 25 %)
        assert all(9 <= r["completion_tokens"] == r["max_tokens"] <= 15 for r in measured)
        assert point["output_tokens"] == sum(r["completion_tokens"] for r in measured)
        assert all(60 <= r["prompt_tokens"] <= 140 for r in measured)  # sized with /tokenize
        # the server's own count over the measured window equals the client's
        assert point["server"]["generation_tokens"] == point["output_tokens"]
        assert point["ttft_ms"]["p50"] <= point["ttft_ms"]["p99"] <= point["e2e_ms"]["p99"]
        assert point["good"] == 6 and point["goodput_rps"] == pytest.approx(
            point["request_throughput"]
        )
        assert 0 < point["client_cpu_pct"] < 100
        assert point["spec_decode"]["drafts"] > 0
    # three streams at once overlap: some request starts before another ends
    starts = sorted((r["sent_s"], r["sent_s"] + r["wall_s"]) for r in bench["records"]
                    if r["prompt"] == "concurrency-3" and r["phase"] == "load")  # fmt: skip
    assert any(b[0] < a[1] for a, b in itertools.pairwise(starts))
    assert bench["request_template"]["ignore_eos"] is True
    assert "concurrency-3" in proc.stderr  # the table of points
    checked = verify(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "2 load point(s)" in checked.stdout
    # compared with itself: each point's output throughput is a headline figure of the verdict
    same = subprocess.run(
        [sys.executable, "-m", "kit.cli", "report", "compare", str(path), str(path),
         "--allow-unsigned"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    said = same.stdout + same.stderr
    assert re.search(r"verdict: REPRODUCED: all \d+ judged figures within their bands", said), said
    verdict = same.stdout[same.stdout.index("verdict: ") :]
    assert "concurrency-1 output tok/s: " in verdict and "concurrency-3 output tok/s: " in verdict
    assert "INCONCLUSIVE" not in verdict, verdict  # a counter at 0 is judged in its own unit
    assert "concurrency-3 output tok/s" in same.stdout and "concurrency-3 TTFT p50" in same.stdout


def test_rate_points_from_a_pinned_jsonl_file(
    cpu_recipe: LoadedRecipe, server: RunningServer, tmp_path: Path
) -> None:
    lines = [
        json.dumps({"prompt": f"Name {n} colours of the sea.", "max_tokens": 8}) for n in range(3)
    ]
    data = tmp_path / "prompts.jsonl"
    data.write_text("\n".join(lines) + "\n")
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    # from two client processes, the arrivals dealt between them
    load = "{pattern: rate, rates: [2, 8], requests: 5, arrival: poisson, seed: 1, processes: 2}"
    dataset = f"{{kind: file, path: {data}, format: jsonl, sha256: {digest}}}"
    report, path, _ = bench_report(
        cpu_recipe.path,
        server.url,
        [*QUIET, f"bench.load={load}", f"bench.dataset={dataset}"],
        tmp_path,
    )
    points = report["bench"]["load_points"]
    assert [p["label"] for p in points] == ["rate-2", "rate-8"]
    assert all(p["completed"] == 5 and p["good"] is None for p in points)
    records = report["bench"]["records"]
    assert [r["index"] for r in records if r["prompt"] == "rate-8"] == list(range(5))
    # a load record's chunk times are written packed
    assert all("text_chunk_us" in r and "text_chunk_times_s" not in r for r in records)
    checked = verify(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # an edited point is caught by the recomputation
    envelope = json.loads(path.read_bytes())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["bench"]["load_points"][0]["output_tps"] *= 1.1
    envelope["payload"] = base64.b64encode(canonical_bytes(payload)).decode()
    edited = tmp_path / "edited.json"
    edited.write_bytes(canonical_bytes(envelope))
    failed = verify(edited)
    assert failed.returncode != 0 and "rate-2" in failed.stdout

    # a different file under the same pin is refused before any request
    data.write_text(lines[0] + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kit.cli", "bench", "--target", server.url, "--no-sign",
         str(cpu_recipe.path), "--set", f"bench.load={load}", "--set", f"bench.dataset={dataset}",
         "-o", str(tmp_path / "refused")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert f"bench.dataset.sha256: {data} has sha256" in proc.stderr


def test_a_sweep_stops_where_its_rule_says_and_verify_agrees(
    cpu_recipe: LoadedRecipe, server: RunningServer, tmp_path: Path
) -> None:
    # a gain of 1000 % is never reached: the sweep must stop after its second point, saturated
    load = (
        "{pattern: sweep, start: 1, factor: 2, max_concurrency: 8, requests: 4, "
        "requests_per_stream: 3, warmup_per_stream: 1, min_gain_pct: 1000}"
    )
    # the stop rule and the request counts are the subject: short replies
    short = [f"bench.prompts.{i}.max_tokens=32" for i in (0, 1)]
    report, path, _ = bench_report(
        cpu_recipe.path, server.url, [*QUIET, *short, f"bench.load={load}"], tmp_path
    )
    points = report["bench"]["load_points"]
    assert [p["label"] for p in points] == ["concurrency-1", "concurrency-2"]
    assert [p["requests"] for p in points] == [3, 6]  # requests_per_stream: 3 per stream
    warm = [r["prompt"] for r in report["bench"]["records"] if r["phase"] == "load_warmup"]
    assert warm.count("concurrency-1") == 1 and warm.count("concurrency-2") == 2  # per stream
    assert points[0]["stop_reason"] is None
    assert points[1]["stop_reason"].startswith("saturated: output tok/s rose ")
    assert report["status"] == "complete"
    checked = verify(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_fidelity_interleaves_kit_and_an_independent_client(
    cpu_recipe: LoadedRecipe, server: RunningServer, tmp_path: Path
) -> None:
    sets = [
        *QUIET,
        "bench.warmups=1",
        "bench.runs=2",
        "bench.prompts.0.max_tokens=24",
        # a load recipe's: fidelity is sequential, and its CLI arm's recipe drops them
        "bench.load={pattern: concurrency, levels: [1], requests: 2}",
        "bench.dataset={kind: random, input_tokens: 16, output_tokens: 8}",
        "bench.slo={ttft_ms: 60000}",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "kit.cli", "bench", "--target", server.url, str(cpu_recipe.path),
         *[a for s in sets for a in ("--set", s)], "--fidelity", "2", "-o", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(Path(proc.stdout.strip()).read_text())
    assert [(w["round"], w["arm"]) for w in result["windows"]] == [
        (r, arm) for r in range(2) for arm in ("kit", "kit-no-sampler", "independent", "kit-cli")
    ]
    for w in result["windows"]:
        # a request whose text came in one chunk (a held stream on a loaded host) has no
        # decode time: counted apart, never silently dropped
        assert len(w["decode_tps"]) + w["no_decode"] == 2 and all(v > 0 for v in w["decode_tps"])
        assert w["decode_tps"], w
        # the server's own count over each arm's window: 2 requests of 24 tokens (ignore_eos)
        assert w["server"]["generation_tokens"] == 48, w
    arms = {s["arm"]: s for s in result["summary"]}
    assert arms["independent"]["vs_independent_pct"] == 0
    assert arms["kit"]["server_vs_independent_pct"] is not None
    assert result["goals_met"] in (True, False)
    assert result["complete"] is True and result["errors"] == []  # written as it went
    # the CLI arm ran its warm-up first, apart from the measured requests
    assert all(len(w["warmup_decode_tps"]) == 1 for w in result["windows"] if w["arm"] == "kit-cli")
    assert "kit bench --fidelity: 2 rounds x 2 requests of 'narrative'" in proc.stderr


def test_vllm_bench_serve_runs_at_each_load_point(
    cpu_recipe: LoadedRecipe,
    server: RunningServer,
    built: Built,
    engine_env: EngineEnv,
    tmp_path: Path,
) -> None:
    from kit.bench import Bencher, model_info
    from kit.recipe import load_recipe
    from kit.vllm_bench import VllmBenchJob, run_vllm_bench

    sets = [
        *QUIET,
        "bench.load={pattern: concurrency, levels: [1, 2], requests: 3}",
        "bench.dataset={kind: random, input_tokens: 64, output_tokens: 12}",
        "bench.vllm_bench={warmups: 1}",
    ]
    bench = load_recipe(cpu_recipe.path, sets).recipe.bench
    name, _ = model_info(server.url)
    result = Bencher(server.url, bench, name).run()
    assert result.complete, result.incomplete_reason
    assert bench.vllm_bench is not None
    job = VllmBenchJob(
        python=engine_env.python, pythonpath=engine_env.pythonpath, url=server.url, model=name,
        tokenizer=built.served_dir, bench=bench, settings=bench.vllm_bench, out_dir=tmp_path,
    )  # fmt: skip
    side = run_vllm_bench(job, result)
    assert [p.label for p in side.points] == ["concurrency-1", "concurrency-2"]
    # kit keeps vLLM's TTFT too (the first chunk with choices), never after its own
    for kp in result.load_points:
        assert kp.first_chunk_ms is not None and kp.ttft_ms.p50 is not None
        assert (kp.first_chunk_ms.p50 or 0) <= kp.ttft_ms.p50
    for p in side.points:
        assert p.error is None and (p.completed, p.failed) == (3, 0), p
        assert "--max-concurrency" in p.argv and "--ignore-eos" in p.argv
        assert p.argv[p.argv.index("--dataset-name") + 1] == "custom"
        # kit's own prompts of the point, each behind a salt no other request has
        rows = [
            json.loads(line)
            for line in (tmp_path / f"vllm-bench-{p.label}.jsonl").read_text().splitlines()
        ]
        assert len(rows) == 3 and all(r["output_tokens"] == 12 for r in rows)
        assert len({r["prompt"].split("]")[0] for r in rows}) == 3
        figures = {f.figure: f for f in p.figures}
        assert figures["output tok/s"].vllm and figures["output tok/s"].kit
        assert figures["TPOT p50"].delta_pct is not None
    assert side.agree in (True, False)  # 2 cores: agreement is not expected here
    assert side.prompts == []
    # both points ran in one engine process, one after the other
    shared_log = (tmp_path / "vllm-bench-points.log").read_text()
    assert shared_log.count("=== kit point concurrency-") == 4, shared_log[-2000:]
