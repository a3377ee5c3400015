"""kit.vllm_bench.driver: every point's `vllm bench serve` in one engine process.

The engine here is a stand-in package named vllm with the two entry points the driver uses
(vLLM itself runs it in the integration tests); it lets one point fail on purpose."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kit.vllm_bench.points import invoke_points

SERVE = """
import os, json
def add_cli_args(parser):
    parser.add_argument("--result-filename", required=True)
    parser.add_argument("--fail", action="store_true")
def main(args):
    if args.fail:
        raise RuntimeError("the server went away")
    with open(args.result_filename, "w") as fh:
        json.dump({"pid": os.getpid()}, fh)
    return {}
"""


def _engine(root: Path) -> dict[str, str]:
    pkg = root / "site" / "vllm"
    (pkg / "benchmarks").mkdir(parents=True)
    (pkg / "utils").mkdir()
    for d in (pkg, pkg / "benchmarks", pkg / "utils"):
        (d / "__init__.py").write_text("")
    (pkg / "benchmarks" / "serve.py").write_text(SERVE)
    (pkg / "utils" / "argparse_utils.py").write_text(
        "import argparse\nFlexibleArgumentParser = argparse.ArgumentParser\n"
    )
    return {**os.environ, "PYTHONPATH": str(root / "site")}


def test_points_run_in_one_process_and_a_failure_stays_with_its_point(tmp_path: Path) -> None:
    env = _engine(tmp_path)
    argvs = {
        label: ["bench", "serve", "--result-filename", str(tmp_path / f"{label}.json"), *extra]
        for label, extra in (("c-1", []), ("c-2", ["--fail"]), ("c-4", []))
    }
    status = invoke_points(sys.executable, argvs, env, 60, tmp_path)
    assert status["c-1"] is None and status["c-4"] is None
    assert status["c-2"] == "RuntimeError: the server went away"
    pids = {json.loads((tmp_path / f"{k}.json").read_text())["pid"] for k in ("c-1", "c-4")}
    assert len(pids) == 1  # one interpreter for the sweep
    log = (tmp_path / "vllm-bench-points.log").read_text()
    assert "=== kit point c-2 ===" in log and "the server went away" in log


def test_a_driver_that_cannot_start_fails_every_point(tmp_path: Path) -> None:
    argvs = {"c-1": ["bench", "serve"], "c-2": ["bench", "serve"]}
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # no vllm there
    status = invoke_points(sys.executable, argvs, env, 60, tmp_path)
    assert set(status) == {"c-1", "c-2"}
    assert all(v and v.startswith("the driver exited 1") for v in status.values())
