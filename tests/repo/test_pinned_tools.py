"""The uv version kit's installer pins is the one pyproject.toml depends on."""

from __future__ import annotations

from pathlib import Path

import tomllib

from kit import installer


def test_pinned_uv_matches_pyproject(repo_root: Path) -> None:
    deps = tomllib.loads((repo_root / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"uv=={installer.UV_VERSION}" in deps
