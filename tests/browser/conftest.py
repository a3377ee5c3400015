"""One headless Chromium for the browser tests (Debian's ``chromium``, driven by Playwright's
sync API; Playwright's own browser download is never used), and a page opened in it that
records every console error and every request that is not file:// or data:."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# not skipped when missing: make test-browser is where these run, and there they must
from playwright import sync_api  # kit's dev extra


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("no chromium on PATH: make test-browser installs Debian's chromium")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def open_page(browser: Any) -> Callable[..., tuple[Any, list[str], list[str]]]:
    """``open_page(path, width=1400)``: the page at ``path``, loaded in the browser; the console
    errors and foreign requests, as they come."""

    def open_(path: Path, width: int = 1400) -> tuple[Any, list[str], list[str]]:
        errors: list[str] = []
        requests: list[str] = []
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "request",
            lambda r: None if r.url.startswith(("file://", "data:")) else requests.append(r.url),
        )
        page.goto(path.as_uri(), wait_until="load")
        return page, errors, requests

    return open_
