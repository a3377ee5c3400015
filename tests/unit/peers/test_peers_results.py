"""kit.peers: each tool's own result file read back through kit's importer and set beside kit's
figures at the point (the definitions each tool uses, the deltas, the agreement flags), a tool
that fails kept with its error and log, and the side-by-side table of `kit report show`.

The result files are the real ones in tests/fixtures/foreign/ (vLLM 0.25.1, guidellm 0.8 dev,
AIPerf 0.10), as the tools wrote them."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from factories import build_report, load_record

from kit.bench.load import LoadPoint, summarize_point
from kit.figures import AGREEMENT_PCT
from kit.installer import InstallError
from kit.measure import after_bench
from kit.peers import Env, Invocation, Peer, PeerJob, Peers, Request, TrafficPoint
from kit.peers.compare import agreement, compare_figures, kit_figures, read_back
from kit.peers.run import read_point, run_peer, run_peers, summary_notes
from kit.recipe import PeerName, load_recipe
from kit.recipe.patterns import Pacing
from kit.report import Report
from kit.report.assemble import Measurement, Setup
from kit.report.show import peer_lines, show_table, side_by_side_rows

FIXTURES = Path(__file__).parents[2] / "fixtures"
FOREIGN = FIXTURES / "foreign"
VLLM = FOREIGN / "vllm" / "bench-serve-v0.25.1-opt125m-c2-cpu.json"
GUIDELLM = FOREIGN / "guidellm" / "v0.8dev-schema-v2-mockserver-llmd-fixture.json"
AIPERF = FOREIGN / "aiperf" / "v0.10-qwen3.6-nvfp4-rtx5090-agent-c2_profile_export_aiperf.json"
FAILED = FOREIGN / "vllm" / "bench-serve-v0.25.1-all-failed.json"


def kit_point(tpot_ms: float, first_chunk_ms: float, ttft_ms: float) -> LoadPoint:
    """kit's point concurrency-2: four requests of 11 tokens, one text chunk a token, each
    ``tpot_ms`` apart (so ITL = TPOT), the first chunk with choices at ``first_chunk_ms``."""
    ttft, gap = ttft_ms / 1000, tpot_ms / 1000
    records = [
        load_record(
            sent=i * 0.001,
            ttft=ttft,
            wall=ttft + 10 * gap,
            tokens=11,
            chunks=[ttft + k * gap for k in range(11)],
        ).model_copy(update={"first_chunk_s": first_chunk_ms / 1000, "index": i})
        for i in range(4)
    ]
    return summarize_point("concurrency-2", "concurrency", 2, records, None)


def by_key(figures: list) -> dict:  # type: ignore[type-arg]
    return {f.key: f for f in figures}


def test_vllms_result_against_kit_with_its_definitions() -> None:
    imported, point = read_back(VLLM)
    assert imported.tool == "vllm bench serve" and point.label == "concurrency-2"
    tpot, itl, ttft = point.figures.tpot_ms, point.figures.itl_ms, point.figures.ttft_ms
    assert tpot is not None and itl is not None and ttft is not None
    assert tpot.median is not None and itl.median is not None and ttft.median is not None
    # kit's TPOT (= its ITL here) 1 % above vLLM's TPOT median; its first chunks 10 % sooner
    kit = kit_point(tpot.median * 1.01, ttft.median * 0.9, ttft.median * 1.5)
    figures = by_key(compare_figures(point, imported.definitions, kit))
    t = figures["tpot_p50"]
    assert (t.peer, t.compared_with, t.within) == (tpot.median, "tpot_ms p50", True)
    assert t.kit == pytest.approx(tpot.median * 1.01) and t.delta_pct == pytest.approx(1.0)
    # vLLM's ITL median is below its TPOT median: kit's is then well above it, outside
    i = figures["itl_p50"]
    assert i.delta_pct == pytest.approx((tpot.median * 1.01 - itl.median) / itl.median * 100)
    assert i.delta_pct > AGREEMENT_PCT and i.within is False
    # vLLM's TTFT ends at the first chunk with choices: compared with kit's first_chunk_ms,
    # not with its TTFT to text (here 50 % later)
    f = figures["ttft_p50"]
    assert f.compared_with == "first_chunk_ms p50" and f.delta_pct == pytest.approx(-10.0)
    assert f.within is False
    tps = figures["output_tps"]
    assert tps.peer == point.figures.output_tps and tps.kit == kit.output_tps
    assert tps.delta_pct == pytest.approx((kit.output_tps - tps.peer) / tps.peer * 100)  # type: ignore[operator]
    # p99s are flagged too, never decide
    assert figures["ttft_p99"].peer == ttft.p99 and figures["ttft_p99"].within is not None
    assert agreement(list(figures.values())) is False
    kit_row = kit_figures(kit).figures
    assert kit_row["ttft_p50"] == kit.ttft_ms.p50  # kit's own row: its own TTFT, to text


def test_guidellm_and_aiperf_results_against_kit() -> None:
    imported, point = read_back(GUIDELLM)
    assert imported.tool == "guidellm"
    tpot = point.figures.tpot_ms
    ttft = point.figures.ttft_ms
    assert tpot is not None and tpot.median and ttft is not None and ttft.median
    kit = kit_point(tpot.median, ttft.median, ttft.median * 1.01)
    figures = by_key(compare_figures(point, imported.definitions, kit))
    # guidellm's TTFT is to the first token's text, as kit's ttft_ms
    assert figures["ttft_p50"].compared_with == "ttft_ms p50"
    assert figures["ttft_p50"].delta_pct == pytest.approx(1.0) and figures["ttft_p50"].within
    assert figures["tpot_p50"].within is True
    # guidellm has no per-chunk ITL: nothing compared, nothing flagged
    assert (figures["itl_p50"].peer, figures["itl_p50"].compared_with) == (None, None)
    assert figures["itl_p50"].within is None
    imported, point = read_back(AIPERF)
    assert imported.tool == "aiperf" and point.figures.itl_ms is not None
    figures = by_key(compare_figures(point, imported.definitions, None))
    # no kit point: the tool's figures stand alone, none compared
    assert figures["itl_p50"].peer == point.figures.itl_ms.median
    assert all(f.kit is None and f.within is None for f in figures.values())
    assert agreement(list(figures.values())) is None


def job_in(tmp_path: Path) -> PeerJob:
    bench = load_recipe(FIXTURES / "recipes" / "cpu-tiny.yaml").recipe.bench
    return PeerJob(
        url="http://127.0.0.1:9",
        model="kit-model",
        tokenizer=tmp_path,
        bench=bench,
        out_dir=tmp_path,
        python=sys.executable,
    )


POINT = TrafficPoint("concurrency-2", (Request("x", 4),) * 2, 0, Pacing(concurrency=2), 2.0)


def test_a_failed_or_unreadable_result_is_kept_with_its_log(tmp_path: Path) -> None:
    job = job_in(tmp_path)
    log = tmp_path / "peers" / "t" / "concurrency-2.log"
    log.parent.mkdir(parents=True)
    log.write_text("boom\n")
    missing = Invocation(["-m", "t"], tmp_path / "peers" / "t" / "r.json", log)
    entry = read_point(job, POINT, missing, None, None, sys.executable)
    assert entry.error == "it wrote no result file (see peers/t/concurrency-2.log)"
    assert entry.figures == [] and entry.agree is None
    assert entry.files == ["peers/t/concurrency-2.log"]
    failed = tmp_path / "peers" / "t" / "failed.json"
    shutil.copy(FAILED, failed)
    entry = read_point(job, POINT, Invocation(["-m", "t"], failed, log), None, None, sys.executable)
    assert entry.error is not None and entry.error.startswith(
        f"its result file cannot be read: {failed}: all 8 requests failed: nothing to reproduce"
    )


class Exits(Peer):
    """A tool whose process fails (exit 3, after a line of output)."""

    tool: ClassVar[PeerName] = "guidellm"
    name: ClassVar[str] = "failing tool"
    definitions: ClassVar = {}

    def environment(self, job: PeerJob) -> Env:
        return Env(sys.executable, "1.0", "this interpreter")

    def prepare(self, point: TrafficPoint, job: PeerJob, where: Path) -> Invocation:
        argv = ["-c", "import sys; print('refused: bad flag'); sys.exit(3)"]
        return Invocation(argv, where / f"{point.label}.json", where / f"{point.label}.log")


class Uninstallable(Exits):
    name: ClassVar[str] = "uninstallable tool"

    def environment(self, job: PeerJob) -> Env:
        raise InstallError("could not install tool==1.0:\n  no such version")


def test_a_tool_that_fails_never_fails_the_run(tmp_path: Path) -> None:
    job = job_in(tmp_path)
    peers = run_peers(job, [Exits(), Uninstallable()], None, None)
    assert peers.agree is None and peers.kit == []  # no kit result, no point: nothing ran
    run = run_peer(Exits(), job, [POINT], {})
    (entry,) = run.points
    assert entry.error == ("exit 3: refused: bad flag (see peers/guidellm/concurrency-2.log)")
    assert entry.argv[1:] == ["-c", "import sys; print('refused: bad flag'); sys.exit(3)"]
    assert (tmp_path / "peers" / "guidellm" / "concurrency-2.log").read_text() == (
        "refused: bad flag\n"
    )
    broken = run_peer(Uninstallable(), job, [POINT], {})
    assert (broken.version, broken.points, broken.source) == (None, [], "not installed")
    assert broken.error == "could not install tool==1.0:\n  no such version"
    # the report's notes: a line a tool, the figures stay in the block
    block = Peers(
        tolerance_pct=AGREEMENT_PCT, rule="", kit_definitions={}, kit=[], runs=[run, broken],
        agree=None,
    )  # fmt: skip
    assert summary_notes(block) == [
        "failing tool 1.0 failed at concurrency-2: its log in peers/guidellm/",
        "uninstallable tool did not run: could not install tool==1.0:",
    ]


def peers_block(kit: LoadPoint, job: PeerJob) -> Peers:
    """Peers as run_peers keeps them, from the three tools' real files at kit's point."""
    runs = []
    for tool, name, path in (
        ("vllm_bench", "vllm bench serve", VLLM),
        ("guidellm", "guidellm", GUIDELLM),
        ("aiperf", "AIPerf", AIPERF),
    ):
        where = job.out_dir / "peers" / tool
        where.mkdir(parents=True, exist_ok=True)
        result = where / path.name
        shutil.copy(path, result)
        inv = Invocation(["-m", tool], result, where / "x.log")
        entry = read_point(job, POINT, inv, None, kit, sys.executable)
        runs.append(
            {
                "tool": tool,
                "name": name,
                "version": "1",
                "source": "fixture",
                "points": [entry],
                "agree": entry.agree,
            }
        )
    return Peers.model_validate(
        {
            "tolerance_pct": AGREEMENT_PCT,
            "rule": "rule",
            "kit_definitions": {},
            "kit": [kit_figures(kit)],
            "runs": runs,
            "agree": False,
        }
    )


def test_the_side_by_side_table(fixtures_dir: Path, tmp_path: Path) -> None:
    kit = kit_point(11.0, 50.0, 52.0)
    peers = peers_block(kit, job_in(tmp_path))
    report = build_report(fixtures_dir).model_copy(update={"peers": peers})
    # the block survives the report's JSON as it is
    again = Report.model_validate(json.loads(report.model_dump_json()))
    assert again.peers == peers
    assert "peers" not in json.loads(build_report(fixtures_dir).model_dump_json())
    rows = side_by_side_rows(report)
    assert [(r.point, r.tool) for r in rows] == [
        ("concurrency-2", "kit"),
        ("concurrency-2", "vllm bench serve"),
        ("concurrency-2", "guidellm"),
        ("concurrency-2", "AIPerf"),
    ]
    kit_row, vllm, guidellm, aiperf = rows
    assert kit_row.values["tpot_p50"] == pytest.approx(11.0)
    assert vllm.compared_with == {
        "ttft_p50": "first_chunk_ms p50",
        "ttft_p99": "first_chunk_ms p99",
    }
    assert guidellm.values["itl_p50"] is None and aiperf.values["itl_p50"] is not None
    assert vllm.counted == "8/8" and aiperf.counted == "96/96"
    lines = peer_lines(report)
    assert lines[0] == (
        f"  beside kit (bench.peers): * outside ±{AGREEMENT_PCT:g} % of the tool's figure"
    )
    assert lines[1].split() == [
        "point", "tool", "done", "out", "tok/s", "TTFT", "p50/p99", "TPOT", "p50/p99", "ITL",
        "p50/p99", "agrees",
    ]  # fmt: skip
    body = lines[3:7]
    assert body[0].split()[:2] == ["concurrency-2", "kit"]
    assert body[1].split()[:4] == ["vllm", "bench", "serve", "1"]
    # every figure outside the tolerance is marked, and the verdict ends the row
    assert all(row.endswith(("NO", "yes", "-")) for row in body[1:])
    # kit's TPOT 11.0 ms is within 2 % of vLLM's median 11.2, not of its p99 12.0
    assert " 11.2/12.0* " in body[1] and vllm.within["tpot_p50"] is True
    assert lines[7:] == [
        "  agreement: rule",
        "  vllm bench serve's TTFT is compared with kit's first_chunk_ms",
    ]
    assert summary_notes(peers)[0] == (
        f"vllm bench serve 1 agrees with kit at 0 of 1 points (±{AGREEMENT_PCT:g} %; kit report "
        "show has the table)"
    )
    # kit report show prints it within the summary
    shown = show_table(report)
    assert "\n".join(lines) in shown
    assert peer_lines(build_report(fixtures_dir)) == []


def test_no_peers_beside_a_server_kit_was_given(fixtures_dir: Path, tmp_path: Path) -> None:
    """`kit bench --target`: no model kit built, so no tokenizer and no engine for the peers;
    the report says they did not run, and nothing fails."""
    loaded = load_recipe(
        fixtures_dir / "recipes" / "cpu-tiny.yaml", ["bench.peers=[guidellm, aiperf]"]
    )
    report = build_report(fixtures_dir)
    assert report.bench is not None
    measured = Measurement(result=report.bench)
    extras = after_bench(loaded, Setup(), "http://127.0.0.1:9", measured, None, tmp_path)
    assert extras.peers is None
    assert extras.notes == ("bench.peers not run: kit did not build the model this server serves",)
    assert not (tmp_path / "peers").exists()
