"""The scheduler's account in the verdict: where a slow (or fast) decode run's time went.

:func:`within_run` serves rules 3's ``decode-cv-high``, :func:`between_runs` the reproduction
verdict (docs/noise.md, "The scheduler's account").
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kit.bench.plausible import plausible
from kit.report.speed import EXPLAINS, SpeedLines
from kit.report.verdict import num

if TYPE_CHECKING:
    from kit.bench import RequestRecord
    from kit.report.schema import Report
    from kit.report.verdict import FigureCheck


@dataclass(frozen=True)
class PerToken:
    """One run, in microseconds per generated token: the request's wall time, and the time on a
    CPU and waiting for one of the engine's worker (where the account tells its threads apart:
    they run the model, while the others also poll as they wait, so their time grows with any
    slower run) or else of all the engine's threads."""

    wall: float
    run: float
    wait: float
    worker: bool


def per_token(
    records: list[RequestRecord], prompt: str, phase: str = "measured"
) -> dict[int, PerToken]:
    """The runs of ``prompt`` in ``phase`` that carry an account, by index; per generated token
    for decode runs, per request for prefill runs (their figure is the prompt's, not the
    tokens'). Records that are not plausible measurements are left out (kit.bench.plausible)."""
    out: dict[int, PerToken] = {}
    for r in records:
        if r.prompt != prompt or r.phase != phase or r.cpu is None or not plausible(r):
            continue
        if not r.completion_tokens or not r.wall_s:
            continue
        n, cpu = (r.completion_tokens if phase == "measured" else 1), r.cpu
        if cpu.worker_run_us is not None and cpu.worker_wait_us is not None:
            run, wait, worker = cpu.worker_run_us, cpu.worker_wait_us, True
        else:
            run, wait, worker = cpu.engine_run_us, cpu.engine_wait_us, False
        out[r.index] = PerToken(r.wall_s * 1e6 / n, run / n, wait / n, worker)
    return out


def _pct(a: float, b: float) -> float:
    return (a / b - 1) * 100 if b else 0.0


def within_run(
    prompt: str, runs: list[int], values: list[float], records: list[RequestRecord], off_pct: float
) -> tuple[str | None, str | None]:
    """For a noisy prompt: (a cause, where the account followed its runs off the median by more
    than ``off_pct``; else what it checked). (None, None) without the account.

    For rules 3's ``decode-cv-high``: each run off the median is put beside the scheduler's
    account of it (kit.probe.schedstat), per generated token, against the median of the
    prompt's runs:

    - the time on a CPU per token of the engine's worker (its threads run the model; where the
      account does not tell them apart, all the engine's threads) moved with the run's time per
      token by at least ``EXPLAINS`` of it: the same work took longer on the CPU, or there was
      more of it;
    - its time runnable but waiting for a CPU grew by at least ``EXPLAINS`` of the run's extra
      time per token: the machine's CPUs were busy with something else;
    - neither: what it checked, which says that the threads were idle longer between steps.
    """
    acc = per_token(records, prompt)
    have = [i for i in runs if i in acc]
    if len(have) < 2:
        return None, None
    med = statistics.median(values)
    if not med:  # no run is off a median of 0 by a percentage
        return None, None
    off = [i for i, v in zip(runs, values, strict=True) if abs(v / med - 1) * 100 > off_pct]
    off = [i for i in off if i in acc]
    wall = statistics.median(acc[i].wall for i in have)
    run = statistics.median(acc[i].run for i in have)
    wait = statistics.median(acc[i].wait for i in have)
    worked, waited, neither = [], [], []
    for i in off:
        a = acc[i]
        extra, cpu_extra, wait_extra = a.wall - wall, a.run - run, a.wait - wait
        if extra * cpu_extra > 0 and abs(cpu_extra) >= EXPLAINS * abs(extra):
            worked.append(
                f"#{i} {_pct(a.run, run):+.1f} % CPU time per token vs "
                f"{_pct(a.wall, wall):+.1f} % time per token"
            )
        elif extra > 0 and wait_extra >= EXPLAINS * extra:
            waited.append(f"#{i} +{wait_extra:,.0f} of +{extra:,.0f} us per token")
        else:
            neither.append(f"#{i}")
    whose = "engine worker's" if all(acc[i].worker for i in have) else "engine's"
    causes = []
    if worked:
        causes.append(
            f"scheduler: the {whose} CPU time per token moved with the runs off the median "
            f"({', '.join(worked)}): the same work took longer on the CPU, or there was more "
            "of it"
        )
    if waited:
        causes.append(
            f"scheduler: the {whose} threads waited for a CPU in the runs off the median "
            f"({', '.join(waited)}): the CPUs were busy with other work"
        )
    if causes:
        rest = f"; not with {', '.join(neither)}" if neither else ""
        return "; ".join(causes) + rest, None
    spread = max(abs(_pct(acc[i].run, run)) for i in have)
    checked = (
        f"scheduler: the {whose} CPU time per token within ±{spread:.1f} % of its median and "
        f"its wait for a CPU {wait:,.0f} us per token of {wall:,.0f}"
    )
    if off:
        checked += (
            f"; neither followed the runs off the median ({', '.join(neither)}): its threads "
            "were idle longer between steps"
        )
    return None, checked


