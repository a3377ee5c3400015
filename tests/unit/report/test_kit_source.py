"""A report names the code that wrote it (issue 44): kit's git commit, whether the tree had
uncommitted changes, and the patch series' digest; a report from before the field still reads
and verifies. The commit is read from real git repositories made here."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

from factories import build_report

from kit.patches import series_named
from kit.report import Report
from kit.report.assemble import UNKNOWN_COMMIT, git_commit, kit_commit, series_sha256
from kit.report.files import read_report, write_report
from kit.report.verify import verify_report


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=kit", "-c", "user.email=kit@example.invalid",
         *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def payload(path: Path) -> dict[str, object]:
    """The report as stored in the file's envelope."""
    data: dict[str, object] = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
    return data


def test_the_commit_of_a_checkout_and_whether_it_is_dirty(tmp_path: Path) -> None:
    repo = tmp_path / "kit-checkout"
    (repo / "kit").mkdir(parents=True)
    (repo / "kit" / "__init__.py").write_text("__version__ = '0.1.0'\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    head = git(repo, "rev-parse", "HEAD")
    assert git_commit(repo) == (head, False)
    (repo / "notes.txt").write_text("untracked: not kit's code\n")
    assert git_commit(repo) == (head, False)
    (repo / "kit" / "__init__.py").write_text("__version__ = '0.1.1'\n")
    assert git_commit(repo) == (head, True)


def test_no_checkout_of_its_own_is_unknown(tmp_path: Path) -> None:
    assert git_commit(tmp_path) == (UNKNOWN_COMMIT, None)  # no git repository at all
    # an installed kit in a venv inside some other repository is not that repository's code
    outer = tmp_path / "project"
    site = outer / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    git(outer, "init", "-q")
    assert git_commit(site) == (UNKNOWN_COMMIT, None)
    (outer / "README").write_text("x")
    git(outer, "add", ".")
    git(outer, "commit", "-q", "-m", "one")
    assert git_commit(site) == (UNKNOWN_COMMIT, None)


def test_a_new_report_names_the_commit_and_the_series_digest(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    report = build_report(fixtures_dir)
    source = report.kit_source
    assert source is not None
    assert (source.commit, source.dirty) == kit_commit()
    assert re.fullmatch(r"[0-9a-f]{40}", source.commit) or source.dirty is None
    name = report.recipe["server"]["patches"]
    series = series_named(name)
    assert source.patch_series == name
    assert source.patch_series_sha256 == series_sha256(
        series.name, [(p.meta.file, p.sha256) for p in series.patches]
    )
    # written and read back, it verifies
    path = write_report(report, tmp_path / "run")
    assert payload(path)["kit_source"]["commit"] == source.commit
    assert read_report(path, allow_unsigned=True)[0].kit_source == source
    assert verify_report(path, allow_unsigned=True).ok


def test_the_digest_is_of_the_series_name_and_each_patch_in_order() -> None:
    a = series_sha256("s", [("0001.patch", "a" * 64), ("0002.patch", "b" * 64)])
    assert a != series_sha256("s", [("0002.patch", "b" * 64), ("0001.patch", "a" * 64)])
    assert a != series_sha256("t", [("0001.patch", "a" * 64), ("0002.patch", "b" * 64)])
    assert len(a) == 64


def test_a_report_from_before_the_field_reads_and_verifies(fixtures_dir: Path) -> None:
    path = fixtures_dir / "reports" / "cpu-tiny-a.json"
    assert "kit_source" not in payload(path)
    report: Report = read_report(path, allow_unsigned=True)[0]
    assert report.kit_source is None  # not recorded: no upgrade can say which code wrote it
    assert verify_report(path, allow_unsigned=True).ok
