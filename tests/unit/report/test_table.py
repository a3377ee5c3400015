"""kit report table: the committed example reports (their copies in tests/fixtures/examples/, all
verifying against its keys/), a tampered copy and a report re-signed with a stranger's key (both
refused, exit 1, or listed apart with --include-unverified), a file that is not a report (exit 2),
the grouping and the cells of one example against the figures in the report itself, sections by
kind (single-stream decode, load-sweep peaks, INVALID runs, the verdict first) with the committed
load reports and the INVALID DFlash2 token0 run, well-formed Markdown, and the HTML page and
compare page as written."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kit.cli import main
from kit.report.files import read_report
from kit.report.table import (
    INVALID_COLUMNS,
    SINGLE_COLUMNS,
    SWEEP_COLUMNS,
    Table,
    build_table,
    markdown,
)
from kit.signing import canonical_bytes, generate_keypair, load_private_key, load_public_key
from kit.signing.envelope import sign_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KEYS = FIXTURES / "examples" / "keys"
EXAMPLES = sorted((FIXTURES / "examples" / "reports").glob("*.report.json"))
TP2 = FIXTURES / "examples" / "reports" / "h200x2-tp2.report.json"
SWEEP = FIXTURES / "results" / "h200-llama8b-bf16-sweep-2026-12-02-s2" / "report.json"
SWEEP_VALID = FIXTURES / "results" / "h200-llama8b-bf16-sweep-2026-12-03" / "report.json"
DFLASH2 = sorted((FIXTURES / "results").glob("h200-dflash2-*/*.report.json"))
TOKEN0 = FIXTURES / "results" / "h200-dflash2-2026-12-02" / "token0.report.json"  # INVALID
COMMITTED = [*EXAMPLES, SWEEP, SWEEP_VALID, *DFLASH2]
GROUP_2X = (
    "### synthetic Qwen3 (36L, h4096, seed 0), AutoRound INT4 g128 sym · "
    "2× NVIDIA H200, PCIe Gen5 x16/x16 · vllm 0.26.0"
)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["report", "table", *args])


def cells(line: str) -> list[str]:
    """A Markdown row's cells (escaped pipes stay inside a cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def tables(text: str) -> list[list[str]]:
    """Each Markdown table of the text as its lines."""
    out: list[list[str]] = []
    current: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            out.append(current)
            current = []
    return out


def envelope(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_bytes())
    return data


@pytest.fixture
def tampered(tmp_path: Path) -> Path:
    """h200x2-tp2 with one digit of its narrative decode mean changed inside the payload (218.57
    to 118.57, a change that keeps the payload canonical, so only the signature catches it)."""
    env = envelope(TP2)
    payload = base64.b64decode(str(env["payload"]))
    mean = b'"mean":218.56678806419922'
    assert payload.count(mean) == 1
    env["payload"] = base64.b64encode(payload.replace(mean, b'"mean":118.56678806419922')).decode()
    out = tmp_path / "tampered.report.json"
    out.write_bytes(canonical_bytes(env))
    return out


@pytest.fixture
def stranger(tmp_path: Path) -> Path:
    """h200x2-tp2's payload re-signed with a freshly generated key that is not in --keys."""
    pair = generate_keypair(tmp_path / "stranger-keys", "stranger")
    payload = json.loads(base64.b64decode(str(envelope(TP2)["payload"])))
    out = tmp_path / "stranger.report.json"
    out.write_bytes(sign_report(payload, load_private_key(pair.private_key)))
    return out


