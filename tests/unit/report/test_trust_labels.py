"""Trust labels survive every view (issue 34): a run read with --allow-untrusted (signed by a key
neither given nor trusted) is labelled UNTRUSTED, and one read with --allow-unsigned UNSIGNED, on
every figure of `kit report show` (table and Markdown), `kit report compare` (text, JSON and
--html), `kit report table` (Markdown and --html) and `kit report html`, not once at the top."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clirun import kit

from kit.report.table import INVALID_COLUMNS, LABELLED, UNVERIFIED_HEAD

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REPORTS = FIXTURES / "reports"
SIGNED = REPORTS / "cpu-tiny-a.signed.json"  # signer.pub, trusted nowhere in these tests
UNSIGNED_A, UNSIGNED_B = REPORTS / "cpu-tiny-a.json", REPORTS / "cpu-tiny-b.json"
KEYS = FIXTURES / "examples" / "keys"  # signer.pub is not among them
EXAMPLE = FIXTURES / "examples" / "reports" / "h200-tp1-rerun.report.json"
SWEEP = FIXTURES / "results" / "h200-llama8b-bf16-sweep-2026-12-02-s2" / "report.json"
# each view's input, read as allowed, and the label its figures carry
CASES = [
    pytest.param(SIGNED, "--allow-untrusted", "UNTRUSTED", id="untrusted"),
    pytest.param(UNSIGNED_A, "--allow-unsigned", "UNSIGNED", id="unsigned"),
]
pytest.importorskip("matplotlib", reason="kit's html extra: pip install 'kit[html]'")


def md_cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def section(page: str, sid: str) -> str:
    found = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert found is not None, sid
    return found.group(1)


def body_rows(html: str) -> list[list[str]]:
    """Each body row of the tables in ``html`` as its cells' text (tags stripped)."""
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S):
        if "<th" in tr:
            continue
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        rows.append([re.sub(r"<[^>]+>", "", c) for c in cells])
    return rows


# ---------------------------------------------------------------------------------------------
# kit report show


@pytest.mark.parametrize(("path", "allow", "label"), CASES)
def test_show_labels_every_line_and_row(path: Path, allow: str, label: str) -> None:
    table = kit("report", "show", path, allow, code=0).stdout
    lines = [line for line in table.splitlines() if line]
    assert all(line.startswith(f"{label}  ") for line in lines)
    figures = [line for line in lines if re.search(r"\b(narrative|code) +\d", line)]
    assert len(figures) == 2  # the per-prompt rows are among them
    rows = kit(
        "report", "show", "--markdown", "--header", path, path, allow, code=0
    ).stdout.splitlines()
    assert len(rows) == 4  # header, rule, both rows
    assert all(md_cells(row)[0].startswith(label) for row in rows[2:])


def test_a_verified_run_carries_no_label() -> None:
    text = kit("report", "show", SIGNED, "--key", REPORTS / "signer.pub", code=0).stdout
    assert "UNTRUSTED" not in text and "UNSIGNED" not in text


# ---------------------------------------------------------------------------------------------
# kit report compare


