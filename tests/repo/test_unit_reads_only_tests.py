"""No unit test names a repository path outside tests/: tests/unit reads its data from tests/."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

# fixtures of the suites that read the checkout (tests/conftest.py); tests/unit takes fixtures_dir
CHECKOUT_FIXTURES = frozenset({"repo_root", "every_recipe", "every_series", "every_example_report"})


def top_level(root: Path) -> frozenset[str]:
    """The checkout's own top-level names but tests/: not hidden, not ignored by .gitignore."""
    ignored = [
        line.strip().strip("/")
        for line in (root / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return frozenset(
        p.name
        for p in root.iterdir()
        if not p.name.startswith(".")
        and p.name != "tests"
        and not any(fnmatch.fnmatch(p.name, pattern) for pattern in ignored)
    )


def _levels(node: ast.AST) -> int | None:
    """How many folders above the test file an expression built on ``__file__`` climbs."""
    if isinstance(node, ast.Name) and node.id == "__file__":
        return 0
    if isinstance(node, ast.Call) and node.args and _name(node.func) == "Path":
        return _levels(node.args[0])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _levels(node.func.value) if node.func.attr in ("resolve", "absolute") else None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        up = _levels(node.value)
        return None if up is None else up + 1
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "parents"
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, int)
    ):
        up = _levels(node.value.value)
        return None if up is None else up + node.slice.value + 1
    return None


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _is_joined(node: ast.AST, up: dict[ast.AST, ast.AST]) -> bool:
    parent = up.get(node)
    return isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div) and parent.right is node


def _relative_ok(node: ast.AST, up: dict[ast.AST, ast.AST], tree: ast.Module) -> bool:
    """A relative path that is joined onto a base (``base / "recipes/x.yaml"``), directly or
    through a module constant that is only ever joined: the base decides where it points."""
    if isinstance(up.get(node), ast.Call) and _name(up[node].func) in ("Path", "PurePath"):
        node = up[node]
    while isinstance(parent := up.get(node), ast.BinOp) and parent.left is node:
        node = parent
    if _is_joined(node, up):
        return True
    assign = up.get(node)
    if not (isinstance(assign, ast.Assign) and assign in tree.body and len(assign.targets) == 1):
        return False
    const = _name(assign.targets[0])
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == const]
    return all(_is_joined(n, up) for n in uses if n is not assign.targets[0])


def outside_reads(source: str, depth: int, top: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, what)`` for each place in a test module that names a repository path outside
    tests/; ``depth`` is how many folders deep under tests/ the module sits (tests/unit/x.py: 1)."""
    tree = ast.parse(source)
    up = _parents(tree)
    names = "|".join(re.escape(t) for t in sorted(top))
    path_like = re.compile(rf"^(?:\./|(?:\.\./)+)?(?:{names})/|^(?:\.\./)+(?:{names})$")
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name | ast.arg):
            name = node.id if isinstance(node, ast.Name) else node.arg
            if name in CHECKOUT_FIXTURES:
                found.setdefault(line, f"{name}: a fixture of the checkout, not of tests/")
        elif isinstance(node, ast.Attribute | ast.Subscript):
            levels = _levels(node)
            if levels is not None and levels > depth + 1 and _levels(up[node]) is None:
                found.setdefault(line, "reaches the repository's root from __file__")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            parent = up.get(node)
            if isinstance(parent, ast.JoinedStr | ast.Expr):
                continue  # a message or a docstring
            bare = isinstance(parent, ast.Call) and _name(parent.func) in ("Path", "open")
            hit = path_like.match(node.value) or (bare and node.value in top)
            if hit and not _relative_ok(node, up, tree):
                found.setdefault(line, f"{node.value!r}: a repository path outside tests/")
    return sorted(found.items())


def test_no_unit_test_names_a_repository_path_outside_tests(repo_root: Path) -> None:
    tests, top = repo_root / "tests", top_level(repo_root)
    found = [
        f"{path.relative_to(repo_root)}:{line}: {what}"
        for path in sorted((tests / "unit").rglob("*.py"))
        for line, what in outside_reads(
            path.read_text(), len(path.relative_to(tests).parts) - 1, top
        )
    ]
    assert found == [], "unit tests read only tests/ (fixtures_dir; checks of the repo: tests/repo)"


PLANTED = '''
"""recipes/a.yaml in a docstring is prose."""
ROOT = Path(__file__).resolve().parents[3]
SEED = "recipes/seed.yaml"
HERE = Path(__file__).parents[2] / "fixtures"
def test_x(repo_root, fixtures_dir, tmp_path):
    load(repo_root / "recipes" / "a.yaml")
    load(ROOT / "docs")
    load(Path("../examples/r.json"))
    run(["recipe", "show", "recipes/cpu-tiny.yaml"])
    open("README.md")
    load(fixtures_dir / "recipes" / "a.yaml", fixtures_dir / SEED, tmp_path / "docs" / "a.md")
    assert out == f"recipes/{name}" and "patches" in report
'''


def test_the_matcher_finds_what_was_planted_and_nothing_else() -> None:
    top = frozenset({"recipes", "docs", "examples", "README.md", "patches"})
    assert outside_reads(PLANTED, 2, top) == [
        (3, "reaches the repository's root from __file__"),
        (6, "repo_root: a fixture of the checkout, not of tests/"),
        (7, "repo_root: a fixture of the checkout, not of tests/"),
        (9, "'../examples/r.json': a repository path outside tests/"),
        (10, "'recipes/cpu-tiny.yaml': a repository path outside tests/"),
        (11, "'README.md': a repository path outside tests/"),
    ]
