"""The strict unified-diff parser and applier: bytes in, bytes out.

A patch parses into the hunks it applies to each file (:func:`parse_patch`); a file is patched
only when every hunk finds its exact context at its stated line (:func:`apply_file`).
"""

from __future__ import annotations

import re

from pydantic import Field

from kit.base import FrozenModel
from kit.errors import BadInputError

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class Hunk(FrozenModel):
    """One ``@@`` hunk: the lines it expects (old) and writes (new), with their start lines."""

    header: str = Field(description="The '@@ -a,b +c,d @@' header.")
    old_start: int = Field(description="First old line (1-based; line before, if old is empty).")
    new_start: int = Field(description="First new line (1-based; line before, if new is empty).")
    old: tuple[bytes, ...] = Field(description="Context and removed lines, with line ends.")
    new: tuple[bytes, ...] = Field(description="Context and added lines, with line ends.")


class FileDiff(FrozenModel):
    """The hunks a patch applies to one file."""

    path: str = Field(description="File path relative to site-packages.")
    hunks: tuple[Hunk, ...] = Field(description="Hunks in file order.")
    created: bool = Field(
        False, description="The patch creates the file ('--- /dev/null'): one hunk, all added."
    )


class HunkMismatch(ValueError):
    """A hunk whose lines are not at its stated place in the file."""

    def __init__(self, number: int, hunk: Hunk) -> None:
        super().__init__(f"hunk {number} ({hunk.header}) does not match")
        self.number = number
        self.hunk = hunk


class FileMismatch(ValueError):
    """A file that is absent where the patch changes it, or present where it creates it."""


def check_relative(path: str) -> None:
    """Refuse a path that could leave site-packages (absolute, '..', empty parts, '\\')."""
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or "" in parts or "\\" in path:
        raise ValueError(f"{path!r} must be a relative path inside site-packages")


