"""vLLM's own benchmark (`vllm bench serve`, the engine's) beside kit, as a peer: the
arguments of :mod:`kit.vllm_bench` (a prompt's as ``bench.vllm_bench`` sends it, a load
point's likewise), every point in one process of the engine's environment
(:mod:`kit.vllm_bench.driver`), its ``--save-result`` file read back through kit's importer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kit.importers import vllm_bench as reader
from kit.peers.base import Env, Invocation, Peer, PeerJob, tool_environ, write_jsonl
from kit.peers.install import Host
from kit.peers.traffic import TrafficPoint
from kit.recipe import PeerName, Prompt, VllmBenchSettings
from kit.vllm_bench import VllmBenchJob, bench_argv
from kit.vllm_bench.points import invoke_points, point_argv

MODULE = ["-m", "vllm.entrypoints.cli.main"]
LOG = "vllm-bench-points.log"


@dataclass(frozen=True)
class _At:
    """A load point as :func:`kit.vllm_bench.points.point_argv` reads it."""

    requests: int
    level: float


def _job(point: TrafficPoint, job: PeerJob, where: Path) -> VllmBenchJob:
    settings = VllmBenchSettings(warmups=point.warmups, runs=point.requests)
    return VllmBenchJob(
        python=job.python,
        pythonpath=job.pythonpath,
        url=job.url,
        model=job.model,
        tokenizer=job.tokenizer,
        bench=job.bench,
        settings=settings,
        out_dir=where,
    )


class VllmBenchPeer(Peer):
    tool: ClassVar[PeerName] = "vllm_bench"
    name: ClassVar[str] = "vllm bench serve"
    definitions = reader.DEFINITIONS

    def notes(self, point: TrafficPoint) -> list[str]:
        out = super().notes(point)
        if point.pacing.arrival == "constant":  # no exact vLLM equivalent
            out.append("kit sent constant arrivals, vLLM Poisson ones (burstiness 1)")
        # vLLM warms up with --num-warmups copies of the point's first request, not with the rows
        # kit drew for its warm-ups; the measured rows are kit's, in order
        if point.warmups:
            out.append(
                f"vLLM warmed up with {point.warmups} copies of the point's first request, "
                "not with the rows kit drew for its warm-ups"
            )
        return out

    def install(self, host: Host) -> Env:
        extra = {"PYTHONPATH": host.pythonpath} if host.pythonpath else {}
        return Env(host.python, host.engine_version, "the engine's vLLM", tool_environ(extra))

    def prepare(self, point: TrafficPoint, job: PeerJob, where: Path) -> Invocation:
        measured = point.sent(self.tool)[point.warmups :]
        rows: list[dict[str, object]] = [
            {"prompt": r.text, "output_tokens": r.max_tokens} for r in measured
        ]
        data = write_jsonl(where / f"{point.label}.jsonl", rows)
        name = f"{point.label}.json"
        vjob = _job(point, job, where)
        if point.level is None:  # a prompt: its text and length, as bench.vllm_bench sends it
            first = point.rows[0]
            prompt = Prompt(name=point.label, text=first.text, max_tokens=first.max_tokens)
            argv = bench_argv(vjob, prompt, data, runs=point.requests, result_file=name)
        else:
            at = _At(point.requests, point.level)
            argv = point_argv(vjob, at, data, warmups=point.warmups, result_file=name)
        return Invocation([*MODULE, *argv], where / name, where / LOG, (data,))

    def run(
        self, env: Env, plan: dict[str, tuple[TrafficPoint, Invocation]], job: PeerJob
    ) -> dict[str, str | None]:
        """Every point in one engine process, vLLM imported once."""
        if not plan:
            return {}
        where = next(iter(plan.values()))[1].log.parent
        argvs = {label: inv.argv[len(MODULE) :] for label, (_, inv) in plan.items()}
        limit = max(self.timeout_s(point, job) for point, _ in plan.values())
        return invoke_points(env.python, argvs, env.environ, limit, where)
