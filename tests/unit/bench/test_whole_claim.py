"""The whole claim, judged: every figure the figure table marks judged (kit.figures) decides the
reproduction verdict, not throughput alone.

Two paced fake servers that differ only in their time to first token (tests/pacedserver.py, 100
tok/s both) give reports that `kit report compare` calls DIFFERENT, naming TTFT, for the
sequential protocol and for a load sweep; two runs of one server are REPRODUCED. The committed
H100 seed-acceptance report (experiments/results/h100-acceptance-sweep-2026-12-07, signed) with
its acceptance halved, or its peak VRAM grown by a third, is DIFFERENT naming that figure; a
figure only the re-run has does not block REPRODUCED.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pacedserver import Paced

from kit.cli import main
from kit.report import Report
from kit.report.files import read_report
from kit.report.reproduction import judge
from kit.signing import load_public_key

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SEED = FIXTURES / "results" / "h100-acceptance-sweep-2026-12-07" / "seed" / "report.json"
TOKENS = 50
SEQUENTIAL = ["bench.warmups=1", "bench.runs=9", "bench.prefill=null"]
LOAD = [
    "bench.load={pattern: concurrency, levels: [1, 2], requests: 8, requests_per_stream: 4, "
    "warmup_per_stream: 1, cooldown_s: 0}",
    f"bench.dataset={{kind: random, input_tokens: 16, output_tokens: {TOKENS}, seed: 0}}",
    "bench.prefill=null",
]


def bench(url: str, out: Path, sets: list[str]) -> Path:
    """`kit bench --target` with the cpu-tiny recipe, one short prompt, no probe after the
    bench; the report's path."""
    args = ["bench", "--target", url, str(FIXTURES / "recipes" / "cpu-tiny.yaml")]
    for s in [
        *sets,
        "speculative={method: none}",
        f"bench.prompts=[{{name: narrative, text: hello, max_tokens: {TOKENS}}}]",
        "bench.quality=null",
        "bench.context=null",
        "bench.soak=null",
    ]:
        args += ["--set", s]
    result = CliRunner().invoke(main, [*args, "--no-sign", "-o", str(out)])
    assert result.exit_code == 0, result.output
    [path] = out.glob("*/report.json")
    return path


def compare(a: Path, b: Path) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        main, ["report", "compare", str(a), str(b), "--allow-unsigned", "--json"]
    )
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("protocol", ["sequential", "load"])
def test_a_threefold_ttft_is_different_naming_it(
    paced_server: Callable[[Paced], str], tmp_path: Path, protocol: str
) -> None:
    sets = SEQUENTIAL if protocol == "sequential" else LOAD
    fast = bench(paced_server(Paced(ttft_s=0.02)), tmp_path / "a", sets)
    slow = bench(paced_server(Paced(ttft_s=0.06)), tmp_path / "b", sets)
    code, data = compare(fast, slow)
    verdict = data["verdict"]
    assert (code, verdict["verdict"]) == (4, "DIFFERENT"), verdict["summary"]
    outside = [f for f in verdict["figures"] if f["status"] == "outside"]
    # the TTFT (the sequential protocol's median; each load point's p50) is outside, worse,
    # and named; so may be what it is part of (a request's wall time, end to end, and under a
    # closed-loop load the point's throughput)
    ttft = [f for f in outside if f["key"] in ("ttft_ms", "ttft_p50")]
    assert len(ttft) == (1 if protocol == "sequential" else 2), verdict["figures"]
    assert all(f["direction"] == "higher" and f["better"] is False for f in ttft)
    assert "TTFT" in verdict["summary"]
    if protocol == "sequential":  # the decode figure held: 100 tok/s both
        [decode] = [f for f in verdict["figures"] if f["key"] == "decode_tps"]
        assert decode["status"] == "within", decode


def test_two_runs_of_one_server_are_reproduced(
    paced_server: Callable[[Paced], str], tmp_path: Path
) -> None:
    # a first token paced at 200 ms: a busy host's few ms of scheduling jitter stay inside the
    # 3 % floor (paced at 20 ms, 2.5 ms of it was 11 %, outside its ±2 ms floor)
    url = paced_server(Paced(ttft_s=0.2))
    a = bench(url, tmp_path / "a", SEQUENTIAL)
    b = bench(url, tmp_path / "b", SEQUENTIAL)
    code, data = compare(a, b)
    assert (code, data["verdict"]["verdict"]) == (0, "REPRODUCED"), data["verdict"]["figures"]
    keys = {f["key"] for f in data["verdict"]["figures"]}
    assert {"decode_tps", "wall_tps", "ttft_ms"} <= keys


@pytest.fixture
def seed() -> Report:
    key = load_public_key(FIXTURES / "examples" / "keys" / "h100-2026-12-07.pub")
    return read_report(SEED, key)[0]


def changed(report: Report, edit: Callable[[dict[str, Any]], None]) -> Report:
    data = json.loads(report.model_dump_json())
    edit(data)
    return Report.model_validate(data)


def test_a_halved_acceptance_is_different_naming_it(seed: Report) -> None:
    def halve(data: dict[str, Any]) -> None:
        sd = data["bench"]["spec_decode"]
        sd["per_position_accepted"] = [n // 2 for n in sd["per_position_accepted"]]
        sd["accepted_tokens"] = sum(sd["per_position_accepted"])
        sd["acceptance_rate"] = sd["accepted_tokens"] / sd["draft_tokens"]
        sd["accepted_per_draft"] = sd["accepted_tokens"] / sd["drafts"]
        sd["acceptance_length"] = 1 + sd["accepted_per_draft"]
        sd["per_position_rate"] = [n / sd["drafts"] for n in sd["per_position_accepted"]]

    result = judge(seed, changed(seed, halve))
    assert result.verdict == "DIFFERENT"
    outside = {f.key for f in result.figures if f.status == "outside"}
    assert outside == {"acceptance_rate", "acceptance_length", "accepted_per_draft"}
    assert "acceptance rate" in result.summary
    assert all(f.band_from == "standard errors" for f in result.figures if f.key in outside)


def test_a_third_more_peak_vram_is_different_naming_it(seed: Report) -> None:
    def grow(data: dict[str, Any]) -> None:
        for card in data["gpu_sampling"]["summaries"]:
            card["vram"]["peak_mib"] = round(card["vram"]["peak_mib"] * 1.3)

    result = judge(seed, changed(seed, grow))
    assert result.verdict == "DIFFERENT"
    [vram] = [f for f in result.figures if f.status == "outside"]
    assert (vram.key, vram.metric, vram.band_from) == (
        "peak_vram_mib",
        "peak VRAM GPU 0",
        "tolerance",
    )
    assert (vram.direction, vram.better) == ("higher", False)
    assert "peak VRAM GPU 0" in result.summary
    # the same report again is REPRODUCED
    assert judge(seed, seed).verdict == "REPRODUCED"


def test_a_figure_the_original_lacks_does_not_block_the_verdict(seed: Report) -> None:
    def drop(data: dict[str, Any]) -> None:
        data["energy_per_token_j"] = None

    original = changed(seed, drop)
    result = judge(original, seed)
    assert result.verdict == "REPRODUCED", result.summary
    assert "energy: not in the original (shown, not judged)" in result.notes
    assert not any(f.key == "energy_j_per_token" for f in result.figures)
