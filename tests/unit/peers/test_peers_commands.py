"""kit.peers: each tool's command and input files for one of kit's points and a server URL, and
kit's points as the tools are given them (kit.peers.traffic)."""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from factories import build_bench

from kit import installer
from kit.bench.load.datasets import Planned
from kit.peers import PEERS, PeerJob, Request, TrafficPoint, traffic
from kit.peers.aiperf import AIPerf
from kit.peers.guidellm import GuideLLM, torch_requirement
from kit.peers.traffic import kit_points
from kit.peers.vllm_bench import VllmBenchPeer
from kit.recipe import Bench, load_recipe, recipe_sha256, shown_recipe_sha256
from kit.recipe.patterns import Pacing

URL = "http://127.0.0.1:8123/"


def bench_of(fixtures_dir: Path, *sets: str) -> Bench:
    return load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", list(sets)).recipe.bench


def job_of(bench: Bench, tmp_path: Path) -> PeerJob:
    return PeerJob(
        url=URL,
        model="kit-model",
        tokenizer=tmp_path / "served",
        bench=bench,
        out_dir=tmp_path / "run",
        python="/engine/bin/python",
        engine_version="0.32.0",
    )


def concurrency_point(warmups: int = 1) -> TrafficPoint:
    rows = tuple(Request(f"prompt {i}", 12 + i) for i in range(warmups + 3))
    return TrafficPoint("concurrency-2", rows, warmups, Pacing(concurrency=2), 2.0, salted=True)


def rate_point(arrival: str = "poisson") -> TrafficPoint:
    rows = (Request("a", 8), Request("b", 9))
    pacing = Pacing(concurrency=4, rate=1.5, arrival=arrival)  # type: ignore[arg-type]
    return TrafficPoint("rate-1.5", rows, 0, pacing, 1.5, salted=True)


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_guidellm_scenario_for_a_concurrency_point(fixtures_dir: Path, tmp_path: Path) -> None:
    job = job_of(bench_of(fixtures_dir, "bench.ignore_eos=false"), tmp_path)
    point = concurrency_point(warmups=2)
    inv = GuideLLM().prepare(point, job, tmp_path / "g")
    assert inv.argv[:4] == ["-m", "guidellm", "run", "--scenario"]
    assert inv.argv[-1] == "--disable-console-interactive"
    spec = json.loads(Path(inv.argv[4]).read_text())["spec"]
    assert spec["backend"] == {
        "kind": "openai_http",
        "target": "http://127.0.0.1:8123",
        "model": "kit-model",
        "request_format": "/v1/chat/completions",
        "timeout": 300.0,
        "extras": {
            "body": {
                "temperature": 0.6,
                "top_p": 0.95,
                "top_k": 20,
                "min_p": 0.0,
                "chat_template_kwargs": {"enable_thinking": False},
                "ignore_eos": False,  # over guidellm's own, which a row's length sets
            }
        },
    }
    # no warm-up phase: the measured rows only (guidellm's own would leave out a number of
    # them that depends on the order its updates arrive in)
    assert spec["profile"] == {"kind": "concurrent", "streams": [2]}
    assert spec["constraints"] == [{"kind": "max_requests", "count": 3}]
    assert spec["tokenizer"] == {"kind": "huggingface_auto", "model": str(tmp_path / "served")}
    assert spec["outputs"] == [{"kind": "json", "path": str(inv.result)}]
    data = Path(spec["data"][0]["path"])
    assert spec["data"][0]["kind"] == "json_file" and data in inv.inputs
    rows = jsonl(data)
    # every measured row once, each behind guidellm's own salt and its number
    assert [r["output_tokens_count"] for r in rows] == [14, 15, 16]
    salts = {str(r["prompt"]).split("] ")[0] for r in rows}
    assert len(salts) == 3 and all(s.startswith("[guidellm-concurrency-2-") for s in salts)
    assert [str(r["prompt"]).split("] ")[1] for r in rows] == [f"prompt {i}" for i in (2, 3, 4)]
    assert GuideLLM().notes(point) == [
        "guidellm sent no warm-up (kit sent 2): its measured rows only"
    ]


def test_guidellm_profile_for_rate_points(fixtures_dir: Path, tmp_path: Path) -> None:
    job = job_of(bench_of(fixtures_dir), tmp_path)
    for arrival in ("poisson", "constant"):
        inv = GuideLLM().prepare(rate_point(arrival), job, tmp_path / arrival)
        spec = json.loads(Path(inv.argv[4]).read_text())["spec"]
        assert spec["profile"] == {"kind": arrival, "rate": [1.5], "max_concurrency": 4}
        assert spec["backend"]["extras"]["body"]["ignore_eos"] is True  # cpu-tiny sets it


