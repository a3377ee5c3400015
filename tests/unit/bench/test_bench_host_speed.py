"""The bench reads the host-speed witness it is given before each measured request, and only
then; a bench without one writes its records and summaries as before; a run plans where the
witness runs from its server. The same for the scheduler's account (kit.probe.schedstat), taken
around each measured request when the bench has a clock."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from pacedserver import Paced

from kit.bench import Bencher, Watch
from kit.cli import main
from kit.enginelog import EngineChoices
from kit.measure import engine_clock, witness_plan
from kit.probe.hostspeed import HostSpeed, WitnessPlan
from kit.probe.schedstat import EngineClock, supported
from kit.recipe import Bench, Prompt, load_recipe
from kit.report import ServerInfo
from kit.report.files import read_report
from kit.report.verify import verify_report

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

BENCH = Bench(
    warmups=1,
    runs=3,
    stall_timeout_s=1.0,
    prompts=[Prompt(name="a", text="x", max_tokens=8), Prompt(name="b", text="y", max_tokens=8)],
)


@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_each_measured_request_carries_the_reading_taken_before_it(server: str) -> None:
    calls: list[int] = []

    def witness() -> HostSpeed:
        calls.append(len(calls))
        # each reading a little faster than the last, so each record's own is told apart
        return HostSpeed(
            python_ops_s=1e6 * (1 + len(calls)), kernel_ops_s=100.0, kernel="fake", cpus=[0]
        )

    result = Bencher(server, BENCH, "m", watch=Watch(host_speed=witness)).run()
    measured = [r for r in result.records if r.phase == "measured"]
    assert len(calls) == len(measured) == 6  # never before a warm-up
    assert [r.host_speed.python_ops_s if r.host_speed else None for r in measured] == [
        1e6 * k for k in range(2, 8)
    ]
    assert all(r.host_speed is None for r in result.records if r.phase == "warmup")
    a = next(p for p in result.prompts if p.prompt == "a")
    assert a.host_speed is not None and a.host_speed.python_ops_s == 3e6  # the median of 2, 3, 4


@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_a_failed_reading_leaves_its_record_without_one(server: str) -> None:
    result = Bencher(server, BENCH, "m", watch=Watch(host_speed=lambda: None)).run()
    assert result.complete
    assert all(r.host_speed is None for r in result.records)
    assert all(p.host_speed is None for p in result.prompts)


@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_without_a_witness_nothing_new_is_written(server: str) -> None:
    result = Bencher(server, BENCH, "m").run()
    written = json.loads(result.model_dump_json())
    assert all("host_speed" not in r for r in written["records"])
    assert all("host_speed" not in p for p in written["prompts"])


def test_kit_bench_of_a_loopback_server_records_the_witness(
    paced_server: Callable[[Paced], str], tmp_path: Path
) -> None:
    # the real witness process, pinned to all of kit's CPUs (no engine binding to read)
    args = ["bench", "--target", paced_server(Paced()), str(FIXTURES / "recipes" / "cpu-tiny.yaml")]
    for setting in ("bench.warmups=1", "bench.runs=3", "bench.prefill=null"):
        args += ["--set", setting]
    prompt = "bench.prompts=[{name: narrative, text: hello, max_tokens: 20}]"
    result = CliRunner().invoke(main, [*args, "--set", prompt, "--no-sign", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    [path] = tmp_path.glob("*/report.json")
    report, _ = read_report(path, allow_unsigned=True)
    assert report.bench is not None
    measured = [r for r in report.bench.records if r.phase == "measured"]
    mine = sorted(os.sched_getaffinity(0))
    assert all(r.host_speed is not None and r.host_speed.cpus == mine for r in measured)
    [narrative] = report.bench.prompts
    assert narrative.host_speed is not None and narrative.host_speed.python_ops_s > 0
    assert not [n for n in report.notes if "host-speed" in n]
    checked = verify_report(path, allow_unsigned=True)
    assert checked.ok, checked.failed


def test_the_run_plans_the_witness_by_its_server() -> None:
    loaded = load_recipe(FIXTURES / "recipes" / "cpu-tiny.yaml")
    native = ServerInfo(runtime="native", argv=[], env={}, boot_s=None)
    assert witness_plan("http://127.0.0.1:1", loaded, native).cpus == frozenset(
        os.sched_getaffinity(0)
    )
    external = ServerInfo(runtime="external", argv=[], env={}, boot_s=None)
    assert witness_plan("http://192.0.2.1:8000", loaded, external).note == (
        "host-speed witness not run: the server is not on this host"
    )
    under_load = load_recipe(
        FIXTURES / "recipes" / "cpu-tiny.yaml",
        ["bench.load={pattern: concurrency, levels: [1], requests: 2}"],
    )
    assert witness_plan("http://127.0.0.1:1", under_load, native) == WitnessPlan(None)


# ---------------------------------------------------------------------------------------------
# the scheduler's account


@pytest.mark.skipif(not supported(), reason="no per-thread schedstat here")
@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_each_measured_request_carries_its_account(server: str) -> None:
    result = Bencher(server, BENCH, "m", watch=Watch(cpu_clock=EngineClock())).run()
    measured = [r for r in result.records if r.phase == "measured"]
    assert len(measured) == 6
    for r in measured:
        assert r.cpu is not None
        assert r.cpu.client_run_us > 0  # kit's client read the stream
        assert r.cpu.worker_run_us is None  # no worker cores given
    assert all(r.cpu is None for r in result.records if r.phase == "warmup")


@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_without_a_clock_no_account_is_written(server: str) -> None:
    result = Bencher(server, BENCH, "m").run()
    written = json.loads(result.model_dump_json())
    assert all("cpu" not in r for r in written["records"])


def test_the_run_plans_the_clock_by_its_server() -> None:
    loaded = load_recipe(FIXTURES / "recipes" / "cpu-tiny.yaml")
    bound = EngineChoices(
        linear_kernels=[], quant_method=None, w4a16_path=None, w4a16_fallback_reason=None,
        cpu_kernel_build=None, attention_backend=None, source="server.log",
        cpu_binding="worker 0: cores [0]; reserved [1]",
    )  # fmt: skip
    native = ServerInfo(runtime="native", argv=[], env={}, boot_s=None, engine_choices=bound)
    clock = engine_clock(loaded, native)
    if supported():
        assert clock is not None and clock.worker_cores == frozenset({0})
        unbound = native.model_copy(update={"engine_choices": None})
        assert engine_clock(loaded, unbound) == EngineClock()
    else:
        assert clock is None
    compose = native.model_copy(update={"runtime": "compose"})
    assert engine_clock(loaded, compose) is None  # the server is not kit's child
    assert engine_clock(loaded, None) is None
    under_load = load_recipe(
        FIXTURES / "recipes" / "cpu-tiny.yaml",
        ["bench.load={pattern: concurrency, levels: [1], requests: 2}"],
    )
    assert engine_clock(under_load, native) is None
