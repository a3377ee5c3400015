"""vLLM's `bench serve` beside kit: its saved result parsed, made comparable, compared."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from kit.bench import PromptSummary
from kit.errors import BadInputError
from kit.metrics import summarize
from kit.noise import headline
from kit.recipe import REFERENCE_PROMPTS, Bench, VllmBenchSettings
from kit.vllm_bench import VllmBenchJob, bench_argv, compare, dataset_lines, explain, parse_result


@pytest.fixture
def recorded(fixtures_dir: Path) -> Path:
    """The results of `vllm bench serve` recorded on H200s (its README says how)."""
    return fixtures_dir / "vllm-bench"


def kit_summary(name: str, decode: list[float], ttft_ms: list[float]) -> PromptSummary:
    return PromptSummary(
        prompt=name,
        max_tokens=1000,
        measured=len(decode),
        usable=len(decode),
        headline=headline("decode_tps", dict(enumerate(decode)), {}),
        decode_tps=summarize(decode),
        wall_tps=summarize(decode),
        ttft_ms=summarize(ttft_ms),
        completion_tokens=summarize([1000.0] * len(decode)),
    )


def test_parse_real_result(every_vllm_bench_result: Path) -> None:
    """A result saved by `vllm bench serve --save-result --save-detailed` on an H200."""
    data = json.loads(every_vllm_bench_result.read_text())
    parsed = parse_result(data)
    assert parsed["completed"] == data["completed"] > 0
    assert parsed["failed"] == 0
    assert parsed["output_tokens"] == data["output_lens"]
    # comparable with kit: tokens / (last content chunk - first), per request, then the mean
    by_hand = statistics.fmean(
        n / sum(itl) for n, itl in zip(data["output_lens"], data["itls"], strict=True)
    )
    assert parsed["decode_tps"] == pytest.approx(by_hand)
    # vLLM's TPOT counts n - 1 tokens over (latency - ttft): 1000/TPOT is ~n/(n-1) lower
    n = statistics.fmean(data["output_lens"])
    assert parsed["decode_tps_from_tpot"] == pytest.approx(
        1000 / data["mean_tpot_ms"] * n / (n - 1)
    )
    assert parsed["decode_tps_from_tpot"] == pytest.approx(parsed["decode_tps"], rel=0.02)
    assert parsed["mean_ttft_ms"] == data["mean_ttft_ms"]
    if "spec_decode_acceptance_length" in data:
        assert parsed["spec_decode_acceptance_length"] == data["spec_decode_acceptance_length"]


def test_fixtures_present(recorded: Path) -> None:
    assert sorted(recorded.glob("*.json")), f"no recorded vllm bench results in {recorded}"


def test_parse_refuses_other_json() -> None:
    with pytest.raises(BadInputError, match="not a `vllm bench serve` result"):
        parse_result({"hello": 1})


def test_parse_skips_failed_requests() -> None:
    data = {
        "completed": 1,
        "failed": 1,
        "mean_ttft_ms": 20.0,
        "mean_tpot_ms": 5.0,
        "output_lens": [101, 0],
        "ttfts": [0.02, 0.0],
        "itls": [[0.005] * 100, []],
        "errors": ["", "boom"],
    }
    parsed = parse_result(data)
    assert parsed["decode_tps"] == pytest.approx(101 / 0.5)
    assert parsed["decode_tps_from_tpot"] == pytest.approx(200 * 101 / 100)


def test_compare_and_tolerances() -> None:
    prompt = REFERENCE_PROMPTS[0]
    parsed = {
        "completed": 5,
        "failed": 0,
        "output_tokens": [1000] * 5,
        "mean_ttft_ms": 30.0,
        "median_ttft_ms": 30.0,
        "mean_tpot_ms": 10.0,
        "mean_itl_ms": 10.0,
        "mean_e2el_ms": 10020.0,
        "output_throughput": 99.0,
        "decode_tps_from_tpot": 100.1,
        "decode_tps": 100.0,
        "spec_decode_acceptance_length": 1.1,
        "spec_decode_acceptance_rate": 1.4,
    }
    ok = compare(prompt, parsed, kit_summary("narrative", [101.0, 101.0], [33.0, 33.0]), [], "r")
    assert ok.decode_delta_pct == pytest.approx(1.0)
    assert ok.ttft_delta_ms == pytest.approx(3.0)
    assert ok.agree is True
    off = compare(prompt, parsed, kit_summary("narrative", [103.0, 103.0], [40.0, 40.0]), [], "r")
    assert off.agree is False
    notes = explain([off])
    assert any("decode TPS differs by +3.00 %" in n for n in notes)
    assert any("TTFT differs by +10.0 ms" in n for n in notes)
    none = compare(prompt, parsed, None, [], None)
    assert none.agree is None


def test_argv_matches_the_protocol(tmp_path: Path) -> None:
    bench = Bench(ignore_eos=True)
    prompt = REFERENCE_PROMPTS[1]
    job = VllmBenchJob(
        python="python",
        pythonpath=None,
        url="http://127.0.0.1:8000/",
        model="kit-model",
        tokenizer=tmp_path,
        bench=bench,
        settings=VllmBenchSettings(warmups=1),
        out_dir=tmp_path,
    )
    argv = bench_argv(job, prompt, tmp_path / "d.jsonl", runs=5, result_file="r.json")

    def value(flag: str) -> str:
        return argv[argv.index(flag) + 1]

    assert argv[:2] == ["bench", "serve"]
    assert value("--backend") == "openai-chat"
    assert value("--base-url") == "http://127.0.0.1:8000"
    assert value("--max-concurrency") == "1"
    assert value("--custom-output-len") == "800"
    assert value("--num-prompts") == "5"
    assert (value("--temperature"), value("--top-p"), value("--top-k"), value("--min-p")) == (
        "0.6",
        "0.95",
        "20",
        "0.0",
    )
    assert json.loads(value("--extra-body")) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert "--ignore-eos" in argv and "--skip-chat-template" in argv and "--save-detailed" in argv
    lines = dataset_lines(prompt, 5).splitlines()
    assert len(lines) == 5
    assert json.loads(lines[0]) == {"prompt": prompt.text, "output_tokens": 800}
