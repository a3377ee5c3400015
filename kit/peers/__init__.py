"""Other benchmark tools beside kit (``bench.peers``): after kit's bench, each tool, one at a
time, sends the same traffic at each of kit's points to the same server; its own result file is
read back through kit's importer (:mod:`kit.importers`), its figures set beside kit's. One module
per tool (docs/peers.md says how each is driven), each a :class:`~kit.peers.base.Peer`:
:mod:`~kit.peers.vllm_bench`, :mod:`~kit.peers.guidellm`, :mod:`~kit.peers.aiperf`.
"""

from __future__ import annotations

from kit.peers.aiperf import AIPerf
from kit.peers.base import Env, Invocation, Peer, PeerJob
from kit.peers.guidellm import GuideLLM
from kit.peers.install import Host
from kit.peers.run import run_peer, run_peers, summary_notes
from kit.peers.schema import (
    FIGURES,
    KIT_DEFINITIONS,
    RULE,
    FigureSpec,
    KitPoint,
    PeerFigure,
    PeerPoint,
    PeerRun,
    Peers,
)
from kit.peers.traffic import Request, TrafficPoint, traffic
from kit.peers.vllm_bench import VllmBenchPeer
from kit.recipe import PeerName

PEERS: dict[PeerName, Peer] = {
    "vllm_bench": VllmBenchPeer(),
    "guidellm": GuideLLM(),
    "aiperf": AIPerf(),
}

__all__ = [
    "FIGURES",
    "KIT_DEFINITIONS",
    "PEERS",
    "RULE",
    "AIPerf",
    "Env",
    "FigureSpec",
    "GuideLLM",
    "Host",
    "Invocation",
    "KitPoint",
    "Peer",
    "PeerFigure",
    "PeerJob",
    "PeerPoint",
    "PeerRun",
    "Peers",
    "Request",
    "TrafficPoint",
    "VllmBenchPeer",
    "run_peer",
    "run_peers",
    "summary_notes",
    "traffic",
]
