"""Every repository path that README.md, docs/*.md and experiments/README.md name exists.

A path is a token, in backticks, a fenced block, a markdown link or plain prose, that starts with
one of the checkout's own top-level names and a slash (``kit/report/figures.py``,
``recipes/*.yaml``), or with a name in the page's own folder (``results/x.json`` in
experiments/README.md), or a link target; the last two are resolved from the page's folder.
Skipped: URLs, absolute and home paths, ``$VARS``, placeholders (``NAME``, ``<run id>``,
``...``); ``{a,b}`` is expanded and a glob must match something. A path that leaves the
checkout (``../x``) is always an error.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

LINK = re.compile(r"\]\(([^)\s]+)\)")
# where a token ends: whitespace, quotes, brackets, `;`, `=` (RECIPE=recipes/x.yaml), `|`
SPLIT = re.compile(r"[\s`'\"()\[\];=|]+")
BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9_]+\b|\.\.\.|…|<")
UPPER_FILES = {"README", "LICENSE", "BENCHMARKS"}


def doc_pages(root: Path) -> list[Path]:
    docs = sorted((root / "docs").glob("*.md"))
    return [root / "README.md", *docs, root / "experiments" / "README.md"]


def top_level_names(root: Path) -> set[str]:
    """The checkout's own top-level entries: not hidden, not an output .gitignore names."""
    ignored = [
        line.strip().strip("/")
        for line in (root / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return {
        p.name
        for p in root.iterdir()
        if not p.name.startswith(".") and not any(fnmatch.fnmatch(p.name, g) for g in ignored)
    }


def expand(token: str) -> list[str]:
    """``a/{b,c}.md`` -> ``a/b.md``, ``a/c.md`` (nested and repeated braces too)."""
    m = BRACES.search(token)
    if m is None:
        return [token]
    head, tail = token[: m.start()], token[m.end() :]
    return [p for alt in m.group(1).split(",") for p in expand(head + alt + tail)]


def is_placeholder(token: str) -> bool:
    words = [w for w in PLACEHOLDER.findall(token) if w not in UPPER_FILES]
    return bool(words)


def candidates(text: str, top: set[str], local: set[str]) -> Iterator[tuple[str, bool]]:
    """(token, from the page's folder) for every path-like token of a page."""
    for target in LINK.findall(text):
        yield target, True
    for token in SPLIT.split(LINK.sub("", text)):
        token = token.strip("*") if token.startswith("*") else token  # **bold**
        token = re.sub(r"(::\w+|:\d+(-\d+)?)$", "", token.rstrip(".,:!?"))  # x.py:42, x.py::test
        first = token.split("/", 1)[0]
        if "/" in token and (first in top or first in local):
            yield token, first not in top


def problems(page: Path, root: Path, top: set[str]) -> list[str]:
    """``page: path: why`` for each path the page names that is not in the checkout."""
    found = []
    name = page.relative_to(root).as_posix()
    local = {p.name for p in page.parent.iterdir()} if page.parent != root else set()
    for token, from_page in candidates(page.read_text(), top, local):
        if "://" in token or token.startswith(("#", "mailto:", "/", "~", "$")) or "$" in token:
            continue
        if is_placeholder(token):
            continue
        base = page.parent if from_page else root
        for path in expand(token.split("#", 1)[0]):
            if not path:
                continue
            full = (base / path).resolve()
            if not full.is_relative_to(root.resolve()):
                found.append(f"{name}: {token}: outside the repository")
            elif "*" in path or "?" in path:
                if not any(root.glob(str(full.relative_to(root.resolve())))):
                    found.append(f"{name}: {token}: matches nothing")
            elif not full.exists():
                found.append(f"{name}: {token}: no such file")
    return found


def test_every_path_a_doc_names_exists(repo_root: Path) -> None:
    top = top_level_names(repo_root)
    found = [p for page in doc_pages(repo_root) for p in problems(page, repo_root, top)]
    assert found == []


def test_a_missing_path_and_one_outside_are_named(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("/reports/\n")
    for folder in ("docs", "docs/img", "kit", "reports"):
        (tmp_path / folder).mkdir()
    (tmp_path / "kit" / "here.py").write_text("")
    page = tmp_path / "docs" / "a.md"
    page.write_text(
        "`kit/here.py:12`, `kit/{here,gone}.py`, [up](../../x.md), `kit/*.txt`,\n"
        "`kit/NAME.yaml`, `kit/<run>/r.json`, `reports/x.json`, `~/.config/kit`, https://h/kit/x.py\n"
        "```\nkit report verify kit/gone.json --key $KEY/kit/x.pub\n```\nimg/gone.png\n"
    )
    top = top_level_names(tmp_path)
    assert top == {"docs", "kit"}
    assert problems(page, tmp_path, top) == [
        "docs/a.md: ../../x.md: outside the repository",
        "docs/a.md: kit/{here,gone}.py: no such file",
        "docs/a.md: kit/*.txt: matches nothing",
        "docs/a.md: kit/gone.json: no such file",
        "docs/a.md: img/gone.png: no such file",
    ]


@pytest.mark.parametrize(
    ("token", "paths"),
    [
        ("a/{b,c}.md", ["a/b.md", "a/c.md"]),
        ("r-0{2,3}/{x,y}", ["r-02/x", "r-02/y", "r-03/x", "r-03/y"]),
    ],
)
def test_braces_expand(token: str, paths: list[str]) -> None:
    assert expand(token) == paths
