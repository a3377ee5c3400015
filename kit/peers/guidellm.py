"""guidellm (PyPI ``guidellm``, pinned) beside kit: one ``guidellm run --scenario`` per point
(:func:`scenario`), its ``benchmarks.json`` the one output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from kit import installer
from kit.importers import guidellm as reader
from kit.peers.base import Env, Invocation, Peer, PeerJob, tool_environ, write_jsonl
from kit.peers.install import Host, peer_venv
from kit.peers.traffic import TrafficPoint, extra_body
from kit.recipe import PeerName
from kit.recipe.patterns import Pacing

PACKAGE = "guidellm"
VERSION = "0.8.1"


def profile(pacing: Pacing) -> dict[str, Any]:
    """guidellm's profile for kit's pacing."""
    out: dict[str, Any]
    if pacing.rate is None:
        out = {"kind": "concurrent", "streams": [pacing.concurrency or 1]}
    else:
        out = {"kind": pacing.arrival or "poisson", "rate": [pacing.rate]}
        if pacing.concurrency is not None:
            out["max_concurrency"] = pacing.concurrency
    return out


def scenario(point: TrafficPoint, job: PeerJob, data: Path, result: Path) -> dict[str, Any]:
    """The point as a guidellm scenario file's content (guidellm's own format, its
    ``BenchmarkArgs``): the OpenAI HTTP backend at the server through the chat endpoint, kit's
    requests as a JSON-lines dataset (each row's ``prompt`` and ``output_tokens_count``), the
    recipe's sampling and ``ignore_eos`` as extra body fields (which guidellm merges over its
    own: a row with an output length otherwise sends ``ignore_eos: true``), the point's pacing
    as its profile (``concurrent`` streams, or a ``poisson``/``constant`` rate with its
    ``max_concurrency``), the measured rows once each (``max_requests``), the served tokenizer,
    and its ``benchmarks.json`` as the one output."""
    return {
        "metadata": {"labels": {"kit_point": point.label}},
        "spec": {
            "backend": {
                "kind": "openai_http",
                "target": job.url.rstrip("/"),
                "model": job.model,
                "request_format": "/v1/chat/completions",
                "timeout": job.bench.request_timeout_s,
                "extras": {"body": extra_body(job.bench)},
            },
            "profile": profile(point.pacing),
            "constraints": [{"kind": "max_requests", "count": point.requests}],
            "tokenizer": {"kind": "huggingface_auto", "model": str(job.tokenizer)},
            "data": [{"kind": "json_file", "path": str(data)}],
            "outputs": [{"kind": "json", "path": str(result)}],
        },
    }


def torch_requirement(torch: str | None) -> tuple[list[str], str | None]:
    """guidellm needs torch for its data loader only: the engine's own (``torch``), its wheel
    already in uv's cache, else the CPU wheel; the requirements, and the venv's variant."""
    if torch is None:
        return installer.torch_cpu_index(), None
    index = installer.torch_cpu_index() if "+cpu" in torch else []
    return [f"torch=={torch}", *index], f"torch{torch}"


class GuideLLM(Peer):
    tool: ClassVar[PeerName] = "guidellm"
    name: ClassVar[str] = "guidellm"
    definitions = reader.DEFINITIONS

    def install(self, host: Host) -> Env:
        venv = peer_venv(PACKAGE, VERSION, host, *torch_requirement(host.torch))
        # the tokenizer is a local folder: nothing to ask the hub
        environ = tool_environ({"HF_HUB_OFFLINE": "1"})
        source = venv.source(PACKAGE, VERSION)
        return Env(str(venv.python), VERSION, source, environ, venv.host_packages)

    def notes(self, point: TrafficPoint) -> list[str]:
        out = super().notes(point)
        if point.warmups:
            out.append(
                f"guidellm sent no warm-up (kit sent {point.warmups}): its measured rows only"
            )
        return out

    def prepare(self, point: TrafficPoint, job: PeerJob, where: Path) -> Invocation:
        # No warm-up phase: guidellm 0.8's, by requests, starts measuring at the start of the
        # request that is being updated when the count completes, so which requests it leaves
        # out depends on the order its updates arrive in (at two streams it left out none, or
        # one, of the same rows). The server is warm from kit's bench; guidellm measures every
        # row it sends.
        measured = point.sent(self.tool)[point.warmups :]
        rows = [{"prompt": r.text, "output_tokens_count": r.max_tokens} for r in measured]
        data = write_jsonl(where / f"{point.label}.jsonl", rows)
        result = where / f"{point.label}.json"
        spec = where / f"{point.label}.scenario.json"
        spec.write_text(json.dumps(scenario(point, job, data, result), indent=1))
        argv = ["-m", "guidellm", "run", "--scenario", str(spec), "--disable-console-interactive"]
        return Invocation(argv, result, where / f"{point.label}.log", (data, spec))