def _medians(report: Report, prompt: str, phase: str) -> PerToken | None:
    """A prompt's (or prefill depth's) medians over its runs with an account (the worker's
    where every run tells it apart); None without any."""
    if report.bench is None:
        return None
    acc = list(per_token(report.bench.records, prompt, phase).values())
    if not acc:
        return None
    return PerToken(
        wall=statistics.median(a.wall for a in acc),
        run=statistics.median(a.run for a in acc),
        wait=statistics.median(a.wait for a in acc),
        worker=all(a.worker for a in acc),
    )


def _between(check: FigureCheck, a: PerToken, b: PerToken, unit: str, out: SpeedLines) -> None:
    figure = f"{check.metric} {num(check.delta_pct or 0.0, '+.1f')} %"
    whose = "engine worker's" if a.worker and b.worker else "engine's"
    extra, cpu_extra, wait_extra = b.wall - a.wall, b.run - a.run, b.wait - a.wait
    seen = (
        f"{whose} CPU time per {unit} {_pct(b.run, a.run):+.1f} % ({a.run:,.0f} -> "
        f"{b.run:,.0f} us) against time per {unit} {_pct(b.wall, a.wall):+.1f} %"
    )
    if extra * cpu_extra > 0 and abs(cpu_extra) >= EXPLAINS * abs(extra):
        work = "less" if cpu_extra < 0 else "more"
        out.causes.append(
            f"scheduler: {figure}: the re-run's {whose} threads needed {work} CPU time for the "
            f"same {unit}s ({seen}): the same work ran {'faster' if work == 'less' else 'slower'} "
            "on the CPU, or there was less or more of it"
        )
        out.summary = out.summary or f"; scheduler: the re-run's engine needed {work} CPU time"
    elif extra > 0 and wait_extra >= EXPLAINS * extra:
        out.causes.append(
            f"scheduler: {figure}: the re-run's {whose} threads waited for a CPU "
            f"(+{wait_extra:,.0f} of +{extra:,.0f} us per {unit}): the CPUs were busy with other "
            "work"
        )
        out.summary = out.summary or "; scheduler: the re-run's engine waited for a CPU"
    else:
        out.checked.append(f"scheduler: {seen}: not the cause of {figure}")


def _runs_of(report: Report, metric: str) -> tuple[str, str, str] | None:
    """The records behind a figure: (prompt, phase, the unit its account is divided by)."""
    b = report.bench
    if b is None:
        return None
    for p in b.prompts:
        if metric == f"{p.prompt} decode TPS":
            return p.prompt, "measured", "token"
    for pf in b.prefill:
        if metric == f"prefill {pf.depth}":  # as kit.report.figures names it
            return f"prefill-{pf.depth}", "prefill", "request"
    return None


def between_runs(a: Report, b: Report, outside: list[FigureCheck]) -> SpeedLines:
    """For each decode or prefill figure outside its band: whether the two runs' accounts say
    where the change went (a cause), or not (checked).

    For the reproduction verdict: the two reports' medians per token (per request for prefill)
    are judged the way :func:`within_run` judges a run against its prompt's median. Reports
    whose records carry no account get no line."""
    out = SpeedLines()
    for check in outside:
        runs = _runs_of(a, check.metric)
        if runs is None:
            continue
        prompt, phase, unit = runs
        ma, mb = _medians(a, prompt, phase), _medians(b, prompt, phase)
        if ma is not None and mb is not None:
            _between(check, ma, mb, unit, out)
    return out
