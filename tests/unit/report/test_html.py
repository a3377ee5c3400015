"""kit report html: every committed report rendered for real (matplotlib, no fakes), its
sections in order, every chart with drawn data, nothing fetched from a network, the signature
check stated, a tampered report refused or labelled."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib", reason="kit's html extra: pip install 'kit[html]'")

from kit.cli import main
from kit.errors import VerificationFailed
from kit.report.files import read_report
from kit.report.html import render_html
from kit.report.html.sweep import pareto_front
from kit.signing import load_public_key
from kit.signing.keys import fingerprint

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EXAMPLES = sorted((FIXTURES / "examples" / "reports").glob("*.report.json"))
SWEEP = FIXTURES / "results" / "h200-llama8b-bf16-sweep-2026-12-02-s2" / "report.json"
SWEEP_KEY = FIXTURES / "examples" / "keys" / "h200-2026-12-02-s2.pub"
ORDER = (
    "verdict",
    "rig",
    "decode",
    "ttft",
    "prefill",
    "spec",
    "roofline",
    "crosscheck",
    "timeline",
    "energy",
    "events",
    "load",
    "client",
    "provenance",
)
SVG = re.compile(r"<svg\b.*?</svg>", re.S)


def key_for(path: Path) -> Path | None:
    """The committed public key whose fingerprint the report's signature names."""
    keyid = json.loads(path.read_bytes())["signatures"][0]["keyid"]
    for pub in sorted((FIXTURES / "examples" / "keys").glob("*.pub")):
        if fingerprint(load_public_key(pub)) == keyid:
            return pub
    return None


def section_ids(page: str) -> list[str]:
    return re.findall(r'<section id="([a-z]+)"', page)


def drawn_marks(svg: str) -> int:
    """Data artists (ids ``<figure>-mark-N``) that drew geometry: a path with a d, a use, a rect."""
    tree = ET.fromstring(svg)
    count = 0
    for g in tree.iter("{http://www.w3.org/2000/svg}g"):
        if "-mark-" not in g.get("id", ""):
            continue
        shapes = [
            e
            for e in g.iter()
            if (e.tag.endswith("path") and e.get("d", "").strip())
            or e.tag.endswith("}use")
            or e.tag.endswith("}rect")
        ]
        count += bool(shapes)
    return count


def external_resources(page: str) -> list[str]:
    """Anything the browser would fetch from a network: src/href/url() to http(s) or //."""
    refs = re.findall(r"""(?:src|href)\s*=\s*["']\s*((?:https?:)?//[^"']*)""", page, re.I)
    refs += re.findall(r"url\(\s*['\"]?((?:https?:)?//[^)]*)", page, re.I)
    refs += re.findall(r"@import[^;]*", page)
    return refs


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    out = {}
    for path in EXAMPLES:
        pub = key_for(path)
        key = load_public_key(pub) if pub else None
        report, check = read_report(path, key, allow_untrusted=pub is None)
        out[path.name] = render_html(report, check)
    report, check = read_report(SWEEP, load_public_key(SWEEP_KEY))
    out["sweep"] = render_html(report, check)
    return out


def test_every_committed_report_has_a_key_here() -> None:
    assert EXAMPLES, "tests/fixtures/examples/reports/*.report.json are missing"
    assert all(key_for(p) is not None for p in EXAMPLES)


@pytest.mark.parametrize("name", [p.name for p in EXAMPLES])
def test_sequential_report_sections_in_order(pages: dict[str, str], name: str) -> None:
    page = pages[name]
    # the committed H200 runs have a roofline and a cross-check, and no warning with a place
    assert section_ids(page) == [s for s in ORDER if s not in ("events", "load", "client")]
    assert "signature VALID" in page
    assert "Decode throughput per measured run" in page
    assert "± " in page  # mean ± std of the measured runs


def test_sweep_report_sections_and_charts(pages: dict[str, str]) -> None:
    page = pages["sweep"]
    # a load sweep has no sequential runs, prefill probe, spec decode or roofline: those are left
    # out; it asked for the cross-check and was interrupted first, so that says not measured
    assert section_ids(page) == [
        "verdict",
        "rig",
        "crosscheck",
        "timeline",
        "energy",
        "events",
        "load",
        "client",
        "provenance",
    ]
    for title in (
        "Output throughput against load",
        "TTFT p50 / p99",
        "TPOT p50 / p99",
        "ITL p50 / p99",
        "Throughput per GPU against interactivity",
        "Pareto front",
        "concurrency-64",
    ):
        assert title in page, title
    assert len(SVG.findall(page)) == 4  # timeline, throughput, latency, Pareto


