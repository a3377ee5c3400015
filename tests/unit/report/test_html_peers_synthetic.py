"""The report page's sections for what other stages added to a report: the peer tools beside
kit (bench.peers, docs/peers.md) as a side-by-side table with their definitions, and a run at a
synthetic acceptance (docs/synthetic-acceptance.md) labelled under the title, its target drawn
over the acceptance per draft position. Each from a cpu-tiny report as kit writes it
(tests/factories.py), signed, read back and rendered for real, and checked against the
report's own values; each absent without its data."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import ClassVar

import pytest

pytest.importorskip("matplotlib", reason="kit's html extra: pip install 'kit[html]'")

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from factories import build_report

from kit.installer import InstallError
from kit.metrics import add_spec, spec_decode_from_counts
from kit.peers import AIPerf, Env, GuideLLM, Invocation, PeerJob, TrafficPoint, VllmBenchPeer
from kit.peers.run import run_peers
from kit.peers.schema import FIGURES
from kit.recipe import load_recipe
from kit.report import Report
from kit.report.causes import synthetic_check
from kit.report.describe import synthetic_label
from kit.report.files import read_report, write_report
from kit.report.html import render_html
from kit.report.html.charts import target_band
from kit.report.html.crosscheck import crosscheck_section
from kit.report.html.peers import peers_section
from kit.report.show import side_by_side_rows
from kit.report.validity import verdict
from kit.signing import SignatureCheck

FOREIGN = Path(__file__).parents[2] / "fixtures" / "foreign"
VLLM = FOREIGN / "vllm" / "bench-serve-v0.25.1-opt125m-c2-cpu.json"
GUIDELLM = FOREIGN / "guidellm" / "v0.8dev-schema-v2-mockserver-llmd-fixture.json"
N = 2000  # drafts per prompt window


def signed(report: Report, tmp_path: Path) -> tuple[Report, SignatureCheck]:
    """The report written, signed with a fresh key, and read back as kit report html reads it."""
    key = Ed25519PrivateKey.generate()
    path = write_report(report, tmp_path / "run", key)
    return read_report(path, key.public_key())


def section(page: str, sid: str) -> str | None:
    found = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    return found.group(1) if found else None


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def tables(fragment: str) -> list[list[list[str]]]:
    """Each table of the fragment: its body rows, as their cells' text."""
    out = []
    for table in re.findall(r"<table>(.*?)</table>", fragment, re.S):
        body = re.findall(r"<tbody>(.*?)</tbody>", table, re.S)[0]
        out.append(
            [
                [text(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
                for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S)
            ]
        )
    return out


# ---------------------------------------------------------------------------------------------
# peers


class Recorded:
    """A tool that gives back a real result file of its own (tests/fixtures/foreign/) at each
    of kit's points, as if it had just written it there; at the ``failing`` points it exits
    with an error and writes none."""

    result: ClassVar[Path]
    version: ClassVar[str]
    failing: ClassVar[frozenset[str]] = frozenset()

    def environment(self, job: PeerJob) -> Env:
        return Env("python", self.version, "tests/fixtures/foreign")

    def prepare(self, point: TrafficPoint, job: PeerJob, where: Path) -> Invocation:
        inv = Invocation(
            ["-m", "tool"], where / f"{point.label}.json", where / f"{point.label}.log"
        )
        inv.log.write_text("")
        if point.label not in self.failing:
            shutil.copy(self.result, inv.result)
        return inv

    def run(
        self, env: Env, plan: dict[str, tuple[TrafficPoint, Invocation]], job: PeerJob
    ) -> dict[str, str | None]:
        return {label: "exit 2: refused" if label in self.failing else None for label in plan}


class RecordedVllm(Recorded, VllmBenchPeer):
    result = VLLM
    version = "0.25.1"


class RecordedGuidellm(Recorded, GuideLLM):
    result = GUIDELLM
    version = "0.8.0.dev"
    failing = frozenset({"code"})


class NotInstalled(AIPerf):
    def environment(self, job: PeerJob) -> Env:
        raise InstallError("could not install aiperf==0.13.0: no such version")


@pytest.fixture(scope="module")
def with_peers(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Report:
    """A cpu-tiny run with three peers beside its prompts: vLLM's at each, guidellm's failing
    at one, AIPerf not installed; the block as run_peers keeps it. Its records carry the first
    chunk with choices (as kit's records do where the server sends one before the text), so
    vLLM's TTFT is compared with it."""
    report = build_report(fixtures_dir)
    assert report.bench is not None
    records = [
        r.model_copy(update={"first_chunk_s": r.ttft_s * 0.9 if r.ttft_s else None})
        for r in report.bench.records
    ]
    report = report.model_copy(
        update={"bench": report.bench.model_copy(update={"records": records})}
    )
    out = tmp_path_factory.mktemp("peers")
    job = PeerJob(
        url="http://127.0.0.1:9",
        model="kit-model",
        tokenizer=out,
        bench=load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml").recipe.bench,
        out_dir=out,
        python="python",
    )
    tools = [RecordedVllm(), RecordedGuidellm(), NotInstalled()]
    return report.model_copy(update={"peers": run_peers(job, tools, report.bench, None)})


@pytest.fixture(scope="module")
def peers_page(with_peers: Report, tmp_path_factory: pytest.TempPathFactory) -> str:
    report, check = signed(with_peers, tmp_path_factory.mktemp("signed"))
    assert report.peers == with_peers.peers  # the block survives the signed report
    return render_html(report, check)


def test_peers_table_shows_each_tools_figures_beside_kits(
    with_peers: Report, peers_page: str
) -> None:
    peers = with_peers.peers
    assert peers is not None
    body = section(peers_page, "peers")
    assert body is not None
    table = tables(body)[0]
    kit = {p.label: p.figures for p in peers.kit}
    prompts = [p.prompt for p in with_peers.bench.prompts] if with_peers.bench else []
    assert list(kit) == prompts and len(table) == len(prompts) * (1 + len(peers.runs))
    cols = 3  # point, tool, requests done; then one column a figure
    for i, prompt in enumerate(prompts):
        mine, *theirs = table[i * 4 : i * 4 + 4]
        assert mine[:2] == [prompt, "kit"]
        for j, spec in enumerate(FIGURES):
            value = kit[prompt][spec.key]
            assert mine[cols + j] == ("-" if value is None else f"{value:,.2f}")
        vllm = next(r for r in peers.runs if r.name == "vllm bench serve")
        point = next(p for p in vllm.points if p.label == prompt)
        row = theirs[0]
        counted = f"{point.completed}/{point.requests}"
        assert row[:3] == ["", f"vllm bench serve {vllm.version}", counted]
        for f in point.figures:
            j = [s.key for s in FIGURES].index(f.key)
            cell = row[cols + j]
            assert cell.startswith("-" if f.peer is None else f"{f.peer:,.2f}")
            if f.delta_pct is not None:
                assert f"({f.delta_pct:+.1f} %)" in cell
            assert cell.endswith(" outside") == (f.within is False)
        assert row[-2] == {True: "yes", False: "no", None: "not compared"}[point.agree]


def test_a_failed_tool_shows_its_error_and_the_definitions_each_tool_uses(
    with_peers: Report, peers_page: str
) -> None:
    peers = with_peers.peers
    assert peers is not None
    body = section(peers_page, "peers")
    assert body is not None
    rows = side_by_side_rows(with_peers)
    table = tables(body)[0]
    assert len(table) == len(rows)
    failed = [(r, cells) for r, cells in zip(rows, table, strict=True) if r.error]
    guidellm = next(r for r in peers.runs if r.name == "guidellm")
    aiperf = next(r for r in peers.runs if r.name == "AIPerf")
    broken = next(p for p in guidellm.points if p.error)
    assert broken.label == "code" and aiperf.error is not None
    assert [(r.tool, cells[-2], cells[-1]) for r, cells in failed] == [
        ("AIPerf", "failed", aiperf.error),
        ("guidellm", "failed", broken.error),
        ("AIPerf", "failed", aiperf.error),
    ]
    assert text(body).count(f"{aiperf.name} did not run: {aiperf.error}") == 1
    # vLLM's TTFT is compared with kit's first chunk, and the page says so
    vllm = next(r for r in rows if r.tool == "vllm bench serve")
    assert vllm.compared_with  # its TTFT p50 and p99
    for key, theirs in vllm.compared_with.items():
        title = next(s.title for s in FIGURES if s.key == key)
        assert f"vllm bench serve's {title} is compared with kit's {theirs}" in text(body)
    definitions = tables(body)[1]
    assert [row[0] for row in definitions] == ["output tok/s", "TTFT", "TPOT", "ITL"]
    figures = ["output_tps", "ttft_ms", "tpot_ms", "itl_ms"]
    for row, figure in zip(definitions, figures, strict=True):
        assert row[1] == peers.kit_definitions[figure].removeprefix("kit: ")
        for cell, run in zip(row[2:], peers.runs, strict=True):
            stated = run.definitions.get(figure, "not stated: compared with kit's")
            assert cell == (stated if run.definitions else "-")  # AIPerf never ran
    assert peers.rule in text(body)


def test_no_peers_section_without_the_block(fixtures_dir: Path, tmp_path: Path) -> None:
    page = render_html(*signed(build_report(fixtures_dir), tmp_path))
    assert section(page, "peers") is None and "peers-agree" not in page
    # a report with only vLLM's older cross-check keeps that section, and no peers one
    sweep = fixtures_dir / "results/h200-llama8b-bf16-sweep-2026-12-03/report.json"
    report, _ = read_report(sweep, None, allow_untrusted=True)
    assert report.vllm_bench is not None and report.peers is None
    assert peers_section(report) is None and crosscheck_section(report) is not None


# ---------------------------------------------------------------------------------------------
# synthetic acceptance


def counted(report: Report, rates: list[float]) -> Report:
    """The report with every prompt's spec-decode counters at ``rates`` over N drafts, the
    synthetic check and the verdict recomputed (as tests/unit/report/test_synthetic_acceptance
    sets them)."""
    assert report.bench is not None
    per_pos = [round(N * r) for r in rates]
    sd = spec_decode_from_counts(N, N * len(rates), sum(per_pos), per_pos)
    prompts = [p.model_copy(update={"spec_decode": sd}) for p in report.bench.prompts]
    overall = add_spec(p.spec_decode for p in prompts if p.spec_decode is not None)
    bench = report.bench.model_copy(update={"prompts": prompts, "spec_decode": overall})
    out = report.model_copy(update={"bench": bench})
    out = out.model_copy(update={"synthetic_acceptance": synthetic_check(out)})
    return out.model_copy(update={"validity": verdict(out, out.host, out.gpu_sampling)})


C = 0.7


def at_target(fixtures_dir: Path, *sets: str) -> Report:
    """cpu-tiny (7 draft tokens) whose counters accept at a geometric c = C."""
    report = build_report(fixtures_dir, overrides=sets)
    return counted(report, [C**i for i in range(1, 8)])


def marks(svg: str) -> int:
    return len(re.findall(r'id="spec-mark-\d+"', svg))


def test_a_synthetic_run_is_labelled_under_the_title(fixtures_dir: Path, tmp_path: Path) -> None:
    report = at_target(fixtures_dir, f"speculative.synthetic_acceptance.conditional={C}")
    label = synthetic_label(report)
    assert label is not None and report.synthetic_acceptance is not None
    page = render_html(*signed(report, tmp_path))
    banner = re.search(r'<div class="banner warnb" id="synthetic">(.*?)</div>', page)
    assert banner is not None and html.unescape(banner.group(1)) == label
    assert page.index("</h1>") < banner.start() < page.index("<section")
    # the chart: the target over the achieved bars, with the verdict's tolerance
    spec = section(page, "spec")
    assert spec is not None
    al = report.synthetic_acceptance.target.acceptance_length
    assert f"synthetic target (AL {al:.2f})" in spec
    assert "verdict's tolerance (widest window)" in spec
    k = len(report.synthetic_acceptance.target.rates)
    assert marks(spec) == 2 * k  # a bar and a target line per position
    real = render_html(*signed(at_target(fixtures_dir), tmp_path / "real"))
    real_spec = section(real, "spec")
    assert real_spec is not None and marks(real_spec) == k
    assert 'id="synthetic"' not in real and "synthetic target" not in real_spec


def test_the_target_band_holds_the_rates_of_a_run_that_met_it(fixtures_dir: Path) -> None:
    report = at_target(fixtures_dir, f"speculative.synthetic_acceptance.conditional={C}")
    check = report.synthetic_acceptance
    assert check is not None and report.bench and report.bench.spec_decode
    assert check.windows and all(w.met for w in check.windows)
    band = target_band(report)
    assert [p for p, _, _ in band] == pytest.approx([r * 100 for r in check.target.rates])
    for (p, lo, hi), achieved, i in zip(
        band, report.bench.spec_decode.per_position_rate, range(len(band)), strict=True
    ):
        widest = max(w.position_tolerance[i] for w in check.windows) * 100
        assert lo == pytest.approx(p - widest) and hi == pytest.approx(p + widest)
        assert lo <= achieved * 100 <= hi
    # a run that missed its target: the achieved rates lie outside the band somewhere
    missed = at_target(fixtures_dir, "speculative.synthetic_acceptance.conditional=0.9")
    assert missed.synthetic_acceptance is not None
    assert not all(w.met for w in missed.synthetic_acceptance.windows)
    assert missed.bench is not None and missed.bench.spec_decode is not None
    outside = [
        not lo <= r * 100 <= hi
        for (_, lo, hi), r in zip(
            target_band(missed), missed.bench.spec_decode.per_position_rate, strict=True
        )
    ]
    assert any(outside)
    assert target_band(at_target(fixtures_dir)) == []