def test_every_example_verifies_and_is_listed() -> None:
    result = run(*map(str, EXAMPLES), "--keys", str(KEYS))
    assert result.exit_code == 0, result.output
    runs = {read_report(p, allow_untrusted=True)[0].run_id for p in EXAMPLES}
    rows = [
        line for line in result.output.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert len([r for r in rows if not r.startswith("| verdict ")]) == len(EXAMPLES)
    assert all(run_id in result.output for run_id in runs)
    assert "Unverified" not in result.output
    assert result.output.startswith("# Benchmarks\n\n4 report(s), each verified")


def test_grouping_and_cells_of_the_2x_h200_tp2_run() -> None:
    table = build_table(EXAMPLES, KEYS)
    groups = {key: [r.source for r in rows] for key, rows in table.groups()}
    assert list(groups) == sorted(groups)  # model, then rig, then engine
    two = groups[
        (
            "synthetic Qwen3 (36L, h4096, seed 0), AutoRound INT4 g128 sym",
            "2× NVIDIA H200, PCIe Gen5 x16/x16",
            "vllm 0.26.0",
        )
    ]
    assert sorted(Path(s).name for s in two) == ["h200-tp1.report.json", "h200x2-tp2.report.json"]
    row = next(r for r in table.rows if r.source == str(TP2))
    report, _ = read_report(TP2, load_public_key(KEYS / "example.pub"))
    assert report.bench is not None and report.gpu_sampling is not None
    narrative = next(p for p in report.bench.prompts if p.prompt == "narrative").decode_tps
    code = next(p for p in report.bench.prompts if p.prompt == "code").decode_tps
    prefill = {p.depth: p.prefill_tps for p in report.bench.prefill}
    assert narrative.mean == pytest.approx(218.57, abs=0.005)
    assert row.kind == "single-stream" and row.valid
    assert row.cells == {
        "verdict": "valid",
        "kind": "single-stream",
        "rig": "2× NVIDIA H200, PCIe Gen5 x16/x16",
        "power cap": "700/700 W",
        "interconnect": "NVLink",
        "custom all-reduce": "on (engine default)",
        "KV dtype": "auto",
        "max context": "100,000",
        "narrative decode TPS": f"221.7 [206.4-224.4] (mean {narrative.mean:.1f}, CV "
        f"{narrative.cv_pct:.1f}%)",
        "code decode TPS": f"222.5 [221.8-224.1] (mean {code.mean:.1f}, CV {code.cv_pct:.1f}%)",
        "prefill tok/s": f"{prefill[10000].mean:,.0f} @10k / {prefill[90000].mean:,.0f} @90k",
        "peak output tok/s": "-",
        "reached at": "-",
        "tok/s per stream there": "-",
        "peak VRAM": "130,429/130,429 MiB",
        "acceptance": "1.00 (0.0%)",
        "date": "2026-11-29",
        "key": "example (832b86a2770d)",
    }
    # the headline (the median of the five runs) leads; the Club-3090 mean is beside it
    assert row.cells["narrative decode TPS"] == "221.7 [206.4-224.4] (mean 218.6, CV 3.4%)"
    assert row.cells["prefill tok/s"] == "50,254 @10k / 25,273 @90k"
    assert [g.vram.peak_mib for g in report.gpu_sampling.summaries] == [130429, 130429]
    tp1 = next(r for r in table.rows if r.source.endswith("h200-tp1.report.json"))
    assert tp1.cells["interconnect"] == "NVLink (unused: TP 1)"
    assert tp1.cells["custom all-reduce"] == "n/a (TP 1)"
    assert tp1.cells["peak VRAM"] == "128,861/615 MiB"
    text = markdown(table)
    heading = text.index(GROUP_2X)
    assert text.index("20261129T234636Z-904b66") > heading  # the tp1 run, under its group
    assert text.index("20261129T233924Z-8b2092") > heading


def test_a_load_sweep_shows_its_peak_and_level_in_its_own_columns() -> None:
    table = build_table([SWEEP], KEYS)
    (row,) = table.rows
    report, _ = read_report(SWEEP, load_public_key(KEYS / "h200-2026-12-02-s2.pub"))
    assert report.bench is not None
    best = max(report.bench.load_points, key=lambda p: p.output_tps or 0)
    assert best.label == "concurrency-64" and best.tpot_ms.p50 is not None
    assert row.kind == "load sweep" and not row.valid
    assert row.cells["peak output tok/s"] == f"{best.output_tps:,.1f}" == "3,177.2"
    assert row.cells["reached at"] == "concurrency 64"
    assert row.cells["tok/s per stream there"] == f"{1000 / best.tpot_ms.p50:,.1f}"
    # the aggregate is never passed off as a decode figure
    assert row.cells["narrative decode TPS"] == row.cells["code decode TPS"] == "-"
    assert row.cells["verdict"] == "INVALID (incomplete)"
    assert row.decode_tps is None and row.sweep_peak_tps == best.output_tps
    assert row.rank == best.output_tps


@pytest.fixture(scope="module")
def committed() -> Table:
    """Every committed signed report copied under tests/fixtures, verified (built once)."""
    return build_table(COMMITTED, KEYS)


def test_markdown_is_well_formed(committed: Table) -> None:
    text = markdown(committed)
    found = tables(text)
    widths = {len(SINGLE_COLUMNS) + 1, len(SWEEP_COLUMNS) + 1, len(INVALID_COLUMNS) + 1}
    for lines in found:
        assert len({len(cells(line)) for line in lines}) == 1, lines
        assert len(cells(lines[0])) in widths
        assert set(lines[1]) <= set("|-")
    # a section per kind, a heading per model × rig × engine in each
    assert re.findall(r"^## (.*)$", text, re.M) == [
        "Single-stream decode",
        "Load-sweep peaks",
        "INVALID runs",
    ]
    assert text.count("\n### ") == len(found) == 6


def section_of(text: str, title: str) -> str:
    """A Markdown section's text, from its heading to the next one of its level."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_sections_separate_single_stream_sweeps_and_invalid_runs(committed: Table) -> None:
    table = committed
    assert not table.refused
    by_source = {Path(r.source): r for r in table.rows}
    token0 = by_source[TOKEN0]
    assert token0.kind == "single-stream" and not token0.valid
    assert token0.cells["verdict"] == "INVALID (decode-cv-high)"
    assert token0.cells["narrative decode TPS"].startswith("2,623.7 ")  # CV 13.5 %
    sections = {s.sid: s for s in table.sections()}
    assert list(sections) == ["single-stream", "load-sweep", "invalid"]
    single, sweeps, invalid = sections.values()
    # the verdict leads every section's columns
    assert single.columns == SINGLE_COLUMNS and single.columns[0] == "verdict"
    assert sweeps.columns == SWEEP_COLUMNS and sweeps.columns[0] == "verdict"
    assert invalid.columns == INVALID_COLUMNS and invalid.columns[:2] == ("verdict", "kind")
    assert "peak output tok/s" not in single.columns
    assert "narrative decode TPS" not in sweeps.columns
    # valid single-stream runs only, valid sweeps only, every INVALID run apart
    assert all(r.valid and r.kind == "single-stream" for r in single.rows)
    assert len(single.rows) == 6  # the 4 examples, 2 DFlash2 runs
    assert [Path(r.source) for r in sweeps.rows] == [SWEEP_VALID]
    assert {Path(r.source) for r in invalid.rows} == {TOKEN0, SWEEP}
    # the 2,623 tok/s INVALID run outranks every valid one by its figure, and is ranked with none
    assert all((token0.rank or 0) > (r.rank or 0) for r in single.rows)
    assert token0 not in single.rows

    text = markdown(table)
    decode = section_of(text, "Single-stream decode")
    assert "2,623.7" not in decode and "INVALID" not in decode and "3,17" not in decode
    for lines in tables(decode):
        assert cells(lines[0]) == [*SINGLE_COLUMNS, "run"]
    peaks = section_of(text, "Load-sweep peaks")
    (lines,) = tables(peaks)
    assert cells(lines[0]) == [*SWEEP_COLUMNS, "run"]
    assert cells(lines[2])[:1] == ["valid"]
    assert "3,174.8" in lines[2] and "concurrency 64" in lines[2]
    bad = section_of(text, "INVALID runs")
    rows = [cells(line) for lines in tables(bad) for line in lines[2:]]
    assert sorted(r[0] for r in rows) == ["INVALID (decode-cv-high)", "INVALID (incomplete)"]
    assert {r[1] for r in rows} == {"single-stream", "load sweep"}


def test_tampered_and_stranger_are_refused(tampered: Path, stranger: Path) -> None:
    result = run(str(EXAMPLES[0]), str(tampered), str(stranger), "--keys", str(KEYS))
    assert result.exit_code == 1
    assert result.stdout == ""
    err = result.stderr.splitlines()
    assert err[0] == f"error: 2 report(s) did not verify against the keys in {KEYS}:"
    assert (
        f"error: {tampered}: signature: the signature does not match the payload: the report "
        "was altered" in err
    )
    stranger_id = json.loads(stranger.read_bytes())["signatures"][0]["keyid"]
    assert (
        f"error: {stranger}: signed by key {stranger_id}, which is not among the keys in {KEYS}"
        in err
    )
    assert not [line for line in err if "skipped" in line]  # the failed item, not the skips
    assert len(err) == 4  # the count, one line per file, the hint
    assert err[-1].startswith("hint: remove them, add their signer's .pub to --keys")


def test_include_unverified_lists_them_apart(
    tampered: Path, stranger: Path, tmp_path: Path
) -> None:
    out = tmp_path / "BENCHMARKS.md"
    html = tmp_path / "table.html"
    args = [str(p) for p in (*EXAMPLES, tampered, stranger)]
    result = run(
        *args, "--keys", str(KEYS), "--include-unverified", "-o", str(out), "--html", str(html)
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    main_part, unverified = text.split("\n## Unverified\n")
    assert str(tampered) not in main_part and str(stranger) not in main_part
    rows = tables(unverified)[0]
    assert len(rows) == 4  # header, rule, two files
    assert cells(rows[0])[:4] == ["signature", "verdict", "file", "why refused"]
    assert cells(rows[2])[:3] == ["UNVERIFIED", "UNVERIFIED valid", str(tampered)]
    assert "the report was altered" in cells(rows[2])[3]
    # what the tampered file claims, shown unchecked, apart, led by its label
    assert "UNVERIFIED 221.7 [206.4-224.4] (mean 118.6" in rows[2]
    assert cells(rows[3])[:3] == ["UNTRUSTED", "UNTRUSTED valid", str(stranger)]
    assert "which is not among the keys" in cells(rows[3])[3]
    assert "mean 118.6" not in main_part
    page = html.read_text()
    assert page.count('<tr class="g') == len(EXAMPLES) + 2
    assert '<section id="unverified">' in page
    assert page.index(str(tampered)) > page.index('<section id="unverified">')


def test_unsigned_report_is_refused(tmp_path: Path) -> None:
    payload = json.loads(base64.b64decode(str(envelope(TP2)["payload"])))
    from kit.signing import unsigned_report

    unsigned = tmp_path / "unsigned.report.json"
    unsigned.write_bytes(unsigned_report(payload))
    result = run(str(unsigned), "--keys", str(KEYS))
    assert result.exit_code == 1
    assert (
        f"error: {unsigned}: unsigned: nothing shows who wrote it or that it is unaltered"
        in result.stderr.splitlines()
    )


def test_a_file_that_is_not_a_report_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    result = run(str(EXAMPLES[0]), str(bad), "--keys", str(KEYS))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {bad}: the report file is not a kit report envelope (found ['hello'])",
        "hint: expected exactly the keys payloadType, payload and signatures",
    ]


def test_keys_dir_without_keys_exits_2(tmp_path: Path) -> None:
    result = run(str(EXAMPLES[0]), "--keys", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == f"error: {tmp_path}: no public key (*.pub) in it"


def test_compare_html_shows_both_runs_and_bands(tmp_path: Path) -> None:
    a = FIXTURES / "examples" / "reports" / "h200-tp1-resolve.report.json"
    b = FIXTURES / "examples" / "reports" / "h200-tp1-rerun.report.json"
    out = tmp_path / "compare.html"
    key = KEYS / "h200-2026-12.pub"
    result = CliRunner().invoke(
        main, ["report", "compare", str(a), str(b), "--key", str(key), "--html", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("A: 20261201T151732Z-811bf3")  # the text is unchanged
    page = out.read_text()
    row = re.search(r'<tr id="m-0">(.*?)</tr>', page)
    assert row is not None
    # the headlines (medians) with the one band of kit.noise, as the terminal table and the
    # verdict show them
    assert re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1)) == [
        "narrative decode TPS *",
        "tok/s",
        "177.11",
        "185.40",
        "+8.28",
        "+4.7",
        "6.4",
        "within",
    ]
    # J/token -9.0 %: within its tolerance of ±12 % (docs/figures.md); the TTFTs of 5 runs,
    # ±26-33 %, within a latency's 35 %
    assert re.search(r"<td>energy[^<]*</td>(<td[^>]*>[^<]*</td>){5}<td[^>]*>within</td>", page)
    assert "INCONCLUSIVE (band too wide)" not in page
    assert "20261201T151732Z-811bf3" in page and "20261201T175553Z-c46ae3" in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")


def test_html_page_has_a_table_per_section_verdict_first(committed: Table, tmp_path: Path) -> None:
    from kit.report.html.table import table_page

    page = table_page(committed)
    assert re.findall(r'<section id="([a-z-]+)">', page) == [
        "single-stream",
        "load-sweep",
        "invalid",
    ]
    tables_by_id = dict(re.findall(r'<table class="runs" id="([a-z-]+)">(.*?)</table>', page, re.S))
    assert list(tables_by_id) == ["runs", "sweeps", "invalid-runs"]
    runs_of = {
        tid: re.findall(r'<td class="mono run">([^<]+)</td></tr>', body)
        for tid, body in tables_by_id.items()
    }
    token0 = next(r for r in committed.rows if Path(r.source) == TOKEN0)
    assert token0.run_id in runs_of["invalid-runs"]
    assert token0.run_id not in runs_of["runs"]  # a click on a header never ranks it there
    assert len(runs_of["runs"]) == 6 and len(runs_of["sweeps"]) == 1
    for tid, body in tables_by_id.items():
        heads = re.findall(r"<th [^>]*>([^<]+)</th>", body)
        assert heads[:3] == ["verdict", "model / quant", "engine"], tid
        assert heads[-1] == "run"
    sweeps = re.findall(r"<th [^>]*>([^<]+)</th>", tables_by_id["sweeps"])
    assert "peak output tok/s" in sweeps and "narrative decode TPS" not in sweeps