def test_compare_labels_each_side_on_every_figure(tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    args = (SIGNED, UNSIGNED_B, "--allow-untrusted", "--allow-unsigned", "--fail-on", "never")
    text = kit("report", "compare", *args, "--html", page, code=0).stdout.splitlines()
    tag = "UNTRUSTED (A), UNSIGNED (B)"
    assert text[0].startswith("A: UNTRUSTED ") and text[1].startswith("B: UNSIGNED ")
    start = next(i for i, line in enumerate(text) if line.startswith("-----")) + 1
    rows = text[start : text.index("", start)]  # one per figure, up to the blank line
    assert len(rows) >= 6 and all(line.endswith(f"  {tag}") for line in rows)
    verdict = text[text.index(f"B as a re-run of A (kit.report.reproduction):  {tag}") + 1 :]
    assert verdict and all(line.endswith(f"  {tag}") for line in verdict if line)
    data = json.loads(kit("report", "compare", *args, "--json", code=0).stdout)
    assert data["a"].startswith("UNTRUSTED ") and data["b"].startswith("UNSIGNED ")

    html = page.read_text()
    assert re.search(r"<title>UNTRUSTED \(A\), UNSIGNED \(B\): kit report compare", html)
    figures = body_rows(section(html, "metrics"))
    assert len(figures) == len(rows)
    for cells in figures:  # figure, unit, A, B, B - A, delta %, band, flag
        assert cells[2] == "-" or cells[2].startswith("UNTRUSTED ")
        assert cells[3] == "-" or cells[3].startswith("UNSIGNED ")
        assert cells[7].endswith(f"; {tag}")
    judged = body_rows(section(html, "verdict"))
    assert judged and all(cells[0] == tag for cells in judged)
    assert re.search(r"<th>run</th><td>UNTRUSTED [^<]+</td><td>UNSIGNED [^<]+</td>", html)


def test_compare_of_verified_runs_has_no_label(tmp_path: Path) -> None:
    key = KEYS / "h200-2026-12.pub"
    a = FIXTURES / "examples" / "reports" / "h200-tp1-resolve.report.json"
    out = tmp_path / "compare.html"
    text = kit("report", "compare", a, EXAMPLE, "--key", key, "--html", out, code=0).stdout
    assert "UNTRUSTED" not in text and "UNSIGNED" not in text
    assert 'class="trust"' not in out.read_text()


# ---------------------------------------------------------------------------------------------
# kit report table


@pytest.mark.parametrize(("path", "allow", "label"), CASES)
def test_table_labels_every_figure_of_an_unverified_run(
    path: Path, allow: str, label: str, tmp_path: Path
) -> None:
    del allow  # the table has its own rule: --include-unverified lists them apart
    md, page = tmp_path / "BENCHMARKS.md", tmp_path / "table.html"
    kit(
        "report", "table", EXAMPLE, path, "--keys", KEYS, "--include-unverified",
        "-o", md, "--html", page, code=0,
    )  # fmt: skip
    text = md.read_text()
    main_part, unverified = text.split("\n## Unverified\n")
    assert str(path) not in main_part
    head, _, row = [line for line in unverified.splitlines() if line.startswith("|")]
    names, cells = md_cells(head), md_cells(row)
    assert names == [*UNVERIFIED_HEAD, *INVALID_COLUMNS[1:], "run"]
    assert cells[0] == label
    labelled = [c for n, c in zip(names, cells, strict=True) if n in LABELLED and c != "-"]
    assert len(labelled) >= 4  # verdict, both decode figures, acceptance at least
    assert all(c.startswith(f"{label} ") for c in labelled)

    html = page.read_text()
    (html_row,) = body_rows(section(html, "unverified"))
    assert len(html_row) == len(names) and html_row[0] == label
    for name, cell in zip(names, html_row, strict=True):
        if name in LABELLED and cell != "-":
            assert cell.startswith(f"{label} "), name
    assert html.count('class="untrusted"') == len(labelled) + 1  # the figures and the label


# ---------------------------------------------------------------------------------------------
# kit report html


@pytest.mark.parametrize(
    ("path", "allow", "label", "figured"),
    [
        pytest.param(SIGNED, "--allow-untrusted", "UNTRUSTED", ("ttft", "decode"), id="untrusted"),
        pytest.param(UNSIGNED_A, "--allow-unsigned", "UNSIGNED", ("ttft", "decode"), id="unsigned"),
        pytest.param(SWEEP, "--allow-untrusted", "UNTRUSTED", ("timeline", "load"), id="sweep"),
    ],
)
def test_html_page_labels_every_figure_section_and_row(
    path: Path, allow: str, label: str, figured: tuple[str, ...], tmp_path: Path
) -> None:
    out = tmp_path / "page.html"
    kit("report", "html", path, allow, "-o", out, code=0)
    page = out.read_text()
    assert f"<title>{label}: kit report: " in page
    ids = re.findall(r'<section id="([a-z]+)"><h2>([^<]*)(<span class="trust">(\w+)</span>)?', page)
    with_figures = [sid for sid, _, _, _ in ids if sid not in ("rig", "provenance")]
    assert set(figured) <= set(with_figures)
    for sid, _, _, tag in ids:
        assert tag == (label if sid in with_figures else ""), sid
        rows = body_rows(section(page, sid))
        if sid in with_figures and rows:
            assert all(cells[0] == label for cells in rows), sid
    assert body_rows(section(page, figured[-1]))  # a table of figures was labelled


def test_compare_json_carries_each_sides_trust(tmp_path: Path) -> None:
    """A script that reads the verdict can see how far each side was checked: here A verified
    by the key in --keys DIR its signature names, B read only because --allow-unsigned was
    given."""
    (tmp_path / "signer.pub").write_bytes((REPORTS / "signer.pub").read_bytes())
    args = ("report", "compare", SIGNED, UNSIGNED_B, "--keys", tmp_path, "--allow-unsigned")
    data = json.loads(kit(*args, "--json", "--fail-on", "never", code=0).stdout)
    keyid = json.loads(SIGNED.read_text())["signatures"][0]["keyid"]
    assert data["trust"] == {
        "a": {
            "state": "verified",
            "trusted": True,
            "signature_ok": True,
            "keyid": keyid,
            "signer": "signer",
            "allowed_by": None,
            "label": None,
        },
        "b": {
            "state": "unsigned",
            "trusted": False,
            "signature_ok": False,
            "keyid": None,
            "signer": None,
            "allowed_by": "--allow-unsigned",
            "label": "UNSIGNED",
        },
        "verified": False,
    }
    assert data["b"].startswith("UNSIGNED ") and not data["a"].startswith("UNTRUSTED")
