"""`kit reproduce REPORT.json` for real on the CPU recipe: a signed run, then a re-run of the
report it wrote, which ends with a verdict (REPRODUCED, DIFFERENT with its causes, or
INCONCLUSIVE with its reasons; the exit code follows it) signed
into the new report and linked to the original by the sha256 of its bytes. (The refusals
before any work are unit tests: tests/unit/test_rerun.py.)"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import small

from kit.build import Built
from kit.engine import EngineEnv
from kit.report.files import read_report
from kit.report.verdict import verdict_exit
from kit.signing import KeyPair, generate_keypair, load_public_key

pytestmark = pytest.mark.integration

# the re-run takes the original's recipe, so it runs none of the probes after the bench either
SMALL = small()


def kit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kit.cli", *args], capture_output=True, text=True, cwd=cwd,
        check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return generate_keypair(tmp_path_factory.mktemp("keys"), "rerun-test")


@pytest.fixture(scope="module")
def original(
    built: Built, engine_env: EngineEnv, repo_root: Path, keys: KeyPair,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:  # fmt: skip
    out = tmp_path_factory.mktemp("original")
    sets = [a for s in SMALL for a in ("--set", s)]
    proc = kit(
        "reproduce", "recipes/cpu-tiny.yaml", *sets, "--key", str(keys.private_key), "-o",
        str(out), cwd=repo_root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip())


def payload(path: Path) -> dict:  # type: ignore[type-arg]
    envelope = json.loads(path.read_bytes())
    return json.loads(base64.b64decode(envelope["payload"]))  # type: ignore[no-any-return]


def test_rerun_of_a_report_ends_with_a_signed_verdict_linked_to_it(
    original: Path, repo_root: Path, keys: KeyPair, tmp_path: Path
) -> None:
    proc = kit(
        "reproduce", str(original), "--report-key", str(keys.public_key), "--key",
        str(keys.private_key), "-o", str(tmp_path), cwd=repo_root,
    )  # fmt: skip
    new_path = Path(proc.stdout.strip().splitlines()[-1])
    report, check = read_report(new_path, load_public_key(keys.public_key))
    assert check.valid  # the verdict is inside what the signature covers
    first = payload(original)
    verdict = report.reproduction
    assert verdict is not None
    assert verdict.original_run_id == first["run_id"]
    assert verdict.original_sha256 == hashlib.sha256(original.read_bytes()).hexdigest()
    assert not verdict.variation and verdict.overrides == []
    # two runs a prompt on a shared 2-core machine: any verdict but NOT COMPARABLE, and the
    # exit code follows it (0 REPRODUCED, 4 DIFFERENT, 5 INCONCLUSIVE)
    assert verdict.verdict != "NOT COMPARABLE", verdict.text()
    assert proc.returncode == verdict_exit(verdict), proc.stderr[-3000:]
    if verdict.verdict == "DIFFERENT":
        assert verdict.differing and verdict.causes, verdict.text()
    if verdict.verdict == "INCONCLUSIVE":
        assert verdict.inconclusive, verdict.text()
    # the whole claim, each figure with the band of its kind: both prompts' decode and wall
    # TPS and TTFT (prefill is off in this run, so no prefill figure)
    names = [f.metric for f in verdict.figures]
    assert names[:2] == ["narrative decode TPS", "narrative wall TPS"], names
    for prompt in ("narrative", "code"):
        assert {f"{prompt} {m}" for m in ("decode TPS", "wall TPS", "TTFT")} <= set(names), names
    assert not any("prefill" in n for n in names), names
    decode = [f for f in verdict.figures if f.metric.endswith("decode TPS")]
    assert all(f.band_pct is not None and f.band_pct >= 3.0 for f in decode)
    # the same recipe and pins as the original: only the run differs
    assert report.recipe == first["recipe"] and report.recipe_sha256 == first["recipe_sha256"]
    assert f"verdict: {verdict.summary}" in proc.stderr
    # kit report compare gives the same verdict for the two files
    cmp = kit(
        "report", "compare", str(original), str(new_path), "--key", str(keys.public_key),
        "--json", cwd=repo_root,
    )  # fmt: skip
    assert cmp.returncode == verdict_exit(verdict), cmp.stderr
    assert json.loads(cmp.stdout)["verdict"]["verdict"] == verdict.verdict
    # the two CPU reports as a results table: both verify against the key, one group
    table = kit(
        "report", "table", str(original), str(new_path), "--keys", str(keys.public_key.parent),
        "--html", str(tmp_path / "benchmarks.html"), cwd=repo_root,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    # sections by kind: a VALID run under single-stream decode, an INVALID one apart; the two
    # CPU runs are one group (model, rig, engine) wherever they sit
    sections = [ln[3:] for ln in table.stdout.splitlines() if ln.startswith("## ")]
    assert set(sections) <= {"Single-stream decode", "INVALID runs"} and sections, sections
    assert table.stdout.count("\n### ") == len(sections) and "rerun-test" in table.stdout
    assert first["run_id"] in table.stdout and report.run_id in table.stdout
    assert "Unverified" not in table.stdout and (tmp_path / "benchmarks.html").exists()
