"""The host-load sampler on this machine's real /proc, with real child processes.

A busy child (a bounded Python loop that renames itself ``kitbusy<pid>``) runs inside a measured
window; whether it counts as *other* or *ours* depends only on ``own_pids``. The findings'
thresholds are checked on constructed HostLoad values.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kit.errors import BadInputError
from kit.probe import (
    HostLoad,
    HostLoadSampler,
    ProcessCpu,
    host_load_findings,
    process_group,
    process_tree,
)
from kit.probe.findings import OTHER_CPU_PCT_MAX, STEAL_PCT_MAX
from kit.probe.procfs import list_pids, read_cpu_times, read_process

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux /proc")

# one name per test process: another test run on the machine (a CI beside a developer's) has
# its own busy child, which this run rightly counts as another process's
BUSY = f"kitbusy{os.getpid() % 100_000:05d}"  # a comm name holds 15 characters
# Renames itself, spins for at most 1.5 s, says so, then waits for its stdin to close.
BUSY_CODE = f"""
import sys, time
with open("/proc/self/comm", "w") as comm:
    comm.write("{BUSY}")
end = time.monotonic() + 1.5
while time.monotonic() < end:
    pass
print("done", flush=True)
sys.stdin.read()
"""
# Starts a sleeping grandchild, prints its pid, waits for its stdin to close, then ends it.
PARENT_CODE = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
sys.stdin.read()
child.kill()
child.wait()
"""


