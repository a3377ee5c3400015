"""The strict unified-diff parser and applier: malformed patch files are named to the line, and
a hunk applies exactly where it says, byte for byte, or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from patch_trees import A1, P1, A, entry, load_error

from kit.patches import HunkMismatch, apply_diff, parse_patch


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("just text\n", "0001-x.patch: not a unified diff (no '--- a/FILE' / '+++ b/FILE')"),
        (
            P1.replace("@@ -14,7 +14,8 @@", "@@ -14,7 +14,9 @@"),
            "0001-x.patch: line 12: hunk @@ -14,7 +14,9 @@ has 7 old and 8 new lines",
        ),
        (
            P1.replace("--- a/", "--- "),
            "0001-x.patch: line 1: path 'vllm/a.py' must start with 'a/'",
        ),
        (
            P1.replace("a/vllm/a.py", "a/../etc/passwd").replace("b/vllm/a.py", "b/../etc/passwd"),
            "0001-x.patch: line 1: '../etc/passwd' must be a relative path inside site-packages",
        ),
        (
            "--- a/vllm/n.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
            "0001-x.patch: line 1: deleting files is not supported",
        ),
        (
            P1 + "trailing junk\n",
            "0001-x.patch: line 22: expected '--- a/FILE', found b'trailing junk\\n'",
        ),
    ],
)
def test_malformed_patch_files(tmp_path: Path, text: str, error: str) -> None:
    e = entry("0001-x.patch", P1)
    assert load_error(tmp_path, {"0001-x.patch": text}, [e]) == [error]


def test_apply_and_undo_are_byte_exact() -> None:
    (diff,) = parse_patch(P1.encode(), "p")
    assert [h.header for h in diff.hunks] == ["@@ -2,7 +2,7 @@", "@@ -14,7 +14,8 @@"]
    assert apply_diff(A.encode(), diff) == A1.encode()
    assert apply_diff(A1.encode(), diff, reverse=True) == A.encode()


def test_line_ends_and_a_missing_last_newline_are_kept() -> None:
    before = b"x = 1\r\ny = 2\r\nz = 3"
    after = b"x = 1\r\ny = 20\r\nz = 3"
    text = (
        b"--- a/c.py\n+++ b/c.py\n@@ -1,3 +1,3 @@\n x = 1\r\n-y = 2\r\n+y = 20\r\n z = 3\n"
        b"\\ No newline at end of file\n"
    )
    (diff,) = parse_patch(text, "p")
    assert apply_diff(before, diff) == after
    assert apply_diff(after, diff, reverse=True) == before


def test_no_offset() -> None:
    """Context that is one line off its stated place does not match, though it is intact."""
    (diff,) = parse_patch(P1.encode(), "p")
    with pytest.raises(HunkMismatch) as exc:
        apply_diff(b"line 0\n" + A.encode(), diff)
    assert str(exc.value) == "hunk 1 (@@ -2,7 +2,7 @@) does not match"
    assert exc.value.number == 1


def test_no_fuzz_and_no_whitespace_leniency() -> None:
    (diff,) = parse_patch(P1.encode(), "p")
    for edited in ("line fourteen\n", "line 14 \n", "line 14\r\n"):  # first context line
        with pytest.raises(HunkMismatch, match=r"^hunk 2 \(@@ -14,7 \+14,8 @@\)"):
            apply_diff(A.replace("line 14\n", edited).encode(), diff)


def test_already_applied_does_not_apply_again() -> None:
    (diff,) = parse_patch(P1.encode(), "p")
    with pytest.raises(HunkMismatch):
        apply_diff(A1.encode(), diff)
