"""``kit sweep``: recipes x varied ``--set`` values x rig classes, each cell one whole
``kit reproduce``, run here one after another or as Ray jobs on a fleet of rigs
(:mod:`kit.fleet.ray_jobs`), resumed by skipping cells whose report is there and verifies.
Ray lives in the ``fleet`` extra, never in an engine's environment. docs/fleet.md."""

from __future__ import annotations

import logging
from pathlib import Path

from kit.fleet.cells import Cell, CellResult, expand, rig_class
from kit.fleet.ray_jobs import run_ray
from kit.fleet.run import already_done, public_keys, record, run_local, validate
from kit.probe import probe_host

__all__ = ["Cell", "CellResult", "expand", "node_resources", "rig_class", "sweep"]

log = logging.getLogger(__name__)


def node_resources() -> dict[str, float]:
    """This machine's custom Ray resource, ``{"rig:<class>": 1}``, from the host probe."""
    host = probe_host(redact=True)
    gpus = [
        (str(g.name), g.memory_total_mib if isinstance(g.memory_total_mib, int) else 0)
        for g in host.gpus
    ]
    isa = host.cpu.isa if isinstance(host.cpu.isa, list) else None
    return {f"rig:{rig_class(gpus, isa)}": 1.0}


def sweep(
    cells: list[Cell],
    out: Path,
    *,
    keys_dir: Path | None,
    ray_address: str | None,
    extra: list[str],
) -> list[CellResult]:
    """Run every cell not done yet (its report verified under ``out``); every cell's result."""
    pubs = public_keys(keys_dir)
    validate(cells)  # every recipe and --set checked before anything runs
    out.mkdir(parents=True, exist_ok=True)
    backend = f"ray {ray_address}" if ray_address else "local"
    results: dict[str, CellResult] = {}
    todo = []
    for cell in cells:
        done = already_done(cell, out, pubs, backend)
        if done is not None:
            log.info("sweep: %s skipped: its report is there and verifies", cell.name)
            results[cell.name] = record(done, out)
        else:
            todo.append(cell)
    if ray_address:
        for result in run_ray(ray_address, todo, out, pubs, extra):
            results[result.cell.name] = result
    else:
        for n, cell in enumerate(todo, 1):
            log.info("sweep: %s (%d of %d)", cell.name, n, len(todo))
            results[cell.name] = run_local(cell, out, pubs, extra)
    return [results[c.name] for c in cells]
