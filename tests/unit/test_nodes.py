"""Multi-node serving's pure parts: the recipe's nodes, vLLM's flags per node, which addresses
are this host's, the transport read from a node's log, and what a report says of each node."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.compose.nodes import REPLICA, WORKER_SERVICE, reverse_name
from kit.engine import EngineEnv
from kit.errors import BadInputError, EnvironmentProblem
from kit.nodes import (
    CLI_SERVE,
    is_local,
    node_args,
    node_log,
    plan,
    read_transport,
    shown_address,
)
from kit.recipe import Nodes, load_recipe
from kit.report.assemble import node_info
from kit.serve import MultiNodeRuntime, NativeRuntime, RunningServer

TWO_NODES = ["server.pipeline_parallel_size=2", "server.nodes.count=2"]


def test_two_node_recipe_validates_and_hashes_apart(fixtures_dir: Path) -> None:
    one = load_recipe(fixtures_dir / "recipes/cpu-tiny.yaml").recipe
    two = load_recipe(fixtures_dir / "recipes/cpu-tiny-2nodes.yaml").recipe
    assert two.server.nodes is not None and two.server.nodes.count == 2
    assert two.server.world_size == 2
    # fields added late stay out of a recipe that leaves them at their default
    assert "nodes" not in one.to_json_dict()["server"]
    assert "pipeline_parallel_size" not in one.to_json_dict()["server"]
    assert two.to_json_dict()["server"]["nodes"]["count"] == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["server.nodes.count=2"],
            "server: nodes.count 2 does not divide the world size 1 (tensor_parallel_size 1 x "
            "pipeline_parallel_size 1): vLLM gives every node as many engine processes",
        ),
        (
            [*TWO_NODES, "server.nodes.addresses=[10.0.0.1]"],
            "server.nodes: addresses names 1 node(s), count is 2: give one address per node, "
            "the head first",
        ),
        (
            ["server.nodes.count=1"],
            "server.nodes.count: Input should be greater than or equal to 2",
        ),
    ],
)
def test_bad_nodes_name_the_field(fixtures_dir: Path, overrides: list[str], message: str) -> None:
    with pytest.raises(BadInputError) as err:
        load_recipe(fixtures_dir / "recipes/cpu-tiny.yaml", overrides)
    assert message in str(err.value)


def test_node_args_head_and_headless_worker() -> None:
    nodes = plan(
        Nodes(count=2, addresses=["10.0.0.1", "10.0.0.2"], master_port=29511), master_port=1234
    )
    assert nodes.master_addr == "10.0.0.1" and nodes.master_port == 29511
    flags = [
        "--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank", "0",
        "--master-addr", "10.0.0.1", "--master-port", "29511",
    ]  # fmt: skip
    assert node_args(nodes, 0) == flags
    assert node_args(nodes, 1) == [*flags[:5], "1", *flags[6:], "--headless"]


def test_plan_without_addresses_puts_every_node_here() -> None:
    nodes = plan(Nodes(count=2), master_port=4321)
    assert nodes.addresses == ["127.0.0.1", "127.0.0.1"] and nodes.master_port == 4321


def test_is_local() -> None:
    assert is_local("127.0.0.1") and is_local("localhost") and is_local("::1")
    assert is_local(socket.gethostname())
    assert not is_local("192.0.2.77")  # TEST-NET-1: never an address of this host
    assert not is_local("no-such-host.invalid")


def test_shown_address_keeps_ips_and_redacts_names() -> None:
    assert shown_address("10.1.2.3") == "10.1.2.3"
    assert shown_address("localhost") == "localhost"
    shown = shown_address("rig-7.lab.example")
    assert shown != "rig-7.lab.example" and "rig-7" not in shown


LOG = """\
(Worker_PP1 pid=8435) INFO 12-02 12:17:09 [parallel_state.py:1906] world_size=2 rank=1 \
local_rank=0 distributed_init_method=tcp://127.0.0.1:29533 backend=gloo
(Worker_PP1 pid=8435) INFO 12-02 12:17:54 [default_loader.py:501] Loading weights took 0.07 s
"""


def test_read_transport(tmp_path: Path) -> None:
    log = tmp_path / "server.node1.log"
    log.write_text(LOG)
    assert read_transport(log) == "gloo"
    log.write_text(LOG.replace("backend=gloo", "backend=nccl") + LOG)
    assert read_transport(log) == "gloo,nccl"
    log.write_text("no distributed line\n")
    assert read_transport(log) is None
    assert read_transport(tmp_path / "missing.log") is None


def test_multi_node_runtime_plans_nodes_here_and_elsewhere(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    recipe = load_recipe(
        fixtures_dir / "recipes/cpu-tiny-2nodes.yaml",
        ["server.nodes.addresses=[127.0.0.1, 192.0.2.77]", "server.nodes.master_port=29599"],
    ).recipe
    env = EngineEnv.model_construct(python="/engine/bin/python", pythonpath=None)
    assert NativeRuntime(env).nodes(recipe, tmp_path / "m", None, 8011, tmp_path) == []
    runtime = MultiNodeRuntime(env)  # type: ignore[arg-type]
    log = tmp_path / "server.log"
    head, worker = runtime.nodes(recipe, tmp_path / "m", None, 8011, log)
    assert head.argv[:4] == ["/engine/bin/python", *CLI_SERVE]
    assert head.argv[head.argv.index("--pipeline-parallel-size") + 1] == "2"
    assert "--headless" not in head.argv and worker.argv[-1] == "--headless"
    assert head.log_path == log and worker.log_path is None  # 192.0.2.77 is not this host
    assert node_log(log, 1) == tmp_path / "server.node1.log"
    server = RunningServer(url="u", argv=head.argv, log_path=log, boot_s=1.0, nodes=[head, worker])
    assert server.alive()
    log.write_text(LOG)
    infos = [node_info(n) for n in server.nodes]
    assert [(i.rank, i.role, i.started_by, i.transport) for i in infos] == [
        (0, "head", "kit", "gloo"),
        (1, "worker", "elsewhere", None),
    ]
    assert infos[1].address == "192.0.2.77" and infos[1].log_file is None


def test_run_node_refuses_a_rank_the_recipe_has_not(fixtures_dir: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(
        main, ["serve", str(fixtures_dir / "recipes/cpu-tiny-2nodes.yaml"), "--node-rank", "0"]
    )
    assert res.exit_code == 2
    assert "error: kit serve: --node-rank: 0 is not in the range x>=1" in res.output
    recipe = load_recipe(fixtures_dir / "recipes/cpu-tiny-2nodes.yaml").recipe
    env = EngineEnv.model_construct(python="/engine/bin/python", pythonpath=None)
    runtime = MultiNodeRuntime(env)  # type: ignore[arg-type]
    with pytest.raises(EnvironmentProblem) as err:
        runtime.run_node(recipe, tmp_path, None, 2, tmp_path / "n.log")
    assert str(err.value).startswith("--node-rank 2: cpu-tiny-2nodes has 2 node(s)")
    with pytest.raises(EnvironmentProblem) as err:
        runtime.run_node(recipe, tmp_path, None, 1, tmp_path / "n.log")
    assert "server.nodes needs addresses and master_port" in str(err.value)


# Docker's embedded DNS, as it answered a PTR query for a container of the compose test
# (captured in that container): the question, then one answer whose name points back at it
DOCKER_PTR_REPLY = (
    b"\t\xd7\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00\x012\x010\x0217\x03172\x07in-addr\x04arpa"
    b"\x00\x00\x0c\x00\x01\x012\x010\x0217\x03172\x07in-addr\x04arpa\x00\x00\x0c\x00\x01\x00"
    b'\x00\x02X\x00F"kit-cpu-tiny-2nodes-small-server-1!kit-cpu-tiny-2nodes-small_default\x00'
)


def test_reverse_name_reads_docker_dns_replies() -> None:
    """kit.compose.nodes asks the resolver for its container's PTR name (its replica number);
    here a UDP socket on loopback stands in for Docker's DNS, answering the captured reply."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as dns:
        dns.bind(("127.0.0.1", 0))
        asked: list[bytes] = []

        def answer() -> None:
            query, peer = dns.recvfrom(512)
            asked.append(query)
            dns.sendto(DOCKER_PTR_REPLY, peer)

        t = threading.Thread(target=answer)
        t.start()
        name = reverse_name("172.17.0.2", "127.0.0.1", port=dns.getsockname()[1])
        t.join()
    assert b"\x012\x010\x0217\x03172\x07in-addr\x04arpa\x00\x00\x0c\x00\x01" in asked[0]
    assert name == "kit-cpu-tiny-2nodes-small-server-1.kit-cpu-tiny-2nodes-small_default"
    assert REPLICA.search(name) is None  # the head's container: no worker replica number
    assert REPLICA.search(f"kit-x-{WORKER_SERVICE}-3.kit-x_default")[1] == "3"  # type: ignore[index]