@pytest.mark.parametrize("name", [*[p.name for p in EXAMPLES], "sweep"])
def test_every_svg_has_drawn_marks_and_nothing_is_fetched(pages: dict[str, str], name: str) -> None:
    page = pages[name]
    svgs = SVG.findall(page)
    assert svgs
    for svg in svgs:
        assert drawn_marks(svg) >= 1, svg[:200]
    assert external_resources(page) == []
    assert "<script" not in page and "<link" not in page and "<img" not in page


@pytest.mark.parametrize("name", [*[p.name for p in EXAMPLES], "sweep"])
def test_verdict_comes_first(pages: dict[str, str], name: str) -> None:
    page = pages[name]
    body = page[page.index("<main>") :]
    first = body.index('id="verdict-text"')
    assert first < body.index('id="verification"') < body.index('<section id="rig"')
    assert first < min(body.index(m) for m in ("<svg", "<table"))


def test_sweep_verdict_lists_every_reason_errors_apart(pages: dict[str, str]) -> None:
    page = pages["sweep"]
    assert "Verdict: INVALID (1 error), 2 warnings" in page
    errors = re.findall(r'<li class="error"><b>ERROR</b> <code>([^<]+)</code>', page)
    warnings = re.findall(r'<li class="warning"><b>WARNING</b> <code>([^<]+)</code>', page)
    assert errors == ["incomplete"]
    assert warnings == ["gpu-clocks-limited", "not-canonical"]
    assert "interrupted by the user" in page


def test_rig_and_provenance_facts(pages: dict[str, str]) -> None:
    page = pages["h200x2-tp2.report.json"]
    rig = page[page.index('<section id="rig"') : page.index('<section id="decode"')]
    for fact in ("NVIDIA H200", "143771 MiB", "700 W", "Gen5 x16", "NVLink", "580.159.04"):
        assert fact in rig, fact
    assert "redacted:" in rig and "(redacted)" in rig
    prov = page[page.index('<section id="provenance"') :]
    src = FIXTURES / "examples" / "reports" / "h200x2-tp2.report.json"
    report, check = read_report(src, load_public_key(key_for(src)))  # type: ignore[arg-type]
    assert report.recipe_sha256 in prov
    assert f"signed by key {check.keyid}: signature VALID" in prov
    assert report.model is not None and report.model.identity in prov


def test_output_is_deterministic() -> None:
    path = EXAMPLES[0]
    pub = key_for(path)
    assert pub is not None
    report, check = read_report(path, load_public_key(pub))
    assert render_html(report, check) == render_html(report, check)


def _tampered(src: Path, dest: Path) -> Path:
    """The report with one digit of a decode figure changed in its signed payload."""
    env = json.loads(src.read_bytes())
    payload = base64.b64decode(env["payload"])
    found = re.search(rb'"decode_tps":(\d)', payload)  # the first per-run figure
    assert found is not None
    at, digit = found.start(1), found.group(1)
    changed = payload[:at] + (b"1" if digit != b"1" else b"2") + payload[at + 1 :]
    raw = src.read_bytes()  # the envelope's own bytes stay as kit wrote them
    dest.write_bytes(raw.replace(env["payload"].encode(), base64.b64encode(changed)))
    return dest


def test_tampered_report_is_refused(tmp_path: Path) -> None:
    src = EXAMPLES[0]
    bad = _tampered(src, tmp_path / "report.json")
    pub = key_for(src)
    assert pub is not None
    with pytest.raises(VerificationFailed):
        read_report(bad, load_public_key(pub))
    result = CliRunner().invoke(main, ["report", "html", str(bad), "--key", str(pub)])
    assert result.exit_code == 1
    assert not (tmp_path / "report.html").exists()


