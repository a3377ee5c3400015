"""A held stream cannot set the headline, and the verdict names it with its witness.

`kit bench --target` against the paced fake server (tests/pacedserver.py: 100 tok/s, one
stream held to its end and flooded, as a 2-core CPU host does to vLLM): the report's headline
stays near the paced rate, the held run is named by index, from the stream's shape alone or
from the server's /metrics, and a server whose counters disagree with every stream leaves too
few clean runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pacedserver import RATE, Paced

from kit.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TOKENS = 40


def bench(url: str, out: Path) -> dict[str, Any]:
    """`kit bench` with one prompt, 1 warm-up + 5 runs; the report's payload."""
    args = [
        "bench",
        "--target",
        url,
        str(FIXTURES / "recipes" / "cpu-tiny.yaml"),
        "--set",
        "bench.warmups=1",
        "--set",
        "bench.runs=5",
        "--set",
        "bench.prefill=null",
        "--set",
        "speculative={method: none}",
        "--set",
        f"bench.prompts=[{{name: narrative, text: hello, max_tokens: {TOKENS}}}]",
        "--no-sign",
        "-o",
        str(out),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    [path] = out.glob("*/report.json")
    from kit.report.files import read_report

    report, _ = read_report(path, allow_unsigned=True)
    return json.loads(report.model_dump_json())


def reasons(report: dict[str, Any], code: str) -> list[str]:
    return [f["message"] for f in report["validity"]["reasons"] if f["code"] == code]


def test_a_held_stream_named_from_its_shape_alone(
    paced_server: Callable[[Paced], str], tmp_path: Path
) -> None:
    # POST 1 is the warm-up: measured run #2 is POST 4
    report = bench(paced_server(Paced(hold=4)), tmp_path)
    [narrative] = report["bench"]["prompts"]
    head = narrative["headline"]
    assert head["runs_used"] == [0, 1, 3, 4]
    [excluded] = head["runs_excluded"]
    assert excluded["index"] == 2
    assert abs(head["value"] - RATE) / RATE < 0.10
    assert narrative["decode_tps"]["mean"] > 2 * RATE  # the Club-3090 mean: set by the flood
    [held] = reasons(report, "held-stream")
    assert held.startswith("narrative: 1 of 5 measured runs were held streams, left out of the ")
    assert "#2: first token after " in held and "witness: the stream's shape" in held
    assert report["validity"]["valid"] is True and report["validity"]["rules"] == 3
    assert reasons(report, "decode-cv-high") == []  # the CV is the headline's runs'
    records = [r for r in report["bench"]["records"] if r["phase"] == "measured"]
    assert all("server" not in r for r in records)  # no /metrics: no witness was read


@pytest.mark.parametrize(
    ("witness_ttft", "stage"),
    [
        ("engine", "held after it (its HTTP stream, the socket or the client)"),
        ("client", "held between the engine core and the API server"),
    ],
)
def test_the_server_witness_names_the_held_run_and_the_stage(
    paced_server: Callable[[Paced], str], tmp_path: Path, witness_ttft: str, stage: str
) -> None:
    report = bench(paced_server(Paced(hold=4, metrics=True, witness_ttft=witness_ttft)), tmp_path)
    records = [r for r in report["bench"]["records"] if r["phase"] == "measured"]
    assert [r["server"]["requests"] for r in records] == [1.0] * 5  # one request per window
    [held] = reasons(report, "held-stream")
    assert "#2: the client saw decode take " in held
    assert "witness: the server's /metrics for this request" in held and stage in held
    head = report["bench"]["prompts"][0]["headline"]
    assert [e["index"] for e in head["runs_excluded"]] == [2]
    assert abs(head["value"] - RATE) / RATE < 0.10


def test_counters_that_disagree_with_every_stream_leave_too_few_clean_runs(
    paced_server: Callable[[Paced], str], tmp_path: Path
) -> None:
    # nothing is held, but the server says decoding took three times what the client saw
    report = bench(paced_server(Paced(metrics=True, decode_scale=3.0)), tmp_path)
    head = report["bench"]["prompts"][0]["headline"]
    assert head["runs_used"] == [] and head["value"] is None
    assert len(head["runs_excluded"]) == 5
    [few] = reasons(report, "too-few-clean-runs")
    assert few.startswith("narrative: 0 of 5 measured runs are clean, the headline needs 3")
    assert report["validity"]["valid"] is False
