"""Fixtures of the recipe tests: recipe files written into a temporary directory."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """``write(name, text)``: the dedented text as ``tmp_path / name``."""

    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text))
        return p

    return _write
