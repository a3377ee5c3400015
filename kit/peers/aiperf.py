"""AIPerf (PyPI ``aiperf``, pinned) beside kit: one ``aiperf profile`` per point
(:func:`profile_argv`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from kit.importers import aiperf as reader
from kit.peers.base import Env, Invocation, Peer, PeerJob, tool_environ, write_jsonl
from kit.peers.install import Host, peer_venv
from kit.peers.traffic import TrafficPoint, extra_body
from kit.recipe import PeerName
from kit.recipe.patterns import Pacing

PACKAGE = "aiperf"
VERSION = "0.13.0"
RESULT = "profile_export_aiperf.json"


def pacing_args(pacing: Pacing) -> list[str]:
    """AIPerf's load options for kit's pacing."""
    if pacing.rate is None:
        return ["--concurrency", str(pacing.concurrency or 1)]
    argv = ["--request-rate", f"{pacing.rate:g}", "--arrival-pattern", pacing.arrival or "poisson"]
    if pacing.concurrency is not None:
        argv += ["--concurrency", str(pacing.concurrency)]
    return argv


def profile_argv(point: TrafficPoint, job: PeerJob, data: Path, where: Path) -> list[str]:
    """``aiperf profile``'s arguments for the point, its rows in ``data``, its output in
    ``where``.

    kit's requests as a ``single_turn`` JSON-lines dataset (each row's ``text`` and
    ``output_length``), sent in file order (``--dataset-sampling-strategy sequential``): the
    first ``--warmup-request-count`` rows as AIPerf's warm-up phase, the rest measured
    (``--request-count``), as kit runs a point's warm-up before its measured requests. The chat
    endpoint, streaming; the recipe's sampling and ``ignore_eos`` as ``--extra-inputs``; the
    point's pacing as ``--concurrency``, or ``--request-rate`` with ``--arrival-pattern`` (and
    ``--concurrency`` as the cap); token counts from the server's usage
    (``--use-server-token-count``), as kit's; the served tokenizer; no server-metrics or GPU
    scraping, no dashboard."""
    argv = [
        "profile", "--model", job.model, "--url", job.url.rstrip("/"),
        "--endpoint-type", "chat", "--streaming",
        "--input-file", str(data), "--custom-dataset-type", "single_turn",
        "--dataset-sampling-strategy", "sequential",
        "--request-count", str(point.requests),
        *pacing_args(point.pacing),
        "--extra-inputs", json.dumps(extra_body(job.bench), separators=(",", ":")),
        "--tokenizer", str(job.tokenizer), "--use-server-token-count",
        "--request-timeout-seconds", f"{job.bench.request_timeout_s:g}",
        "--output-artifact-dir", str(where),
        "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry", "--random-seed", "0",
    ]  # fmt: skip
    if point.warmups:
        argv += ["--warmup-request-count", str(point.warmups)]
    return argv


class AIPerf(Peer):
    tool: ClassVar[PeerName] = "aiperf"
    name: ClassVar[str] = "AIPerf"
    definitions = reader.DEFINITIONS

    def install(self, host: Host) -> Env:
        venv = peer_venv(PACKAGE, VERSION, host)
        # not HF_HUB_OFFLINE: AIPerf 0.13 then looks a local tokenizer folder up as a hub id
        source = venv.source(PACKAGE, VERSION)
        return Env(str(venv.python), VERSION, source, tool_environ(), venv.host_packages)

    def prepare(self, point: TrafficPoint, job: PeerJob, where: Path) -> Invocation:
        rows = [{"text": r.text, "output_length": r.max_tokens} for r in point.sent(self.tool)]
        data = write_jsonl(where / f"{point.label}.jsonl", rows)
        out = where / point.label
        argv = ["-m", "aiperf", *profile_argv(point, job, data, out)]
        return Invocation(argv, out / RESULT, where / f"{point.label}.log", (data,))
