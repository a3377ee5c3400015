"""Where an experiment writes its result: the JSON under experiments/results, with the commit."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def head_commit() -> str:
    """The repository's HEAD commit ('' outside a git checkout)."""
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()


def write_result(name: str, doc: dict[str, Any], output: Path | None = None) -> Path:
    """``doc`` with the commit first, as ``output`` (default
    experiments/results/NAME-<date>.json); returns the path."""
    out = output or ROOT / "experiments" / "results" / f"{name}-{dt.date.today()}.json"
    out.write_text(json.dumps({"commit": head_commit(), **doc}, indent=1) + "\n")
    return out
