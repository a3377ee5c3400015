"""A sweep's cells as Ray jobs, through Ray's Jobs API (``kit[fleet]``: ray[default]).

Each cell is one job whose entrypoint is :mod:`kit.fleet.job` (kit must be installed on every
node, in the Python ``ray start`` ran from). All cells are submitted at once; Ray queues them by
the resources each asks for (:func:`needs`).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from pathlib import Path
from typing import Any

from kit.errors import EnvironmentProblem
from kit.fleet.cells import LOG_FILE, REPORT_FILE, Cell, CellResult
from kit.fleet.job import report_from_log
from kit.fleet.run import finish
from kit.recipe import load_recipe

log = logging.getLogger(__name__)
POLL_S = 2.0


def client(address: str) -> Any:
    try:
        # lazy: ray is the fleet extra
        from ray.job_submission import JobSubmissionClient  # noqa: PLC0415
    except ImportError:
        raise EnvironmentProblem(
            "kit sweep --ray needs Ray's Jobs API, which is not installed",
            hint="pip install 'kit[fleet]'",
        ) from None
    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EnvironmentProblem(
            f"no Ray cluster answered at {address}: {exc}",
            hint="start one with `ray start --head` (docs/fleet.md), and pass its dashboard "
            "address, e.g. http://HEAD:8265",
        ) from None


def node_resources(address: str) -> list[dict[str, float]] | None:
    """What each live node of the cluster offers (Ray's state API on the dashboard), or None
    when the dashboard does not say."""
    url = address.rstrip("/") + "/api/v0/nodes?detail=1"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            nodes = json.load(resp)["data"]["result"]["result"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [dict(n.get("resources_total") or {}) for n in nodes if n.get("state") == "ALIVE"]


def needs(cell: Cell) -> dict[str, float]:
    """The resources a cell's job asks for: its rig class, and its recipe's GPUs. A cell naming
    a rig class asks for ``rig:<class>: 1``; every node offers one of its own class (``ray start
    --resources "$(kit fleet resources)"``), so a cell runs only on a rig of its class, and one
    cell at a time per rig."""
    recipe = load_recipe(cell.recipe, tuple(cell.sets)).recipe
    out = {f"rig:{cell.rig}": 1.0} if cell.rig else {}
    if recipe.server.engine.device == "cuda" and recipe.rig is not None and recipe.rig.gpus:
        out["GPU"] = float(recipe.rig.gpus)
    return out


def unplaceable(cell: Cell, nodes: list[dict[str, float]] | None) -> str | None:
    """Why no node of the cluster can ever run the cell, or None (also when unknown)."""
    if nodes is None:
        return None
    want = needs(cell)
    if any(all(node.get(k, 0.0) >= v for k, v in want.items()) for node in nodes):
        return None
    offered = sorted({k for node in nodes for k in node if k.startswith("rig:")})
    asked = ", ".join(f"{k}: {v:g}" for k, v in want.items())
    return f"no node of the cluster offers {asked} (rig classes there: {', '.join(offered)})"


def submit(jobs: Any, cell: Cell, extra: list[str]) -> str:
    recipe = load_recipe(cell.recipe, tuple(cell.sets)).recipe
    payload = {"name": cell.name, "recipe": recipe.to_json_dict(), "extra": extra}
    want = needs(cell)
    gpus = want.pop("GPU", 0.0)
    resources = want
    job_id: str = jobs.submit_job(
        entrypoint="python -m kit.fleet.job",
        runtime_env={"env_vars": {"KIT_FLEET_CELL": json.dumps(payload)}},
        entrypoint_num_cpus=0,
        entrypoint_num_gpus=gpus,
        entrypoint_resources=resources or None,
        metadata={"kit_cell": cell.name},
    )
    log.info("sweep: %s submitted as %s", cell.name, job_id)
    return job_id


def collect(
    jobs: Any, cell: Cell, job_id: str, out: Path, pubs: list[Path], backend: str
) -> CellResult:
    """A finished job's log and report into OUT/<cell>/, and the cell's result. A job that ends
    without a report, or is stopped, is a failed cell, with its log kept."""
    status = str(jobs.get_job_status(job_id))
    text = jobs.get_job_logs(job_id)
    data, rest = report_from_log(text)
    folder = out / cell.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOG_FILE).write_text(rest)
    (folder / REPORT_FILE).unlink(missing_ok=True)
    if data is not None:
        (folder / REPORT_FILE).write_bytes(data)
    error = None if status.endswith("SUCCEEDED") else f"Ray job {job_id} {status.split('.')[-1]}"
    info = jobs.get_job_info(job_id)
    if error and getattr(info, "message", None):
        error += f": {str(info.message).splitlines()[0]} (the log: {cell.name}/{LOG_FILE})"
    return finish(cell, out, pubs, backend, error, job_id)


def run_ray(
    address: str, cells: list[Cell], out: Path, pubs: list[Path], extra: list[str]
) -> list[CellResult]:
    jobs = client(address)
    nodes = node_resources(address)
    results: list[CellResult] = []
    pending = {}
    for cell in cells:
        why = unplaceable(cell, nodes)
        if why is not None:  # Ray would keep it pending for ever
            log.error("sweep: %s: %s", cell.name, why)
            results.append(finish(cell, out, pubs, f"ray {address}", why, None))
        else:
            pending[submit(jobs, cell, extra)] = cell
    while pending:
        time.sleep(POLL_S)
        for job_id, cell in list(pending.items()):
            if jobs.get_job_status(job_id).is_terminal():
                result = collect(jobs, cell, job_id, out, pubs, f"ray {address}")
                log.info("sweep: %s %s%s", cell.name, result.status,
                         f" ({result.error})" if result.error else "")  # fmt: skip
                results.append(result)
                del pending[job_id]
    return results
