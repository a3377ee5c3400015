"""A multi-node recipe in the compose stack: the ``server`` container is node 0 (the head) and
each replica of ``server-worker`` one headless node, all on the project's network. Each node
writes its facts into the kit-home volume, under the run's id, where the bench sidecar reads
them.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path
from types import FrameType

from kit.errors import EnvironmentProblem
from kit.nodes import COMPOSE_MASTER_PORT, JOINED, NodePlan
from kit.paths import kit_home
from kit.probe import HostProbe
from kit.recipe import Recipe
from kit.report.schema import NodeInfo

HEAD_SERVICE = "server"
WORKER_SERVICE = "server-worker"
REPLICA = re.compile(rf"-{WORKER_SERVICE}-(\d+)(?:\.|$)")


def compose_plan(recipe: Recipe) -> NodePlan | None:
    """The nodes of the stack: every node reaches the head by its service name."""
    nodes = recipe.server.nodes
    if nodes is None:
        return None
    return NodePlan(
        addresses=[HEAD_SERVICE, *(f"{WORKER_SERVICE}-{r}" for r in range(1, nodes.count))],
        master_port=nodes.master_port or COMPOSE_MASTER_PORT,
    )


def _dns_name(labels: bytes, at: int) -> tuple[str, int]:
    """The name at offset ``at`` of a DNS message (RFC 1035 4.1.4: labels, maybe ending in a
    pointer) and the offset after it."""
    parts: list[str] = []
    end = None
    for _ in range(128):  # no loop of pointers
        size = labels[at]
        if size >= 0xC0:  # a pointer to an earlier name
            end = at + 2 if end is None else end
            at = ((size & 0x3F) << 8) | labels[at + 1]
            continue
        if size == 0:
            return ".".join(parts), at + 1 if end is None else end
        parts.append(labels[at + 1 : at + 1 + size].decode("ascii", "replace"))
        at += 1 + size
    raise ValueError("a DNS name that does not end")


def reverse_name(ip: str, resolver: str, port: int = 53, timeout_s: float = 3.0) -> str:
    """The PTR name a DNS resolver gives ``ip``. Asked of Docker's embedded DNS directly: the
    resolver library reads /etc/hosts first, where a container's address has its id."""
    qname = b"".join(
        bytes([len(p)]) + p.encode() for p in [*reversed(ip.split(".")), "in-addr", "arpa"]
    )
    query = struct.pack(">HHHHHH", 0x6B74, 0x0100, 1, 0, 0, 0) + qname + b"\0\0\x0c\0\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout_s)
        sock.sendto(query, (resolver, port))
        reply = sock.recv(4096)
    if len(reply) < 12 or struct.unpack(">H", reply[6:8])[0] == 0:
        raise OSError(f"no PTR record for {ip} from {resolver}")
    _, at = _dns_name(reply, 12)  # the question
    _, at = _dns_name(reply, at + 4)  # the answer's owner, after qtype and qclass
    return _dns_name(reply, at + 10)[0]  # type, class, ttl, rdlength, then the name


def _resolver() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/etc/resolv.conf").read_text().splitlines():
            if line.startswith("nameserver"):
                return line.split()[1]
    return "127.0.0.11"  # Docker's embedded DNS on user-defined networks


def worker_rank(count: int) -> int:
    """This worker container's node rank: ``KIT_NODE_RANK``, else its replica number, read from
    the name Docker's DNS gives its address (``<project>-server-worker-<n>``), so one service
    scales to any count."""
    if value := os.environ.get("KIT_NODE_RANK"):
        rank = int(value)
    else:
        try:
            ip = socket.gethostbyname(socket.gethostname())
            name = reverse_name(ip, _resolver())
        except (OSError, ValueError, IndexError) as exc:
            raise EnvironmentProblem(
                f"{WORKER_SERVICE}: cannot read this container's name from DNS ({exc})",
                hint="set KIT_NODE_RANK for the worker",
            ) from None
        match = REPLICA.search(name)
        if match is None:
            raise EnvironmentProblem(
                f"{WORKER_SERVICE}: this container's name {name!r} carries no replica number",
                hint="set KIT_NODE_RANK for the worker",
            )
        rank = int(match[1])
    if not 0 < rank < count:
        raise EnvironmentProblem(
            f"{WORKER_SERVICE}: node rank {rank} outside 1..{count - 1}",
            hint=f"run {count - 1} replica(s) of {WORKER_SERVICE} (docker compose up --scale)",
        )
    return rank


def facts_dir() -> Path:
    """Where this run's nodes write their facts (the run id; ``adhoc`` under make up)."""
    return kit_home() / "nodes" / (os.environ.get("KIT_RUN_ID") or "adhoc")


def write_facts(info: NodeInfo) -> None:
    """This node's facts, what the report says of it (rank, address, its own host probe, and the
    transport its engine joined the world with, read from the engine's output as it passes),
    into :func:`facts_dir`."""
    path = facts_dir() / f"node-{info.rank}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(info.model_dump_json())
    tmp.replace(path)


def read_facts(count: int) -> list[NodeInfo] | None:
    """Every node's facts as its container wrote them, the head first; None when a node's are
    missing (a stack not started by kit's roles)."""
    out = []
    for rank in range(count):
        path = facts_dir() / f"node-{rank}.json"
        if not path.is_file():
            return None
        out.append(NodeInfo.model_validate_json(path.read_text()))
    return out


def run_node(argv: list[str], environ: dict[str, str], info: NodeInfo) -> int:
    """Run this node's engine, its output passed through to the container's log; the node's
    facts are written first and again once the engine says which transport it joined with.
    SIGTERM and SIGINT are passed on; returns the engine's exit code."""
    write_facts(info)
    proc = subprocess.Popen(
        argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0
    )

    def forward(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    assert proc.stdout is not None
    out = sys.stdout.buffer
    for raw in proc.stdout:
        out.write(raw)
        out.flush()
        if info.transport is None and (m := JOINED.search(raw.decode(errors="replace"))):
            info = info.model_copy(update={"transport": m["backend"]})
            write_facts(info)
    return proc.wait()


def node_info(rank: int, plan: NodePlan, host: HostProbe) -> NodeInfo:
    return NodeInfo(
        rank=rank,
        role="worker" if rank else "head",
        address=plan.addresses[rank],
        started_by="compose",
        log_file=f"{WORKER_SERVICE}.log" if rank else "server.log",
        host=host,
    )