def _spawn(code: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _finish(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=60)
    assert child.stdout is not None
    child.stdout.close()


@contextmanager
def busy_child(on_spawn: Callable[[int], None]) -> Iterator[subprocess.Popen[str]]:
    """A child that has spun (it stays alive, idle, until the block ends)."""
    child = _spawn(BUSY_CODE)
    on_spawn(child.pid)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "done"
        yield child
    finally:
        _finish(child)


def measure_busy_child(own_pids: Callable[[set[int]], set[int]] | None) -> HostLoad:
    """One measured window around a busy child; ``own_pids`` gets the child's pid."""
    child_pids: set[int] = set()
    own = None if own_pids is None else (lambda: own_pids(child_pids))
    with HostLoadSampler(own_pids=own, interval_s=0.1) as sampler:
        sampler.mark("idle")
        sampler.mark("measure_start")
        with busy_child(child_pids.add):
            sampler.mark("measure_end")  # while the child lives: its time is all read
        sampler.mark("post")
    return sampler.host_load


def names(load: HostLoad) -> dict[str, float]:
    return {p.comm: p.cpu_s for p in load.top_other}


# ---------------------------------------------------------------------------------------------
# the sampler on real processes


def test_a_busy_process_not_ours_is_other() -> None:
    load = measure_busy_child(lambda _child: {os.getpid()})
    assert load.error is None
    assert (load.windows, load.cores) == (1, read_cpu_times().cores)  # type: ignore[union-attr]
    assert load.samples >= 2 and load.window_s > 0
    assert load.other_cpu_pct is not None and load.other_cpu_pct > 0
    assert BUSY in names(load) and names(load)[BUSY] > 0
    assert load.busy_pct is not None and load.busy_pct > 0
    assert load.steal_pct is not None and load.steal_pct >= 0
    assert load.loadavg_start is not None and load.loadavg_end is not None
    assert len(load.top_other) <= 5
    assert [p.cpu_s for p in load.top_other] == sorted(
        (p.cpu_s for p in load.top_other), reverse=True
    )


def test_a_busy_process_in_own_pids_is_ours() -> None:
    load = measure_busy_child(lambda child: {os.getpid(), *child})
    assert load.error is None
    assert BUSY not in names(load)
    assert load.own_cpu_pct is not None and load.own_cpu_pct > 0


def test_by_default_this_process_and_its_children_are_ours() -> None:
    load = measure_busy_child(None)
    assert load.error is None
    assert BUSY not in names(load)
    assert load.own_cpu_pct is not None and load.own_cpu_pct > 0


def test_windows_are_summed_and_other_marks_ignored() -> None:
    with HostLoadSampler(own_pids=lambda: {os.getpid()}, interval_s=0.05) as sampler:
        sampler.mark("idle")
        for _ in range(2):
            sampler.mark("measure_start")
            sampler.mark("measure_start")  # a second start inside a window is ignored
            sum(range(200_000))
            sampler.mark("measure_end")
        sampler.mark("measure_end")  # an end outside a window is ignored
        sampler.mark("post")
        sampler.mark("something else")
    load = sampler.host_load
    assert load.error is None
    assert load.windows == 2 and load.samples >= 4 and load.window_s > 0
    assert load.own_cpu_pct is not None and load.other_cpu_pct is not None


def test_a_window_left_open_is_closed_at_exit() -> None:
    with HostLoadSampler(interval_s=0.05) as sampler:
        sampler.mark("measure_start")
        end = time.monotonic() + 0.2  # 20 ticks of the /proc/stat clock: a window to measure
        while time.monotonic() < end:
            sum(range(10_000))
    load = sampler.host_load
    assert load.error is None and load.windows == 1 and load.busy_pct is not None


def test_without_a_window_nothing_is_measured() -> None:
    with HostLoadSampler(interval_s=0.05) as sampler:
        sampler.mark("idle")
    load = sampler.host_load
    assert load.windows == 0 and load.samples == 0
    assert (load.busy_pct, load.other_cpu_pct, load.own_cpu_pct) == (None, None, None)
    assert load.error == "no measured window: mark('measure_start') was never called"
    assert load.foreign_gpu_processes is None and load.foreign_gpu_unavailable is not None
    assert host_load_findings(load) == []


def test_processes_that_come_and_go_inside_a_window_are_survived() -> None:
    gone: set[int] = set()
    with HostLoadSampler(own_pids=lambda: {os.getpid(), *gone}, interval_s=0.01) as sampler:
        sampler.mark("measure_start")
        for _ in range(5):
            child = subprocess.Popen([sys.executable, "-c", "pass"])
            child.wait(timeout=60)
            gone.add(child.pid)  # own_pids now names pids that no longer exist
        sampler.mark("measure_end")
    load = sampler.host_load
    assert load.error is None
    assert load.windows == 1 and load.samples >= 2


def test_own_pids_that_raises_becomes_the_error() -> None:
    def broken() -> set[int]:
        raise ValueError("no server pid yet")

    with HostLoadSampler(own_pids=broken, interval_s=0.05) as sampler:
        sampler.mark("measure_start")
        sampler.mark("measure_end")
    load = sampler.host_load
    assert load.error == "own_pids() failed: ValueError: no server pid yet"
    assert load.windows == 1 and load.other_cpu_pct is not None


def test_foreign_gpu_processes_say_why_without_nvml() -> None:
    with HostLoadSampler(interval_s=0.05) as sampler:
        sampler.mark("measure_start")
        sampler.mark("measure_end")
    load = sampler.host_load
    if load.foreign_gpu_unavailable is None:  # a machine with a working NVIDIA driver
        assert isinstance(load.foreign_gpu_processes, int)
    else:
        assert load.foreign_gpu_processes is None
        assert load.foreign_gpu_unavailable.startswith("NVML")


def test_misuse_is_refused() -> None:
    with pytest.raises(BadInputError, match="sampling interval must be positive, not 0"):
        HostLoadSampler(interval_s=0)
    sampler = HostLoadSampler()
    with pytest.raises(RuntimeError, match="outside its 'with' block"):
        sampler.mark("measure_start")
    with pytest.raises(RuntimeError, match="only after the 'with' block"):
        _ = sampler.host_load


# ---------------------------------------------------------------------------------------------
# /proc helpers


def test_process_tree_and_group_of_a_real_child() -> None:
    parent = _spawn(PARENT_CODE, start_new_session=True)
    try:
        assert parent.stdout is not None
        grandchild = int(parent.stdout.readline())
        mine = process_tree({os.getpid()})
        assert {os.getpid(), parent.pid, grandchild} <= mine
        assert process_tree({parent.pid}) == {parent.pid, grandchild}
        assert process_tree({grandchild}) == {grandchild}
        # its own session: the parent leads a group that the grandchild inherits
        assert process_group(parent.pid) == {parent.pid, grandchild}
        stat = read_process(grandchild)
        assert stat is not None and stat.ppid == parent.pid and stat.pgrp == parent.pid
    finally:
        _finish(parent)


def test_a_vanished_pid_reads_as_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    assert child.pid not in list_pids()
    assert read_process(child.pid) is None
    assert process_tree({child.pid}) == set()
    assert process_group(child.pid) == set()


def test_this_process_reads_with_its_name() -> None:
    stat = read_process(os.getpid())
    assert stat is not None and stat.pid == os.getpid() and stat.ppid == os.getppid()
    assert stat.comm == Path("/proc/self/comm").read_text().strip()
    assert stat.cpu_ticks >= 0 and stat.start_ticks > 0


def test_a_name_with_spaces_and_parentheses_parses(tmp_path: Path) -> None:
    """comm is free text: the stat line is split at its last ')'."""
    (tmp_path / "4242").mkdir()
    rest = " ".join(["S", "1", "4242", *["0"] * 8, "250", "50", *["0"] * 6, "9000", "0"])
    (tmp_path / "4242" / "stat").write_text(f"4242 (a (b) c) {rest}\n")
    stat = read_process(4242, proc=tmp_path)
    assert stat is not None
    assert (stat.comm, stat.ppid, stat.pgrp, stat.cpu_ticks, stat.start_ticks) == (
        "a (b) c",
        1,
        4242,
        300,
        9000,
    )
    (tmp_path / "4242" / "stat").write_text("4242 (cut")
    assert read_process(4242, proc=tmp_path) is None


# ---------------------------------------------------------------------------------------------
# findings


def load_of(**values: object) -> HostLoad:
    base: dict[str, object] = {
        "window_s": 12.0,
        "windows": 3,
        "samples": 30,
        "cores": 2,
        "busy_pct": 60.0,
        "steal_pct": 0.5,
        "own_cpu_pct": 50.0,
        "other_cpu_pct": 2.0,
        "loadavg_start": 1.0,
        "loadavg_end": 1.2,
        "top_other": [],
        "foreign_gpu_processes": 0,
        "foreign_gpu_unavailable": None,
        "error": None,
    }
    return HostLoad.model_validate({**base, **values})


def codes(load: HostLoad) -> list[str]:
    return [f.code for f in host_load_findings(load)]


def test_a_quiet_host_has_no_findings() -> None:
    assert host_load_findings(load_of()) == []
    unmeasured = load_of(other_cpu_pct=None, steal_pct=None, foreign_gpu_processes=None, error="x")
    assert host_load_findings(unmeasured) == []


def test_other_cpu_above_the_threshold_is_not_quiet() -> None:
    assert codes(load_of(other_cpu_pct=OTHER_CPU_PCT_MAX)) == []
    top = [ProcessCpu(comm="pytest", cpu_s=12.1), ProcessCpu(comm="cc1", cpu_s=3.04)]
    top += [ProcessCpu(comm="kworker/0:1", cpu_s=0.01)]
    [finding] = host_load_findings(load_of(other_cpu_pct=35.2, top_other=top))
    assert (finding.code, finding.severity) == ("host-not-quiet", "warning")
    assert finding.message == (
        "host not quiet: other processes used 35 % of the CPU "
        "(2 cores, 12.0 s measured; top: pytest 12.1 s, cc1 3.0 s)"
    )
    [bare] = host_load_findings(load_of(other_cpu_pct=10.5))
    assert bare.message.endswith("(2 cores, 12.0 s measured)")


def test_steal_above_the_threshold() -> None:
    assert codes(load_of(steal_pct=STEAL_PCT_MAX)) == []
    [finding] = host_load_findings(load_of(steal_pct=7.6))
    assert finding.code == "cpu-steal"
    assert "8 %" in finding.message


def test_foreign_gpu_processes() -> None:
    [one] = host_load_findings(load_of(foreign_gpu_processes=1))
    assert one.message == "1 compute process not ours ran on the GPUs while measuring"
    [two] = host_load_findings(load_of(foreign_gpu_processes=2))
    assert two.code == "foreign-gpu-processes" and two.message.startswith("2 compute processes")


def test_all_three_by_code() -> None:
    load = load_of(other_cpu_pct=40.0, steal_pct=9.0, foreign_gpu_processes=3)
    assert codes(load) == ["cpu-steal", "foreign-gpu-processes", "host-not-quiet"]
