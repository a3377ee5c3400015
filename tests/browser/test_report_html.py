"""kit report html in a real headless Chromium (Debian's ``chromium``, driven by Playwright's
sync API): each rendered page loads from file:// with no console error, no request that is not
file:// or data:, and every chart drawn with visible marks. A full-page screenshot of each is
written under pytest's tmp dir; with KIT_SAVE_SCREENSHOT set, the sweep's also to
docs/img/report-html.png (or to KIT_SAVE_SCREENSHOT itself when it names a .png file).
Run with ``make test-browser``, which installs both."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit.report.files import read_report
from kit.report.html import write_html
from kit.signing import load_public_key
from kit.signing.keys import fingerprint

ROOT = Path(__file__).resolve().parents[2]
KEYS = sorted((ROOT / "examples" / "keys").glob("*.pub"))
SWEEP = ROOT / "tests/fixtures/results/h200-llama8b-bf16-sweep-2026-12-02-s2/report.json"
REPORTS = {
    p.name.removesuffix(".report.json"): p
    for p in (ROOT / "examples" / "reports").glob("*.report.json")
}
REPORTS["sweep"] = SWEEP
SCREENSHOT = ROOT / "docs" / "img" / "report-html.png"

# per <svg>: how many data artists (ids *-mark-N) drew something with a non-empty box
MARKS_JS = """
() => Array.from(document.querySelectorAll('svg.chart')).map(svg => {
  const drawn = Array.from(svg.querySelectorAll('g[id*="-mark-"]')).filter(g => {
    const b = g.getBBox();
    return g.querySelector('path, use, rect') && (b.width > 0 || b.height > 0);
  });
  const r = svg.getBoundingClientRect();
  return {label: svg.getAttribute('aria-label'), marks: drawn.length, width: r.width};
})
"""


def _key(path: Path) -> Any:
    import json

    keyid = json.loads(path.read_bytes())["signatures"][0]["keyid"]
    for pub in KEYS:
        key = load_public_key(pub)
        if fingerprint(key) == keyid:
            return key
    return None


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_page_loads_offline_without_errors(
    open_page: Callable[..., Any], name: str, tmp_path: Path
) -> None:
    src = REPORTS[name]
    key = _key(src)
    report, check = read_report(src, key, allow_untrusted=key is None)
    page_file = write_html(report, check, tmp_path / "report.html")
    page, errors, requests = open_page(page_file, width=1200)
    page.wait_for_timeout(200)
    charts = page.evaluate(MARKS_JS)
    shot = tmp_path / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    verdict = page.inner_text("#verdict-text")
    page.close()
    save = os.environ.get("KIT_SAVE_SCREENSHOT")
    if name == "sweep" and save:  # a .png path puts it there instead of docs/img
        dest = Path(save) if save.endswith(".png") else SCREENSHOT
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, dest)
    assert errors == []
    assert requests == []
    assert charts, "no chart on the page"
    assert [c["label"] for c in charts if c["marks"] == 0] == []
    assert all(c["width"] > 300 for c in charts), charts
    assert verdict.startswith("Verdict: ")
    assert shot.stat().st_size > 50_000