def _split_lines(data: bytes) -> list[bytes]:
    """Lines with their '\\n' kept; a last line without one stays as it is."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def apply_diff(data: bytes, diff: FileDiff, *, reverse: bool = False) -> bytes:
    """``data`` with every hunk of ``diff`` applied (undone, with ``reverse``), each exactly at
    its stated line: no offset, no fuzz, no whitespace leniency. The result is byte for byte
    what the diff says (line ends and a missing last newline included); otherwise
    :class:`HunkMismatch` is raised for the first hunk that does not match, and nothing is
    returned, so a file is never half patched.

    For a created file the whole file is the hunk: it applies to empty ``data`` only, and is
    undone only from exactly its lines (then the result is empty)."""
    if diff.created:
        (h,) = diff.hunks
        if data != (b"".join(h.new) if reverse else b""):
            raise HunkMismatch(1, h)
        return b"" if reverse else b"".join(h.new)
    lines = _split_lines(data)
    out: list[bytes] = []
    pos = 0
    for n, h in enumerate(diff.hunks, 1):
        start, want, put = (h.new_start, h.new, h.old) if reverse else (h.old_start, h.old, h.new)
        at = start - 1 if want else start
        if at < pos or lines[at : at + len(want)] != list(want):
            raise HunkMismatch(n, h)
        out += lines[pos:at]
        out += put
        pos = at + len(want)
    return b"".join(out + lines[pos:])


def apply_file(data: bytes | None, diff: FileDiff, *, reverse: bool = False) -> bytes | None:
    """A file's content once ``diff`` is applied (undone, with ``reverse``); None stands for a
    file that is absent. Raises :class:`FileMismatch` when the file is missing where the diff
    changes it or present where the diff creates it, :class:`HunkMismatch` when a hunk does
    not match."""
    if diff.created and not reverse:
        if data is not None:
            raise FileMismatch("exists, but the patch creates it (it must be absent)")
        return apply_diff(b"", diff)
    if data is None:
        raise FileMismatch("file not found")
    done = apply_diff(data, diff, reverse=reverse)
    return None if diff.created else done


def _strip_prefix(raw: bytes, prefix: str, where: str) -> str | None:
    """The path after ``prefix``; None for /dev/null."""
    name = raw.split(b"\t", 1)[0].strip().decode("utf-8", "replace")
    if name == "/dev/null":
        return None
    if not name.startswith(prefix):
        raise BadInputError(f"{where}: path {name!r} must start with {prefix!r}")
    path = name[len(prefix) :]
    try:
        check_relative(path)
    except ValueError as exc:
        raise BadInputError(f"{where}: {exc}") from None
    return path


def parse_patch(data: bytes, label: str) -> tuple[FileDiff, ...]:
    """Parse a unified diff. Text before the first file header (a message) is ignored.

    A patch may create a file (``--- /dev/null``, one hunk ``@@ -0,0 +1,N @@``): it applies
    only where the file is absent, and undoes only where the file holds exactly those lines
    (:func:`apply_file`). Deleting files is not supported."""
    lines = _split_lines(data)
    diffs: list[FileDiff] = []
    i = 0
    while i < len(lines) and not (
        lines[i].startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ ")
    ):
        i += 1
    while i < len(lines):
        where = f"{label}: line {i + 1}"
        if lines[i].startswith((b"diff ", b"index ")):
            i += 1
            continue
        if not (lines[i].startswith(b"--- ") and i + 1 < len(lines)):
            raise BadInputError(f"{where}: expected '--- a/FILE', found {lines[i][:40]!r}")
        if not lines[i + 1].startswith(b"+++ "):
            raise BadInputError(f"{where}: '--- ' is not followed by '+++ '")
        old_path = _strip_prefix(lines[i][4:], "a/", where)
        path = _strip_prefix(lines[i + 1][4:], "b/", f"{label}: line {i + 2}")
        if path is None:
            raise BadInputError(f"{where}: deleting files is not supported")
        created = old_path is None
        if not created and old_path != path:
            raise BadInputError(f"{where}: '---' and '+++' name different files")
        if any(d.path == path for d in diffs):
            raise BadInputError(f"{where}: {path} appears twice")
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith(b"@@"):
            hunk, i = _parse_hunk(lines, i, label)
            if hunks and hunk.old_start <= hunks[-1].old_start + len(hunks[-1].old) - 1:
                raise BadInputError(f"{label}: {path}: hunk {len(hunks) + 1} overlaps the last")
            hunks.append(hunk)
        if not hunks:
            raise BadInputError(f"{label}: {path}: no hunks")
        if created and [(h.old_start, len(h.old), h.new_start) for h in hunks] != [(0, 0, 1)]:
            raise BadInputError(
                f"{label}: {path}: a file created from /dev/null takes one hunk, '@@ -0,0 +1,N @@'"
            )
        diffs.append(FileDiff(path=path, hunks=tuple(hunks), created=created))
    if not diffs:
        raise BadInputError(f"{label}: not a unified diff (no '--- a/FILE' / '+++ b/FILE')")
    return tuple(diffs)


def _parse_hunk(lines: list[bytes], i: int, label: str) -> tuple[Hunk, int]:
    m = _HUNK.match(lines[i])
    if not m:
        raise BadInputError(f"{label}: line {i + 1}: bad hunk header {lines[i].strip()!r}")
    header = lines[i][: m.end()].decode()
    old_len = 1 if m.group(2) is None else int(m.group(2))
    new_len = 1 if m.group(4) is None else int(m.group(4))
    old: list[bytes] = []
    new: list[bytes] = []
    last: bytes = b""
    j = i + 1
    while j < len(lines) and (len(old) < old_len or len(new) < new_len or lines[j][:1] == b"\\"):
        line = lines[j]
        kind, text = line[:1], line[1:]
        if line in (b"\n", b"\r\n"):  # a blank context line whose leading space was stripped
            kind, text = b" ", line
        if kind == b"\\":
            for side in (old, new) if last == b" " else (old,) if last == b"-" else (new,):
                if side and side[-1].endswith(b"\n"):
                    side[-1] = side[-1][:-1]
        elif kind in (b" ", b"-", b"+"):
            if kind in (b" ", b"-"):
                old.append(text)
            if kind in (b" ", b"+"):
                new.append(text)
            last = kind
        else:
            break
        j += 1
    if len(old) != old_len or len(new) != new_len:
        raise BadInputError(
            f"{label}: line {i + 1}: hunk {header} has {len(old)} old and {len(new)} new lines"
        )
    if old == new:
        raise BadInputError(f"{label}: line {i + 1}: hunk {header} changes nothing")
    hunk = Hunk(
        header=header,
        old_start=int(m.group(1)),
        new_start=int(m.group(3)),
        old=tuple(old),
        new=tuple(new),
    )
    return hunk, j
