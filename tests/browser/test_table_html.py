"""kit report table --html and kit report compare --html in a real headless Chromium (Debian's
``chromium``, Playwright's sync API, as tests/browser/test_report_html.py): each page loads from
file:// with no console error and no request that is not file:// or data:; on the table page
the verdict column is on screen at 1,400 px, a click on a header reorders the single-stream rows
(the INVALID sweep stays in its own table), the text filter hides rows, and a ``kit probe
--json`` of the H200 example's host (1× NVIDIA H200), loaded into "best for my rig", keeps only
the runs on that rig, best decode TPS first. Full-page screenshots are written under pytest's
tmp dir."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from kit.probe import probe_to_json
from kit.report.compare import compare_reports
from kit.report.files import read_report
from kit.report.html.compare import write_compare_page
from kit.report.html.table import write_table_page
from kit.report.table import build_table
from kit.signing import load_public_key

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "examples" / "keys"
EXAMPLES = sorted((ROOT / "examples" / "reports").glob("*.report.json"))
SWEEP = ROOT / "tests/fixtures/results/h200-llama8b-bf16-sweep-2026-12-02-s2/report.json"
ONE_H200 = ROOT / "examples" / "reports" / "h200-tp1-rerun.report.json"

ROWS = "Array.from(document.querySelectorAll('#runs tbody tr'))"
RUN_IDS = f"() => {ROWS}.map(r => r.querySelector('td.run').textContent)"
VISIBLE = f"() => {ROWS}.filter(r => !r.hidden).map(r => r.querySelector('td.run').textContent)"
INVALID = "Array.from(document.querySelectorAll('#invalid-runs tbody tr'))"
INVALID_VISIBLE = (
    f"() => {INVALID}.filter(r => !r.hidden).map(r => r.querySelector('td.run').textContent)"
)


def test_table_page_sorts_filters_and_picks_my_rig(
    open_page: Callable[..., Any], tmp_path: Path
) -> None:
    table = build_table([*EXAMPLES, SWEEP], KEYS)
    by_run = {r.run_id: r for r in table.rows}
    single, invalid = table.sections()  # four valid single-stream runs; the INVALID sweep
    assert (single.sid, invalid.sid) == ("single-stream", "invalid")
    sweep = invalid.rows[0].run_id
    out = write_table_page(table, tmp_path / "benchmarks.html")
    page, errors, requests = open_page(out)
    assert page.inner_text("#shown") == "5 of 5 runs shown"
    verdict = page.locator("#runs thead th").first
    assert verdict.inner_text() == "verdict"
    box = verdict.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 1400  # on screen, not scrolled to
    before = page.evaluate(RUN_IDS)
    assert before == [r.run_id for r in single.rows]  # grouped order as written
    assert page.evaluate(INVALID_VISIBLE) == [sweep]

    header = page.locator("#runs thead th", has_text="narrative decode TPS")
    header.click()  # numbers: highest first
    after = page.evaluate(RUN_IDS)
    assert after != before
    assert header.get_attribute("aria-sort") == "descending"
    figures = [by_run[r].cells["narrative decode TPS"] for r in after]
    values = [float(f.split()[0]) for f in figures]
    assert values == sorted(values, reverse=True)
    header.click()
    assert page.evaluate(RUN_IDS) == list(reversed(after))
    assert sweep not in after and page.evaluate(INVALID_VISIBLE) == [sweep]  # never ranked

    page.fill("#filter", "NVLink")
    nvlink = [r.run_id for r in table.rows if "NVLink" in r.cells["interconnect"]]
    assert sorted(page.evaluate(VISIBLE)) == sorted(nvlink)
    assert len(nvlink) == 2
    assert page.inner_text("#shown") == "2 of 5 runs shown"
    page.fill("#filter", "")
    assert len(page.evaluate(VISIBLE)) == 4

    host = read_report(ONE_H200, load_public_key(KEYS / "h200-2026-12.pub"))[0].host
    assert host is not None and [g.name for g in host.gpus] == ["NVIDIA H200"]
    probe = tmp_path / "probe.json"
    probe.write_text(probe_to_json(host))  # what `kit probe --json` prints on that machine
    page.set_input_files("#probe-file", str(probe))
    # expect() polls from Playwright's side: wait_for_function evaluates a string in the page,
    # which the page's CSP (no 'unsafe-eval') refuses in recent Chromium
    expect(page.locator("#rig-status")).to_have_text(re.compile(r"\S"))
    mine = page.evaluate(VISIBLE)
    one = [r for r in table.rows if r.gpus == ["NVIDIA H200"]]
    assert len(one) == 3 and {r.run_id for r in one} == {*mine, sweep}
    sequential = sorted((r for r in one if r.decode_tps), key=lambda r: -(r.decode_tps or 0))
    assert mine == [r.run_id for r in sequential]  # best decode TPS first
    assert page.evaluate(INVALID_VISIBLE) == [sweep]  # the INVALID sweep apart, in its table
    assert mine[0] == "20261201T175553Z-c46ae3"  # a headline of 185.40 tok/s beats 177.11
    assert page.inner_text("#rig-status").startswith("Your rig: 1× NVIDIA H200. 3 run(s)")
    page.screenshot(path=str(tmp_path / "table-my-rig.png"), full_page=True)

    page.click("#probe-clear")
    assert len(page.evaluate(VISIBLE)) == 4
    two = host.model_copy(
        update={"gpus": [host.gpus[0], host.gpus[0].model_copy(update={"index": 1})]}
    )
    page.fill("#probe-text", probe_to_json(two))  # pasted instead of a file: 2× H200
    page.click("#probe-apply")
    assert sorted(page.evaluate(VISIBLE)) == sorted(
        r.run_id for r in table.rows if r.gpus == ["NVIDIA H200", "NVIDIA H200"]
    )
    page.fill("#probe-text", "not json")
    page.click("#probe-apply")
    assert "not JSON" in page.inner_text("#rig-status")
    page.close()
    assert errors == []
    assert requests == []


def test_compare_page_loads_offline(open_page: Callable[..., Any], tmp_path: Path) -> None:
    key = load_public_key(KEYS / "h200-2026-12.pub")
    a, check_a = read_report(ROOT / "examples" / "reports" / "h200-tp1-resolve.report.json", key)
    b, check_b = read_report(ONE_H200, key)
    result = compare_reports(a, b)
    out = write_compare_page(result, [(a, check_a), (b, check_b)], tmp_path / "compare.html")
    page, errors, requests = open_page(out)
    rows = page.locator("#figures tbody tr")
    assert rows.count() == len(result.metrics)
    first = rows.nth(0).locator("td").all_inner_texts()
    assert first == [
        "narrative decode TPS *",
        "tok/s",
        "177.11",
        "185.40",
        "+8.28",
        "+4.7",
        "6.4",
        "within",
    ]
    assert page.inner_text("#verdict-text").startswith("verdict: REPRODUCED")
    width = page.evaluate(
        "() => document.querySelector('table.sides').getBoundingClientRect().right"
    )
    main = page.evaluate(
        "() => document.querySelector('section#sides').getBoundingClientRect().right"
    )
    assert width <= main  # the two runs fit their section
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    page.close()
    assert errors == []
    assert requests == []
