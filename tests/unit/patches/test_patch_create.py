"""Patches that create files ('--- /dev/null'): parsed, applied into new folders, proved by
their fingerprints, re-applied as a no-op, and refused where the file already exists."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from patch_trees import A1, P1, A, entry, load_error, newfile, snapshot, udiff, write_series

from kit import patches as kp
from kit.errors import EnvironmentProblem

NEW = "def g():\n    return 3\n"
NEW1 = "def g():\n    return 4\n"
C1 = newfile("vllm/n/new.py", NEW) + newfile("vllm/n/__init__.py", "# n\n")  # a new package
C2 = udiff("vllm/n/new.py", NEW, NEW1) + udiff("vllm/a.py", A, A1)  # edits a file C1 created


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def created(tmp_path: Path, site: Path) -> kp.PatchSeries:
    d = write_series(tmp_path, {"0001-new.patch": C1, "0002-edit.patch": C2})
    return kp.record_fingerprints(d, site)


def test_parse_and_apply_a_created_file() -> None:
    (diff,) = kp.parse_patch(newfile("vllm/x.py", NEW).encode(), "p")
    assert (diff.path, diff.created, [h.header for h in diff.hunks]) == (
        "vllm/x.py",
        True,
        ["@@ -0,0 +1,2 @@"],
    )
    assert kp.apply_file(None, diff) == NEW.encode()
    assert kp.apply_file(NEW.encode(), diff, reverse=True) is None
    with pytest.raises(kp.FileMismatch, match=r"^exists, but the patch creates it"):
        kp.apply_file(b"", diff)  # an empty file is still a file
    with pytest.raises(kp.HunkMismatch, match=r"^hunk 1 \(@@ -0,0 \+1,2 @@\) does not match"):
        kp.apply_file(NEW.encode() + b"# more\n", diff, reverse=True)  # not exactly its lines
    with pytest.raises(kp.FileMismatch, match=r"^file not found$"):
        kp.apply_file(None, diff, reverse=True)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "--- a/vllm/a.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-line 1\n",
            "0001-x.patch: line 1: deleting files is not supported",
        ),
        (
            "--- /dev/null\n+++ b/vllm/n.py\n@@ -0,0 +1 @@\n+x\n@@ -0,0 +2 @@\n+y\n",
            "0001-x.patch: vllm/n.py: a file created from /dev/null takes one hunk, "
            "'@@ -0,0 +1,N @@'",
        ),
        (
            "--- /dev/null\n+++ b/vllm/n.py\n@@ -0,0 +3 @@\n+x\n",
            "0001-x.patch: vllm/n.py: a file created from /dev/null takes one hunk, "
            "'@@ -0,0 +1,N @@'",
        ),
    ],
)
def test_malformed_creations(tmp_path: Path, text: str, error: str) -> None:
    e = entry("0001-x.patch", P1)
    assert load_error(tmp_path, {"0001-x.patch": text}, [e]) == [error]


def test_creates_must_match_the_diff(tmp_path: Path) -> None:
    unlisted = entry("0001-new.patch", C1, creates=[])
    assert load_error(tmp_path, {"0001-new.patch": C1}, [unlisted]) == [
        "D/series.yaml: patches.0.creates: lists [] but 0001-new.patch creates "
        "['vllm/n/__init__.py', 'vllm/n/new.py']"
    ]
    (tmp_path / "2").mkdir()
    untouched = entry("0001-new.patch", C1, creates=["vllm/other.py"])
    assert load_error(tmp_path / "2", {"0001-new.patch": C1}, [untouched]) == [
        "D/series.yaml: patches.0: creates must name files that touches lists"
    ]


def test_create_apply_verify(site: Path, created: kp.PatchSeries) -> None:
    meta = created.patches[0].meta
    assert meta.creates == ["vllm/n/__init__.py", "vllm/n/new.py"]
    written = (created.path / "series.yaml").read_text()  # by record_fingerprints
    assert written.count("creates:") == 1 and "provides:" not in written  # empty lists left out
    assert meta.fingerprints["vllm/n/new.py"] == sha(NEW1)  # after the whole series
    assert [s.state for s in kp.check(created, site)] == ["applies", "applies"]

    manifest = kp.apply(created, site)

    assert (site / "vllm" / "n" / "new.py").read_text() == NEW1
    assert (site / "vllm" / "n" / "__init__.py").read_text() == "# n\n"
    assert (site / "vllm" / "n" / "new.py").stat().st_mode & 0o777 == 0o644
    assert [p.state for p in manifest.patches] == ["applied", "applied"]
    assert kp.verify(created, site) == manifest
    assert not list(site.rglob("*.kit"))


def test_reapply_is_a_no_op(site: Path, created: kp.PatchSeries) -> None:
    first = kp.apply(created, site)
    before = snapshot(site)
    assert kp.apply(created, site) == first  # as kit's engine stage does on an existing venv
    assert snapshot(site) == before
    assert [s.state for s in kp.check(created, site)] == ["applied", "applied"]


def test_a_file_that_must_be_absent_exists(site: Path, created: kp.PatchSeries) -> None:
    (site / "vllm" / "n").mkdir()
    (site / "vllm" / "n" / "new.py").write_text("# someone else's\n")
    before = snapshot(site)
    states = kp.check(created, site)
    assert [s.state for s in states] == ["fails", "fails"]
    assert states[0].error == (
        "0001-new.patch: vllm/n/new.py: exists, but the patch creates it (it must be absent)"
    )
    with pytest.raises(EnvironmentProblem) as exc:
        kp.apply(created, site)
    assert exc.value.message.splitlines()[1] == states[0].error
    assert snapshot(site) == before
    assert not (site / "vllm" / "n" / "__init__.py").exists()


def test_verify_names_a_missing_or_changed_created_file(
    site: Path, created: kp.PatchSeries
) -> None:
    kp.apply(created, site)
    (site / "vllm" / "n" / "new.py").write_text(NEW1 + "# edited\n")
    with pytest.raises(
        EnvironmentProblem, match=re.escape("0001-new.patch: vllm/n/new.py: sha256")
    ):
        kp.verify(created, site)
    (site / "vllm" / "n" / "new.py").unlink()
    with pytest.raises(EnvironmentProblem) as exc:
        kp.verify(created, site)
    assert "0001-new.patch: vllm/n/new.py: sha256 missing installed" in exc.value.message


def test_failed_write_removes_created_files_and_folders(
    site: Path, created: kp.PatchSeries, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write failing after a file was created leaves the engine as it was."""
    from kit.patches import installed

    real = installed._write_atomic
    writes: list[Path] = []

    def flaky(target: Path, data: bytes) -> None:
        writes.append(target)
        if len(writes) == 3:
            raise OSError("disk full")
        real(target, data)

    before = snapshot(site)
    monkeypatch.setattr(installed, "_write_atomic", flaky)
    with pytest.raises(EnvironmentProblem, match="disk full"):
        kp.apply(created, site)
    assert [str(w.relative_to(site)) for w in writes] == [
        "vllm/n/new.py",
        "vllm/n/__init__.py",
        "vllm/a.py",
    ]
    assert snapshot(site) == before
    assert not (site / "vllm" / "n").exists()
