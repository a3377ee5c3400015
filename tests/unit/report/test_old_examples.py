"""The two oldest example reports carry absolute paths of the host that ran them (signed before
kit redacted paths, and kept as signed: docs/signing.md). Nothing kit prints of them names one:
show, its Markdown row, the results table, compare and the pages."""

from __future__ import annotations

import base64
import importlib.util
import json
import re
from pathlib import Path

import pytest
from clirun import kit

OLD = ("h200-tp1.report.json", "h200x2-tp2.report.json")
# the host's paths the two payloads hold (engine.site_packages and pythonpath, vllm_bench argv)
HOST_PATHS = re.compile(r"/tmp/site|/root/kit")


@pytest.fixture
def examples(fixtures_dir: Path) -> Path:
    return fixtures_dir / "examples"


def test_the_old_reports_hold_host_paths(examples: Path) -> None:
    """What the documentation says of them: otherwise this test guards nothing."""
    for name in OLD:
        envelope = json.loads((examples / "reports" / name).read_text())
        payload = base64.b64decode(envelope["payload"]).decode()
        assert HOST_PATHS.search(payload), name


def test_nothing_kit_prints_of_them_names_a_host_path(examples: Path, tmp_path: Path) -> None:
    reports = [examples / "reports" / name for name in OLD]
    keys = ["--keys", examples / "keys"]
    printed = [
        kit("report", "show", *reports, *keys, code=0).output,
        kit("report", "show", "--markdown", "--header", *reports, *keys, code=0).output,
        kit("report", "table", *reports, *keys, code=0).output,
        kit("report", "verify", reports[0], *keys, code=0).output,
        kit("report", "compare", *reports, *keys, "--force", "--fail-on", "never", code=0).output,
        kit(
            "report", "compare", *reports, *keys, "--force", "--fail-on", "never", "--json", code=0
        ).output,
    ]
    if importlib.util.find_spec("matplotlib") is not None:  # kit's html extra
        for report in reports:
            page = tmp_path / f"{report.name}.html"
            kit("report", "html", report, *keys, "-o", page, code=0)
            printed.append(page.read_text())
        page = tmp_path / "compare.html"
        html = ["--force", "--fail-on", "never", "--html", page]
        kit("report", "compare", *reports, *keys, *html, code=0)
        printed.append(page.read_text())
    for text in printed:
        assert text and not HOST_PATHS.search(text)
