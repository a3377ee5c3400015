"""The host-speed witness (kit.probe.hostspeed): the workload's shape (never its timing), its
pinned process, where it runs, and how two readings compare."""

from __future__ import annotations

import os

import pytest

from kit.probe.hostspeed import (
    HostSpeed,
    HostSpeedWitness,
    WitnessPlan,
    binding_cpus,
    change_pct,
    make_kernel,
    median_speed,
    plan,
    python_loop,
    workload,
)

MINE = frozenset(os.sched_getaffinity(0))


def speed(py: float, kernel: float, name: str = "zlib-64k") -> HostSpeed:
    return HostSpeed(python_ops_s=py, kernel_ops_s=kernel, kernel=name, cpus=[0])


def test_the_workload_reads_positive_rates_on_this_threads_cpus() -> None:
    reading = workload(make_kernel("zlib"), reps=2)
    assert reading.kernel == "zlib-64k"
    assert reading.python_ops_s > 0 and reading.kernel_ops_s > 0
    assert set(reading.cpus) == MINE
    assert python_loop(10) == python_loop(10)  # fixed work: the same result every time


def test_auto_takes_numpys_matmul_where_it_imports() -> None:
    pytest.importorskip("numpy")
    name, _, calls = make_kernel()
    assert (name, calls) == ("numpy-matmul-f32-128", 250)


@pytest.mark.parametrize("kernel", ["auto", "zlib"])
def test_the_witness_process_runs_pinned_to_the_cpus_it_is_given(kernel: str) -> None:
    cpu = min(MINE)
    with HostSpeedWitness(frozenset({cpu}), kernel=kernel) as witness:
        readings = [witness(), witness()]
    name = make_kernel(kernel)[0]
    assert all(r is not None and r.cpus == [cpu] and r.kernel == name for r in readings)
    assert all(r is not None and r.python_ops_s > 0 and r.kernel_ops_s > 0 for r in readings)
    assert witness() is None  # closed: no more readings


def test_a_witness_that_cannot_start_reads_nothing() -> None:
    # no such CPU: the process fails to pin itself and ends before it is ready
    with HostSpeedWitness(frozenset({max(MINE) + 4096}), kernel="zlib") as witness:
        assert witness() is None


def test_the_engine_cores_come_from_vllm_cpus_binding() -> None:
    assert binding_cpus("worker 0: cores [0]; reserved [1]") == {0}
    assert binding_cpus("worker 0: cores [0, 1]; worker 1: cores [2, 3]; reserved [4]") == {
        0, 1, 2, 3
    }  # fmt: skip
    assert binding_cpus("reserved [1]") is None
    assert binding_cpus(None) is None


def test_where_it_runs_and_why_not() -> None:
    core = min(MINE)
    assert plan(True, f"worker 0: cores [{core}]; reserved [9]") == WitnessPlan(frozenset({core}))
    assert plan(True, None) == WitnessPlan(MINE)  # no binding: all of ours
    assert plan(False, None) == WitnessPlan(
        None, "host-speed witness not run: the server is not on this host"
    )
    far = max(MINE) + 4096
    assert plan(True, f"worker 0: cores [{far}]").note == (
        f"host-speed witness not run: the engine's cores [{far}] are not this process's to use"
    )


def test_two_readings_compare_by_the_geometric_mean_of_their_parts() -> None:
    a = speed(10e6, 5000.0)
    assert change_pct(a, speed(12e6, 6000.0)) == pytest.approx(20.0)
    assert change_pct(a, speed(10e6 * 0.81, 5000.0)) == pytest.approx(-10.0)
    assert change_pct(a, speed(10e6, 5000.0, "numpy-matmul-f32-128")) is None  # other kernels


def test_the_median_takes_each_part_over_one_kernels_readings() -> None:
    med = median_speed([speed(1.0, 30.0), speed(3.0, 10.0), speed(2.0, 20.0)])
    assert med is not None and (med.python_ops_s, med.kernel_ops_s) == (2.0, 20.0)
    assert median_speed([]) is None
