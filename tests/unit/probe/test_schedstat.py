"""The scheduler's account (kit.probe.schedstat): real child processes spending known CPU time
are counted as the engine's (or the worker's, bound within its cores), the excluded ones not;
the account of two snapshots; the process tree read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.probe.schedstat import EngineClock, account, supported

BUSY_S = 0.3  # CPU seconds each busy child spends when told to
# waits for a line, then spins until it has used BUSY_S of CPU time, then says so
SPIN = (
    "import sys, time\n"
    "sys.stdin.readline()\n"
    "t = time.process_time()\n"
    f"while time.process_time() - t < {BUSY_S}: pass\n"
    "print('done', flush=True)\n"
    "sys.stdin.readline()\n"
)

pytestmark = pytest.mark.skipif(not supported(), reason="no per-thread schedstat here")


def spinner(cpus: set[int] | None = None) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SPIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    if cpus is not None:
        os.sched_setaffinity(proc.pid, cpus)
    return proc


def spin(*procs: subprocess.Popen[str]) -> None:
    """Each child spends BUSY_S of CPU time, one after another."""
    for proc in procs:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_childs_cpu_time_is_the_engines_and_an_excluded_one_is_left_out(
    children: list[subprocess.Popen[str]],
) -> None:
    engine, witness = spinner(), spinner()
    children += [engine, witness]
    clock = EngineClock(exclude=lambda: [witness.pid])
    before = clock.snapshot()
    spin(engine, witness)
    got = account(before, clock.snapshot(), worker_known=False)
    # the engine child's BUSY_S and a little start-up; the witness's BUSY_S would double it
    assert BUSY_S * 1e6 * 0.95 <= got.engine_run_us < BUSY_S * 1e6 * 1.9
    assert got.worker_run_us is None and got.worker_wait_us is None
    assert got.client_run_us >= 0 and got.engine_wait_us >= 0


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_child_bound_within_the_worker_cores_is_the_workers(
    children: list[subprocess.Popen[str]],
) -> None:
    core = min(os.sched_getaffinity(0))
    worker, other = spinner({core}), spinner()
    children += [worker, other]
    clock = EngineClock(worker_cores=frozenset({core}))
    before = clock.snapshot()
    spin(worker, other)
    got = account(before, clock.snapshot(), worker_known=True)
    assert got.worker_run_us is not None and got.worker_run_us >= BUSY_S * 1e6 * 0.95
    assert got.engine_run_us - got.worker_run_us >= BUSY_S * 1e6 * 0.95  # the other child


def test_an_account_counts_each_part_and_a_thread_born_between_in_full() -> None:
    before = {1: ("client", 1_000, 0), 2: ("worker", 5_000, 2_000), 3: ("engine", 0, 0)}
    after = {
        1: ("client", 4_000, 1_000),
        2: ("worker", 9_000, 2_500),
        3: ("engine", 1_000, 0),
        4: ("engine", 3_000, 500),  # born between the two
    }  # thread 5 ended between them: not counted
    got = account(before | {5: ("engine", 7_000, 0)}, after, worker_known=True)
    assert (got.client_run_us, got.client_wait_us) == (3.0, 1.0)
    assert (got.worker_run_us, got.worker_wait_us) == (4.0, 0.5)
    assert (got.engine_run_us, got.engine_wait_us) == (8.0, 1.0)  # worker's and the others'


def test_schedstat_support_is_read_from_proc(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    assert not supported(tmp_path)
    (tmp_path / "self" / "schedstat").write_text("1 2 3\n")
    assert supported(tmp_path)
