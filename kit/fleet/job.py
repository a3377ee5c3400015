"""The entrypoint of one sweep cell as a Ray job, on whichever node Ray placed it.

It runs ``kit reproduce`` on the cell and prints the report into the job's log: the report comes
back through Ray's Jobs API, signed by the rig that ran it.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

BEGIN = "KIT-FLEET-REPORT-BEGIN"
END = "KIT-FLEET-REPORT-END"
CHUNK = 4096


def report_lines(data: bytes) -> list[str]:
    text = base64.b64encode(data).decode()
    return [BEGIN, *(text[i : i + CHUNK] for i in range(0, len(text), CHUNK)), END]


def report_from_log(log: str) -> tuple[bytes | None, str]:
    """The report a job printed (None: it printed none) and the log without it."""
    lines = log.splitlines()
    if BEGIN not in lines or END not in lines:
        return None, log
    a, b = lines.index(BEGIN), lines.index(END)
    data = base64.b64decode("".join(lines[a + 1 : b]))
    return data, "\n".join(lines[:a] + lines[b + 1 :]) + "\n"


def main() -> int:
    """``python -m kit.fleet.job``: read the cell from ``KIT_FLEET_CELL`` (JSON: its name, its
    recipe resolved on the submitting machine, so the node needs no copy of the recipe files),
    run ``kit reproduce`` on it with this node's signing key (``KIT_SIGNING_KEY`` as the node was
    started with, else kit's own key here), and print the report between two marker lines in
    base64 chunks, which the submitter cuts out of the job's log (:func:`report_from_log`).
    Returns kit reproduce's exit status."""
    cell = json.loads(os.environ["KIT_FLEET_CELL"])
    with tempfile.TemporaryDirectory(prefix="kit-fleet-") as tmp:
        recipe = Path(tmp) / f"{cell['name']}.yaml"
        recipe.write_text(yaml.safe_dump(cell["recipe"], sort_keys=False))
        argv = [sys.executable, "-m", "kit.cli", "reproduce", str(recipe), "-o", tmp]
        print(f"kit fleet: cell {cell['name']}", flush=True)
        rc = subprocess.run([*argv, *cell.get("extra", [])], check=False).returncode
        reports = sorted(Path(tmp).glob("*/report.json"))
        if reports:
            print("\n".join(report_lines(reports[0].read_bytes())), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
