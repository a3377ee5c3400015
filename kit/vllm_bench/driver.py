"""Several `vllm bench serve` invocations in one Python process of the engine's environment,
run by path with the engine's interpreter (it imports vLLM, never kit; :func:`run`).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from typing import Any


def _parser() -> Any:
    serve = importlib.import_module("vllm.benchmarks.serve")
    try:
        helpers = importlib.import_module("vllm.utils.argparse_utils")
    except ImportError:  # vLLM before the argparse helpers moved
        helpers = importlib.import_module("vllm.utils")
    parser = helpers.FlexibleArgumentParser(prog="vllm bench serve")
    serve.add_cli_args(parser)
    return parser


def run(plan_file: str, status_file: str) -> int:
    """Run every point of PLAN.json, rewriting STATUS.json after each::

        python driver.py PLAN.json STATUS.json

    PLAN.json is a list of ``{"label": ..., "argv": [...]}``, each ``argv`` the arguments of one
    ``vllm bench serve`` after ``bench serve``. Each is parsed by vLLM's own parser for that
    subcommand and run by the function the subcommand runs (``vllm.benchmarks.serve.main``),
    one after the other, so the interpreter, torch and vLLM are imported once, not once per
    point (on an H200 host that import was about 27 s of each 40 s point). STATUS.json is
    rewritten after each point: label -> null when it returned, else why it failed."""
    main = importlib.import_module("vllm.benchmarks.serve").main
    with open(plan_file, encoding="utf-8") as fh:
        plan = json.load(fh)
    parser = _parser()
    status: dict[str, str | None] = {}
    for entry in plan:
        label = entry["label"]
        print(f"=== kit point {label} ===", flush=True)
        t0 = time.monotonic()
        try:
            main(parser.parse_args(entry["argv"]))
            status[label] = None
        except SystemExit as exc:  # argparse refused the arguments
            status[label] = f"SystemExit {exc.code}"
        except Exception as exc:
            traceback.print_exc()
            status[label] = f"{type(exc).__name__}: {exc}"
        print(f"=== kit point {label}: {time.monotonic() - t0:.1f} s ===", flush=True)
        with open(status_file, "w", encoding="utf-8") as fh:
            json.dump(status, fh)
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2]))