def test_tampered_report_read_untrusted_is_labelled(tmp_path: Path) -> None:
    bad = _tampered(EXAMPLES[0], tmp_path / "report.json")
    out = tmp_path / "page.html"
    result = CliRunner().invoke(
        main, ["report", "html", str(bad), "--allow-untrusted", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "UNTRUSTED, signature not checked" in page
    assert "signature VALID" not in page


def test_cli_writes_a_page_named_after_the_report_beside_it(tmp_path: Path) -> None:
    # every example report in one folder: each gets its own page, none overwrites another
    folder = tmp_path / "run"
    folder.mkdir()
    pages = {}
    for src in EXAMPLES:
        copy = folder / src.name
        copy.write_bytes(src.read_bytes())
        result = CliRunner().invoke(main, ["report", "html", str(copy), "--key", str(key_for(src))])
        assert result.exit_code == 0, result.output
        out = folder / src.name.replace(".report.json", ".report.html")
        assert result.output.strip() == str(out)
        pages[out] = out.read_text()
    assert len(pages) == len(EXAMPLES) == 4
    assert sorted(p.name for p in folder.glob("*.html")) == sorted(p.name for p in pages)
    assert all(section_ids(page)[0] == "verdict" for page in pages.values())
    titles = {t for page in pages.values() for t in re.findall(r"<title>(.*?)</title>", page)}
    assert len(titles) == 4  # each page its own run


@pytest.mark.parametrize(
    ("name", "page"),
    [
        ("report.json", "report.html"),
        ("run-a.json", "run-a.html"),
        ("h200.report.json", "h200.report.html"),
        ("report", "report.html"),
        ("notes.txt", "notes.txt.html"),
    ],
)
def test_default_page_name(name: str, page: str) -> None:
    from kit.report.html import html_path

    assert html_path(Path("runs") / name) == Path("runs") / page


def test_without_matplotlib_the_error_names_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from kit.cli import main\n"
        f"main(['report', 'html', {str(EXAMPLES[0])!r}, '--allow-untrusted',"
        f" '-o', {str(tmp_path / 'x.html')!r}])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    assert "error: kit report html draws its charts with matplotlib, which is not installed" in (
        proc.stderr
    )
    assert "hint: pip install 'kit[html]'" in proc.stderr
    assert not (tmp_path / "x.html").exists()


def test_pareto_front_keeps_only_undominated_points() -> None:
    pts = [(200.0, 185.0), (190.0, 336.0), (185.0, 300.0), (144.0, 1791.0), (100.0, 1000.0)]
    assert pareto_front(pts) == [(144.0, 1791.0), (190.0, 336.0), (200.0, 185.0)]


def test_reference_figures_are_drawn_as_lines() -> None:
    path = EXAMPLES[0]
    report, check = read_report(path, load_public_key(key_for(path)))  # type: ignore[arg-type]
    reference = {
        "source": "a post",
        "prompts": {"narrative": {"decode_tps": 250.0, "ttft_ms": 30.0}},
        "prefill_tps": {"10000": 40000.0},
    }
    recipe = {**report.recipe, "reference": reference}
    page = render_html(report.model_copy(update={"recipe": recipe}), check)
    decode = page[page.index('<section id="decode"') : page.index('<section id="ttft"')]
    ttft = page[page.index('<section id="ttft"') : page.index('<section id="prefill"')]
    prefill = page[page.index('<section id="prefill"') : page.index('<section id="spec"')]
    assert "narrative: reference 250" in decode
    assert "narrative: reference 30" in ttft
    assert ">reference<" in prefill
    plain = render_html(report, check)
    for svg_with, svg_without in zip(SVG.findall(page)[:3], SVG.findall(plain)[:3], strict=True):
        assert drawn_marks(svg_with) > drawn_marks(svg_without)


def test_unsigned_report_is_labelled_unsigned(tmp_path: Path) -> None:
    from kit.signing import unsigned_report

    env = json.loads(EXAMPLES[0].read_bytes())
    data = json.loads(base64.b64decode(env["payload"]))
    path = tmp_path / "report.json"
    path.write_bytes(unsigned_report(data))
    refused = CliRunner().invoke(main, ["report", "html", str(path)])
    assert refused.exit_code == 1
    assert "the report is unsigned" in refused.output
    result = CliRunner().invoke(main, ["report", "html", str(path), "--allow-unsigned"])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "report.html").read_text()
    assert "Verification at render time: UNSIGNED" in page
    assert "signature key fingerprint</th><td>none (unsigned)" in page
