"""Fixtures of the patch tests: a pristine site-packages tree and a two-patch series for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from patch_trees import P1, P2, make_site, write_series

from kit import patches as kp


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return make_site(tmp_path)


@pytest.fixture
def series(tmp_path: Path) -> kp.PatchSeries:
    return kp.load_series(write_series(tmp_path, {"0001-a.patch": P1, "0002-ab.patch": P2}))
