"""One model across hosts, with vLLM's own multi-node launcher (not a launcher of kit's).

A recipe's ``server.nodes`` splits the engine's world (tensor x pipeline parallel) over N
nodes. This module plans the nodes, builds their command lines, tells which addresses are this
host's, and reads from a node's log which transport it used.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kit.probe.redaction import redact_value
from kit.recipe import Nodes

# vLLM's entry point for `vllm serve`: the only one that knows --headless (the OpenAI server
# module ignores it and would start a second engine on a worker node)
CLI_SERVE = ["-m", "vllm.entrypoints.cli.main", "serve"]
# the compose stack's rendezvous port (each container has its own network namespace)
COMPOSE_MASTER_PORT = 29500
# what vLLM logs when a process joins the world (vllm/distributed/parallel_state.py)
JOINED = re.compile(
    r"world_size=(?P<world>\d+) rank=(?P<rank>\d+) local_rank=\d+ "
    r"distributed_init_method=\S+ backend=(?P<backend>\w+)"
)
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class NodePlan:
    """Where each node of a recipe runs, and where they meet."""

    addresses: list[str]
    master_port: int

    @property
    def count(self) -> int:
        return len(self.addresses)

    @property
    def master_addr(self) -> str:
        return self.addresses[0]


def plan(nodes: Nodes, master_port: int) -> NodePlan:
    """The nodes of a native run: the recipe's addresses, else every node on this host."""
    return NodePlan(
        addresses=list(nodes.addresses or [LOOPBACK] * nodes.count),
        master_port=nodes.master_port or master_port,
    )


def node_args(nodes: NodePlan, rank: int) -> list[str]:
    """vLLM's multi-node flags for node ``rank``. Node 0, the head, runs the OpenAI server and
    rank 0 of the world; every other node runs ``vllm serve ... --headless``, which starts only
    its share of the engine processes. All of them get ``--nnodes N --node-rank R --master-addr
    HEAD --master-port P`` and the multiprocessing executor, and meet at the head's rendezvous
    port (torch.distributed over TCP: gloo on CPU, NCCL on GPUs)."""
    args = [
        "--distributed-executor-backend",
        "mp",
        "--nnodes",
        str(nodes.count),
        "--node-rank",
        str(rank),
        "--master-addr",
        nodes.master_addr,
        "--master-port",
        str(nodes.master_port),
    ]
    return [*args, "--headless"] if rank else args


def is_local(address: str) -> bool:
    """Whether ``address`` is this host: a loopback address, this host's name, or an address
    one of its interfaces holds (one it can bind)."""
    if address in {"localhost", socket.gethostname(), socket.getfqdn()}:
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(address))
        except (OSError, ValueError):
            return False
    if ip.is_loopback:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((str(ip), 0))
        except OSError:
            return False
    return True


def shown_address(address: str) -> str:
    """An address as a report names it: an IP address as it is, a host name by its keyed
    stand-in (kit.probe.redaction), as the host probe names hosts."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(address)
        return address
    return "localhost" if address == "localhost" else redact_value(address)


def node_log(log_path: Path, rank: int) -> Path:
    """Node ``rank``'s log beside the head's (server.log -> server.node1.log)."""
    return log_path if rank == 0 else log_path.with_name(f"{log_path.stem}.node{rank}.log")


def read_transport(log_path: Path) -> str | None:
    """The torch.distributed backend the node's processes joined the world with (gloo, nccl),
    from its log; None when the log has no such line or cannot be read."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return None
    backends = {m["backend"] for m in JOINED.finditer(text)}
    return ",".join(sorted(backends)) or None


@dataclass
class NodeProcess:
    """One node of a multi-node server: started here (``process``), or elsewhere (None)."""

    rank: int
    address: str
    argv: list[str]
    log_path: Path | None
    process: subprocess.Popen[bytes] | None = None

    def exit_reason(self) -> str:
        if self.process is None or self.process.poll() is None:
            return ""
        return f"node {self.rank} exited with code {self.process.returncode}"
