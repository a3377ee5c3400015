"""The peers of ``bench.peers`` after kit's bench, one tool at a time: each installed, given
kit's points, run, and read back through kit's importer (:func:`run_peers`). A tool that fails
is kept with its error and its log; it never fails kit's run."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from kit.bench import BenchResult
from kit.bench.load import LoadPoint
from kit.bench.load.datasets import Planned
from kit.errors import BadInputError, KitError
from kit.figures import AGREEMENT_PCT
from kit.installer import InstallError
from kit.peers.base import Invocation, Peer, PeerJob, shown
from kit.peers.compare import (
    agreement,
    all_agree,
    compare_figures,
    differences,
    kit_figures,
    read_back,
)
from kit.peers.schema import KIT_DEFINITIONS, RULE, PeerPoint, PeerRun, Peers
from kit.peers.traffic import TrafficPoint, kit_points, traffic
from kit.recipe.figures import Definition, PointFigure

log = logging.getLogger(__name__)


def _files(job: PeerJob, inv: Invocation) -> list[str]:
    paths = [*inv.inputs, inv.result, inv.log]
    return [str(p.relative_to(job.out_dir)) for p in paths if p.exists()]


def read_point(
    job: PeerJob,
    point: TrafficPoint,
    inv: Invocation,
    error: str | None,
    kit: LoadPoint | None,
    python: str,
) -> PeerPoint:
    """One point of one tool (run by ``python``), from its result file (or its error)."""
    logged = str(inv.log.relative_to(job.out_dir))
    base = PeerPoint(
        label=point.label,
        argv=shown([python, *inv.argv], job.out_dir),
        files=_files(job, inv),
        log_file=logged,
    )
    if error is None and not inv.result.exists():
        error = "it wrote no result file"
    if error is not None:
        return base.model_copy(update={"error": f"{error} (see {logged})"})
    try:
        imported, got = read_back(inv.result)
    except BadInputError as exc:
        why = f"its result file cannot be read: {exc.message} (see {logged})"
        return base.model_copy(update={"error": why})
    figures = compare_figures(got, imported.definitions, kit)
    f = got.figures
    return base.model_copy(
        update={
            "result_file": str(inv.result.relative_to(job.out_dir)),
            "requests": f.requests,
            "completed": f.completed,
            "failed": f.failed,
            "figures": figures,
            "agree": agreement(figures),
            "notes": list(imported.warnings),
        }
    )


def _definitions(definitions: Mapping[PointFigure, Definition]) -> dict[str, str]:
    return {figure: d.text for figure, d in definitions.items()}


def run_peer(
    peer: Peer, job: PeerJob, points: list[TrafficPoint], kits: dict[str, LoadPoint]
) -> PeerRun:
    """One tool at every point: installed, prepared, run, read back, compared."""
    try:
        env = peer.environment(job)
    except (InstallError, KitError, OSError) as exc:
        log.warning("peers: %s not run: %s", peer.name, exc)
        return PeerRun(
            tool=peer.tool, name=peer.name, version=None, source="not installed", error=str(exc)
        )
    where = job.tool_dir(peer.tool)
    where.mkdir(parents=True, exist_ok=True)
    plan = {p.label: (p, peer.prepare(p, job, where)) for p in points}
    log.info("peers: %s %s, %d points", peer.name, env.version or "", len(plan))
    t0 = time.monotonic()
    status = peer.run(env, plan, job)
    log.info("peers: %s done in %.0f s", peer.name, time.monotonic() - t0)
    entries = []
    for label, (point, inv) in plan.items():
        error = status.get(label, "not run")
        entry = read_point(job, point, inv, error, kits.get(label), env.python)
        entry = entry.model_copy(update={"notes": [*peer.notes(point), *entry.notes]})
        if entry.error:
            log.warning("peers: %s at %s: %s", peer.name, label, entry.error)
        entries.append(entry)
    return PeerRun(
        tool=peer.tool,
        name=peer.name,
        version=env.version,
        source=env.source,
        host_packages=list(env.host_packages),
        definitions=_definitions(peer.definitions),
        points=entries,
        agree=all_agree([e.agree for e in entries]),
    )


def _notes(runs: list[PeerRun]) -> list[str]:
    out = []
    for run in runs:
        if run.error:
            out.append(f"{run.name} did not run: {run.error}")
        for p in run.points:
            if p.error:
                out.append(f"{p.label}: {run.name} failed: {p.error}")
            out += differences(p.label, run.name, p.figures)
    return out


def summary_notes(peers: Peers) -> list[str]:
    """A line per tool for the report's notes: that it did not run, where it failed, and at how
    many points it agrees with kit (the figures themselves are in the peers block)."""
    out = []
    for run in peers.runs:
        named = f"{run.name} {run.version}" if run.version else run.name
        if run.error:
            out.append(f"{named} did not run: {run.error.splitlines()[0]}")
            continue
        if run.host_packages:
            some = ", ".join(run.host_packages[:4])
            more = ", ..." if len(run.host_packages) > 4 else ""
            out.append(
                f"{named} ran in a venv over the engine's Python's site-packages, "
                f"{len(run.host_packages)} of its packages from there ({some}{more}; the peers "
                "block lists them)"
            )
        failed = [p.label for p in run.points if p.error]
        if failed:
            out.append(f"{named} failed at {', '.join(failed)}: its log in peers/{run.tool}/")
        judged = [p for p in run.points if p.agree is not None]
        if judged:
            agree = sum(1 for p in judged if p.agree)
            out.append(
                f"{named} agrees with kit at {agree} of {len(judged)} points "
                f"(±{peers.tolerance_pct:g} %; kit report show has the table)"
            )
    return out


def run_peers(
    job: PeerJob, peers: list[Peer], result: BenchResult | None, planned: list[Planned] | None
) -> Peers:
    """Each of ``peers`` in turn at kit's points (``result``'s, on the requests kit drew,
    ``planned``), beside kit's own figures."""
    points = traffic(job.bench, result, planned)
    kits = kit_points(job.bench, result)
    runs = [run_peer(peer, job, points, kits) for peer in peers]
    return Peers(
        tolerance_pct=AGREEMENT_PCT,
        rule=RULE,
        kit_definitions=KIT_DEFINITIONS,
        kit=[kit_figures(kits[p.label]) for p in points if p.label in kits],
        runs=runs,
        agree=all_agree([r.agree for r in runs]),
        notes=_notes(runs),
    )
