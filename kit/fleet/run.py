"""Running a sweep's cells: one after another here (local), or as Ray jobs on a cluster
(:mod:`kit.fleet.ray_jobs`). Either way a cell whose report is already under the sweep's
output and verifies is skipped, so a sweep that stopped resumes where it stopped."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from kit.errors import BadInputError
from kit.fleet.cells import CELL_FILE, FAILED_REPORT, LOG_FILE, REPORT_FILE, Cell, CellResult
from kit.recipe import load_recipe
from kit.report.verify import verify_report
from kit.signing import TrustStore, load_public_key
from kit.signing.keys import fingerprint

log = logging.getLogger(__name__)


def public_keys(keys_dir: Path | None) -> list[Path]:
    """The .pub files of ``--keys DIR`` (refused when it holds none)."""
    if keys_dir is None:
        return []
    pubs = sorted(keys_dir.glob("*.pub"))
    if not pubs:
        raise BadInputError(f"--keys {keys_dir}: no .pub file there")
    return pubs


def verified(path: Path, pubs: Iterable[Path]) -> str | None:
    """The signing key's fingerprint when the report at ``path`` is complete and passes every
    verify item, signed by one of ``pubs`` (none given: a key this install trusts); else
    None."""
    try:
        envelope = json.loads(path.read_bytes())
        keyid = envelope["signatures"][0]["keyid"]
        status = json.loads(base64.b64decode(envelope["payload"])).get("status")
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    if status != "complete":  # an interrupted run's report is kept, not taken as done
        return None
    keys = [load_public_key(p) for p in pubs]
    key = next((k for k in keys if fingerprint(k) == keyid), None)
    if keys and key is None:
        return None
    try:
        checklist = verify_report(path, key, trust=None if key else TrustStore.default())
    except BadInputError:
        return None
    return str(keyid) if checklist.ok else None


def validate(cells: list[Cell]) -> None:
    """Every cell's recipe with its --set values, before any run (exit 2 on the first bad)."""
    for cell in cells:
        load_recipe(cell.recipe, tuple(cell.sets))


def already_done(cell: Cell, out: Path, pubs: list[Path], backend: str) -> CellResult | None:
    report = out / cell.name / REPORT_FILE
    if report.exists() and (signer := verified(report, pubs)):
        return CellResult(
            cell=cell,
            status="skipped",
            backend=backend,
            report=str(report.relative_to(out)),
            signed_by=signer,
        )
    return None


def record(result: CellResult, out: Path) -> CellResult:
    folder = out / result.cell.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CELL_FILE).write_text(result.model_dump_json(indent=2) + "\n")
    return result


def finish(
    cell: Cell, out: Path, pubs: list[Path], backend: str, error: str | None, job_id: str | None
) -> CellResult:
    """The result of a cell whose run ended: done when its report is there and verifies."""
    report = out / cell.name / REPORT_FILE
    signer = verified(report, pubs) if report.exists() else None
    if error is None and signer is None:
        error = (
            "its report is incomplete or does not verify"
            if report.exists()
            else "no report came back"
        )
    if error is not None and report.exists():  # kept, marked: a re-run does not take it as done
        report = report.rename(report.with_name(FAILED_REPORT))
        signer = None
    result = CellResult(
        cell=cell,
        status="done" if error is None else "failed",
        backend=backend,
        job_id=job_id,
        error=error,
        report=str(report.relative_to(out)) if report.exists() else None,
        signed_by=signer,
    )
    return record(result, out)


def run_local(
    cell: Cell, out: Path, pubs: list[Path], extra: list[str], python: str | None = None
) -> CellResult:
    """One cell as ``kit reproduce`` in a child process here; its log in OUT/<cell>/cell.log."""
    folder = out / cell.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / REPORT_FILE).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kit-sweep-") as tmp:
        argv = [python or sys.executable, "-m", "kit.cli", "reproduce", cell.recipe, "-o", tmp]
        argv += [a for s in cell.sets for a in ("--set", s)] + extra
        with (folder / LOG_FILE).open("w") as fh:
            proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=False)
        reports = sorted(Path(tmp).glob(f"*/{REPORT_FILE}"))
        if reports:
            run_dir = reports[0].parent
            shutil.move(str(reports[0]), folder / REPORT_FILE)
            for f in run_dir.iterdir():  # server.log, vLLM's results: beside the report
                shutil.move(str(f), folder / f.name)
    error = None if proc.returncode == 0 else f"kit reproduce exited {proc.returncode}"
    return finish(cell, out, pubs, "local", error, None)
