"""The native runtime: the engine as child process groups of kit, on this host."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.engine import EngineEnv
from kit.errors import EnvironmentProblem
from kit.nodes import CLI_SERVE, NodePlan, NodeProcess, is_local, node_args, node_log, plan
from kit.recipe import Recipe
from kit.serve.args import server_args
from kit.serve.server import RunningServer, check_port, free_port, terminate, wait_healthy
from kit.serve.slack import for_children

log = logging.getLogger(__name__)


@dataclass
class NativeRuntime:
    """Runs the engine as a child process group of kit, on one host."""

    engine: EngineEnv
    host: str = "127.0.0.1"
    progress: Any = None

    def argv(
        self,
        recipe: Recipe,
        model_dir: Path,
        draft_dir: Path | None,
        port: int,
        node: tuple[NodePlan, int] | None = None,
    ) -> list[str]:
        """The engine's command line; with ``node`` (the plan and a node rank), that node's
        under vLLM's `serve` entry point, which alone knows --headless."""
        args = server_args(recipe, model_dir, draft_dir, self.host, port)
        if node is None:
            return [self.engine.python, "-m", "vllm.entrypoints.openai.api_server", *args]
        return [self.engine.python, *CLI_SERVE, *args, *node_args(*node)]

    def environ(self, recipe: Recipe) -> dict[str, str]:
        env = dict(os.environ)
        env.update(recipe.server.engine_env)
        if self.engine.pythonpath is not None:
            env["PYTHONPATH"] = self.engine.pythonpath
        else:
            env.pop("PYTHONPATH", None)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def spawn(
        self, argv: list[str], env: dict[str, str], log_path: Path, slack_ns: int | None = None
    ) -> subprocess.Popen[bytes]:
        """The engine as a process group of its own, with ``slack_ns`` as its timer slack
        (kit.serve.slack; None: the system's)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("wb") as log_file, for_children(slack_ns):
            return subprocess.Popen(
                argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def nodes(
        self,
        recipe: Recipe,
        model_dir: Path,
        draft_dir: Path | None,
        port: int,
        log_path: Path,
    ) -> list[NodeProcess]:
        """The server's nodes besides one process on this host: none (:class:`MultiNodeRuntime`
        has them)."""
        return []

    @contextlib.contextmanager
    def start(
        self,
        recipe: Recipe,
        model_dir: Path,
        draft_dir: Path | None,
        log_path: Path,
        port: int | None = None,
    ) -> Iterator[RunningServer]:
        if port is None:
            port = free_port(self.host)
        else:
            check_port(self.host, port)
        nodes = self.nodes(recipe, model_dir, draft_dir, port, log_path)
        argv = nodes[0].argv if nodes else self.argv(recipe, model_dir, draft_dir, port)
        env = self.environ(recipe)
        url = f"http://{self.host}:{port}"
        log.info(
            "serve: starting %s %s on %s (log: %s)",
            self.engine.name,
            self.engine.version,
            url,
            log_path,
        )
        workers = nodes[1:]
        slack = recipe.server.timer_slack_ns
        proc: subprocess.Popen[bytes] | None = None
        try:
            for node in workers:
                if node.log_path is None:
                    log.info(
                        "serve: node %d of %d is %s: start it there with `kit serve RECIPE "
                        "--node-rank %d` (the same recipe and --set values)",
                        node.rank,
                        len(nodes),
                        node.address,
                        node.rank,
                    )
                    continue
                log.info(
                    "serve: node %d of %d here (log: %s)", node.rank, len(nodes), node.log_path
                )
                node.process = self.spawn(node.argv, env, node.log_path, slack)
            proc = self.spawn(argv, env, log_path, slack)
            if nodes:
                nodes[0].process = proc
            boot = wait_healthy(
                url, recipe.server.health_timeout_s, proc, log_path, self.progress, workers
            )
            log.info("serve: healthy after %.1f s", boot)
            yield RunningServer(
                url=url,
                argv=argv,
                log_path=log_path,
                boot_s=round(boot, 3),
                process=proc,
                env=recipe.server.engine_env,
                nodes=nodes,
            )
        finally:
            # the head first: its engine leaves the world before the workers' processes go
            for p in [proc, *(n.process for n in workers)]:
                if p is not None:
                    terminate(p)
            log.info("serve: server stopped")


@dataclass
class MultiNodeRuntime(NativeRuntime):
    """A multi-node recipe's server (server.nodes, vLLM's launcher): the head and the nodes on
    this host as one process group each; a node on another host is started there
    (:meth:`run_node`, ``kit serve --node-rank``)."""

    def nodes(
        self,
        recipe: Recipe,
        model_dir: Path,
        draft_dir: Path | None,
        port: int,
        log_path: Path,
    ) -> list[NodeProcess]:
        """The recipe's nodes, the head first, none started yet (empty on one host)."""
        if recipe.server.nodes is None:
            return []
        nodes = plan(recipe.server.nodes, free_port(self.host))
        return [
            NodeProcess(
                rank=rank,
                address=address,
                argv=self.argv(recipe, model_dir, draft_dir, port, (nodes, rank)),
                log_path=node_log(log_path, rank) if rank == 0 or is_local(address) else None,
            )
            for rank, address in enumerate(nodes.addresses)
        ]

    def run_node(
        self,
        recipe: Recipe,
        model_dir: Path,
        draft_dir: Path | None,
        rank: int,
        log_path: Path,
    ) -> int:
        """Run worker node ``rank`` of a multi-node recipe here, headless, until it exits or
        Ctrl-C; returns its exit code. The head (node 0) is ``start``'s."""
        nodes = recipe.server.nodes
        if nodes is None or not 0 < rank < nodes.count:
            count = nodes.count if nodes else 1
            raise EnvironmentProblem(
                f"--node-rank {rank}: {recipe.name} has {count} node(s); a worker's rank is "
                f"1 to {count - 1}",
                hint="node 0, the head, is `kit serve RECIPE` or `kit reproduce RECIPE` itself",
            )
        if nodes.addresses is None or nodes.master_port is None:
            raise EnvironmentProblem(
                f"{recipe.name}: server.nodes needs addresses and master_port for a node "
                "started on its own (the head must be reachable at a known address and port)",
                hint="set server.nodes.addresses (the head first) and server.nodes.master_port",
            )
        node_plan = plan(nodes, nodes.master_port)
        argv = self.argv(recipe, model_dir, draft_dir, 0, (node_plan, rank))
        log.info(
            "serve: node %d of %d, head %s (log: %s)",
            rank,
            nodes.count,
            node_plan.master_addr,
            log_path,
        )
        proc = self.spawn(argv, self.environ(recipe), log_path)
        try:
            return proc.wait()
        finally:
            terminate(proc)