def test_aiperf_command_for_a_concurrency_point(fixtures_dir: Path, tmp_path: Path) -> None:
    job = job_of(bench_of(fixtures_dir, "bench.sampling.seed=7"), tmp_path)
    inv = AIPerf().prepare(concurrency_point(), job, tmp_path / "a")
    argv = inv.argv
    assert argv[:3] == ["-m", "aiperf", "profile"]
    assert value(argv, "--url") == "http://127.0.0.1:8123"
    assert value(argv, "--model") == "kit-model"
    assert value(argv, "--endpoint-type") == "chat" and "--streaming" in argv
    assert value(argv, "--custom-dataset-type") == "single_turn"
    assert value(argv, "--dataset-sampling-strategy") == "sequential"
    # the first row is the warm-up, the other three measured, as kit ran the point
    assert value(argv, "--warmup-request-count") == "1"
    assert value(argv, "--request-count") == "3"
    assert value(argv, "--concurrency") == "2" and "--request-rate" not in argv
    assert json.loads(value(argv, "--extra-inputs")) == {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 20,
        "min_p": 0.0,
        "chat_template_kwargs": {"enable_thinking": False},
        "ignore_eos": True,
        "seed": 7,
    }
    assert value(argv, "--tokenizer") == str(tmp_path / "served")
    assert "--use-server-token-count" in argv
    assert inv.result == Path(value(argv, "--output-artifact-dir")) / "profile_export_aiperf.json"
    rows = jsonl(Path(value(argv, "--input-file")))
    assert [r["output_length"] for r in rows] == [12, 13, 14, 15]
    assert all(str(r["text"]).startswith("[aiperf-concurrency-2-") for r in rows)


def test_aiperf_command_for_a_rate_point(fixtures_dir: Path, tmp_path: Path) -> None:
    job = job_of(bench_of(fixtures_dir), tmp_path)
    argv = AIPerf().prepare(rate_point("constant"), job, tmp_path / "a").argv
    assert value(argv, "--request-rate") == "1.5"
    assert value(argv, "--arrival-pattern") == "constant"
    assert value(argv, "--concurrency") == "4"  # the rate pattern's cap
    assert "--warmup-request-count" not in argv


def test_vllm_bench_commands(fixtures_dir: Path, tmp_path: Path) -> None:
    load = "bench.load={pattern: concurrency, levels: [2], requests: 3, warmup_requests: 1}"
    job = job_of(bench_of(fixtures_dir, load), tmp_path)
    peer = VllmBenchPeer()
    inv = peer.prepare(concurrency_point(), job, tmp_path / "v")
    argv = inv.argv
    assert argv[:4] == ["-m", "vllm.entrypoints.cli.main", "bench", "serve"]
    assert value(argv, "--base-url") == "http://127.0.0.1:8123"
    assert value(argv, "--max-concurrency") == "2" and value(argv, "--request-rate") == "inf"
    assert value(argv, "--num-prompts") == "3" and value(argv, "--num-warmups") == "1"
    assert value(argv, "--result-filename") == "concurrency-2.json"
    assert inv.result == tmp_path / "v" / "concurrency-2.json"
    # vLLM is given the measured rows; it warms up with copies of the first
    rows = jsonl(Path(value(argv, "--dataset-path")))
    assert [r["output_tokens"] for r in rows] == [13, 14, 15]
    assert "--ignore-eos" in argv
    notes = peer.notes(concurrency_point())
    assert notes == [
        "vLLM warmed up with 1 copies of the point's first request, not with the rows kit drew "
        "for its warm-ups"
    ]
    assert peer.notes(rate_point("constant")) == [
        "kit sent constant arrivals, vLLM Poisson ones (burstiness 1)"
    ]
    assert AIPerf().notes(rate_point("poisson")) == [
        "AIPerf draws its Poisson arrivals with its own seed, not kit's"
    ]
    # a prompt of the sequential protocol: as bench.vllm_bench sends it, unsalted
    prompt = TrafficPoint("narrative", (Request("Write.", 64),) * 3, 1, Pacing(concurrency=1))
    argv = peer.prepare(prompt, job_of(bench_of(fixtures_dir), tmp_path), tmp_path / "v").argv
    assert value(argv, "--custom-output-len") == "64"
    assert value(argv, "--max-concurrency") == "1" and value(argv, "--num-prompts") == "2"
    rows = jsonl(Path(value(argv, "--dataset-path")))
    assert rows == [{"prompt": "Write.", "output_tokens": 64}] * 2


