"""``kit report verify`` runs where nothing of the build, serve or bench side is installed.

A fresh interpreter with torch, auto_round, vllm and transformers blocked (``sys.modules``
entries set to None make any import of them fail) imports the verifier, verifies the committed
signed fixture with its public key, and shows which kit modules came along.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BLOCKED = ("torch", "auto_round", "vllm", "transformers")
# the orchestration side: none of it may come along with the verifier
NOT_IMPORTED = (
    "kit.pipeline",
    "kit.build",
    "kit.measure",
    "kit.serve",
    "kit.engine",
    "kit.compose",
    "kit.image",
    "kit.cli",
)

SCRIPT = """
import json, sys
for name in {blocked!r}:
    sys.modules[name] = None
from kit.report.verify import verify_report
from kit.signing import load_public_key
reports = sys.argv[1]
key = load_public_key(reports + "/signer.pub")
checklist = verify_report(reports + "/cpu-tiny-a.signed.json", key)
ours = sorted(m for m in sys.modules if m == "kit" or m.startswith("kit."))
print(json.dumps({{"ok": checklist.ok, "failed": checklist.failed, "modules": ours}}))
"""


def test_verify_runs_without_the_engine_side(fixtures_dir: Path) -> None:
    reports = fixtures_dir / "reports"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(blocked=BLOCKED), str(reports)],
        capture_output=True,
        text=True,
        check=True,
        cwd=fixtures_dir,
    )
    result = json.loads(out.stdout)
    assert result["ok"], result["failed"]
    assert "kit.report.verify" in result["modules"]
    came_along = [
        m for m in result["modules"] if any(m == n or m.startswith(n + ".") for n in NOT_IMPORTED)
    ]
    assert came_along == []
