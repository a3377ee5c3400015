"""experiments/sweep-noise.py gives back the committed noise.json of the H200 sweep it ran on."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from kit.report.files import read_report
from kit.signing import load_public_key

RUN = Path("experiments") / "results" / "h200-llama8b-bf16-sweep-2026-12-03"
KEY = Path("examples") / "keys" / "h200-2026-12-02-dflash2.pub"


def _noise_script(root: Path) -> ModuleType:
    # the experiment's own script, run on the report it measured
    spec = importlib.util.spec_from_file_location(
        "sweep_noise", root / "experiments" / "sweep-noise.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_noise_json_is_what_the_script_gives(repo_root: Path) -> None:
    report, check = read_report(repo_root / RUN / "report.json", load_public_key(repo_root / KEY))
    assert check.valid
    committed = json.loads((repo_root / RUN / "noise.json").read_text())
    assert _noise_script(repo_root).points(report, committed["seed"]) == committed["points"]