def test_kits_prompts_become_points(fixtures_dir: Path) -> None:
    bench = bench_of(fixtures_dir)
    result = build_bench(bench, random.Random(0))
    points = traffic(bench, result, None)
    assert [p.label for p in points] == ["narrative", "code"]
    narrative = points[0]
    assert (narrative.warmups, narrative.requests, narrative.salted) == (3, 5, False)
    assert narrative.pacing == Pacing(concurrency=1) and narrative.level is None
    assert set(narrative.rows) == {Request(bench.prompts[0].text, 256)}
    assert narrative.sent("aiperf") == list(narrative.rows)  # as kit sent them
    # kit's own figures of a prompt: its measured runs as a point at concurrency 1
    kit = kit_points(bench, result)["narrative"]
    runs = [r for r in result.records if r.prompt == "narrative" and r.phase == "measured"]
    assert kit.completed == 5 and kit.output_tokens == sum(r.completion_tokens or 0 for r in runs)
    assert kit.duration_s is not None and kit.output_tps == kit.output_tokens / kit.duration_s
    assert kit.ttft_ms.p50 == pytest.approx(
        sorted((r.ttft_s or 0) * 1000 for r in runs)[2], rel=1e-9
    )


def test_kits_load_points_become_points(fixtures_dir: Path) -> None:
    load = "{pattern: concurrency, levels: [1, 4], requests: 3, warmup_per_stream: 1}"
    bench = bench_of(fixtures_dir, f"bench.load={load}")
    assert bench.load is not None
    planned = [Planned(f"p{i}", 10 + i) for i in range(5)]

    @dataclass
    class At:  # what traffic() reads of a load point
        label: str
        level: float
        requests: int

    @dataclass
    class Result:  # ... and of a bench result
        load_points: list[At]

    result = Result([At(f"concurrency-{n}", n, 3) for n in (1, 4)])
    points = traffic(bench, result, planned)  # type: ignore[arg-type]
    one, four = points
    assert (one.warmups, one.requests, one.pacing) == (1, 3, Pacing(concurrency=1))
    assert (four.warmups, four.requests, four.pacing) == (4, 3, Pacing(concurrency=4))
    # kit's own requests, warm-ups first, the plan over and over
    assert [r.max_tokens for r in four.rows] == [10, 11, 12, 13, 14, 10, 11]
    assert four.salted and four.level == 4
    sent = four.sent("guidellm")
    assert len({r.text.split("] ")[0] for r in sent}) == 7


def test_every_peer_is_named_once(fixtures_dir: Path) -> None:
    assert list(PEERS) == ["vllm_bench", "guidellm", "aiperf"]
    assert all(PEERS[name].tool == name for name in PEERS)
    with pytest.raises(Exception, match="names guidellm more than once"):
        bench_of(fixtures_dir, "bench.peers=[guidellm, aiperf, guidellm]")


def test_a_recipe_without_peers_hashes_as_before(fixtures_dir: Path) -> None:
    """bench.peers is a late field: empty, a recipe's JSON (so its sha256) leaves it out, and
    the committed reports of it keep their recipe_sha256."""
    path = fixtures_dir / "recipes" / "cpu-tiny.yaml"
    # the fixture report was made before cpu-tiny ran the context ladder and the soak, two
    # late fields too: without them the recipe is the report's
    plain = load_recipe(path, ["bench.context=null", "bench.soak=null"]).recipe
    assert "peers" not in plain.to_json_dict()["bench"]
    fixture = json.loads((fixtures_dir / "reports/cpu-tiny-a.json").read_text())
    report = json.loads(base64.b64decode(fixture["payload"]))
    assert "peers" not in report["recipe"]["bench"]
    assert shown_recipe_sha256(plain) == report["recipe_sha256"]
    assert recipe_sha256(plain.to_json_dict()) == recipe_sha256(
        load_recipe(
            path, ["bench.context=null", "bench.soak=null", "bench.peers=[]"]
        ).recipe.to_json_dict()
    )
    asked = load_recipe(path, ["bench.peers=[aiperf]"]).recipe.to_json_dict()
    assert asked["bench"]["peers"] == ["aiperf"]
    assert recipe_sha256(asked) != recipe_sha256(plain.to_json_dict())


def test_guidellm_gets_the_engines_torch() -> None:
    """guidellm needs torch for its data loader only: the engine's own, already in uv's cache
    (a CPU one from where the engine's came), named in its venv's folder."""
    cpu_index = installer.torch_cpu_index()
    assert torch_requirement("2.13.0+cpu") == (
        ["torch==2.13.0+cpu", *cpu_index],
        "torch2.13.0+cpu",
    )
    assert torch_requirement("2.9.0") == (["torch==2.9.0"], "torch2.9.0")
    assert torch_requirement(None) == (cpu_index, None)
