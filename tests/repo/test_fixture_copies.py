"""Each copy of a repository file in tests/fixtures/ equals the file it copies."""

from __future__ import annotations

from pathlib import Path

import pytest

COPIES = {  # a folder of tests/fixtures/ -> the repository folder it copies from
    "recipes": "recipes",
    "patches": "patches",
    "examples": "examples",
    "results": "experiments/results",
}


@pytest.mark.parametrize("folder", COPIES)
def test_fixture_copies_equal_their_originals(repo_root: Path, folder: str) -> None:
    copies, originals = repo_root / "tests" / "fixtures" / folder, repo_root / COPIES[folder]
    names = sorted(
        p.relative_to(copies) for p in copies.rglob("*") if p.is_file() and p.name != "README.md"
    )
    assert names, f"tests/fixtures/{folder}/ holds no copies"
    differ = [
        str(name)
        for name in names
        if not (originals / name).is_file()
        or (originals / name).read_bytes() != (copies / name).read_bytes()
    ]
    assert differ == [], f"copy these from {COPIES[folder]}/ to tests/fixtures/{folder}/ again"
