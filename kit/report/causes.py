"""The decode findings of verdict rules 2: each names a cause kit can see, or what it checked.

:func:`decode_findings` judges each prompt of the sequential protocol from the records alone (a
verifier gets the same); :func:`synthetic_findings` judges a synthetic-acceptance run.
"""

from __future__ import annotations

import itertools
import math
import statistics
from typing import TYPE_CHECKING

from kit.bench.held import held_runs
from kit.bench.summary import decode_headline, decode_runs
from kit.errors import BadInputError
from kit.metrics import summarize
from kit.noise import FLOOR_PCT
from kit.probe import Finding
from kit.recipe.acceptance import AcceptanceTarget, target_of
from kit.report.cputime import within_run as cpu_within_run
from kit.report.schema import AcceptanceWindow, SyntheticAcceptanceCheck
from kit.report.speed import within_run

if TYPE_CHECKING:
    from kit.metrics import SpecDecode
    from kit.probe import HostLoad
    from kit.report.schema import Report

CV_LIMIT_PCT = 5.0
MIN_CLEAN_RUNS = 3
# a drift: a least-squares slope over the runs whose t-test rejects no trend at 5 %, and a
# fitted change over the runs of at least FLOOR_PCT
DRIFT_MIN_RUNS = 5
# the machine was saturated: this share of all its cores busy while measuring
CONTENTION_BUSY_PCT = 90.0
# rules 3: a hypervisor that took this share of the CPU time (steal) is named as a cause
STEAL_PCT = 1.0
VRAM_GROWTH_MIB = 256
# synthetic acceptance: a figure may lie this many standard errors from its target (two-sided
# 6e-5 a figure: about 1e-3 over the 16 figures of two prompts at 7 draft tokens), plus this
ACCEPTANCE_Z = 4.0
ACCEPTANCE_EPSILON = 0.005


def _finding(code: str, severity: str, message: str) -> Finding:
    return Finding.model_validate({"code": code, "severity": severity, "message": message})


def kendall_tau(values: list[float]) -> float:
    """Kendall's tau of the values against their order (ties count for neither)."""
    n = len(values)
    pairs = n * (n - 1) / 2
    if not pairs:
        return 0.0
    score = sum(
        (values[j] > values[i]) - (values[j] < values[i]) for i in range(n) for j in range(i + 1, n)
    )
    return score / pairs


# Student's t at 97.5 % by degrees of freedom (two-sided 5 %); 1.96 beyond the table
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}  # fmt: skip


def t_critical(df: int) -> float:
    """The two-sided 5 % critical t for ``df`` degrees of freedom (the next smaller df listed)."""
    listed = [d for d in _T975 if d <= df]
    return _T975[max(listed)] if listed and df <= 30 else 1.96


def slope_t(values: list[float]) -> float:
    """The least-squares slope of the runs against their order over its standard error."""
    n = len(values)
    mean_x, mean_y = (n - 1) / 2, statistics.fmean(values)
    sxx = sum((i - mean_x) ** 2 for i in range(n))
    slope = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values)) / sxx
    fit = [mean_y + slope * (i - mean_x) for i in range(n)]
    # (v - f) * (v - f), not ** 2: a square beyond a double is inf, not an OverflowError
    residual = sum((v - f) * (v - f) for v, f in zip(values, fit, strict=True)) / (n - 2)
    se = (residual / sxx) ** 0.5
    return slope / se if se else float("inf") if slope else 0.0


def drift_pct(values: list[float]) -> float:
    """The least-squares change from the first run to the last, in percent of the median (0
    where the median is 0: no percentage of it)."""
    n = len(values)
    mean_x = (n - 1) / 2
    mean_y = statistics.fmean(values)
    sxx = sum((i - mean_x) ** 2 for i in range(n))
    slope = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values)) / sxx
    median = statistics.median(values)
    return slope * (n - 1) / median * 100 if median else 0.0


def _contention(load: HostLoad | None) -> str | None:
    if load is None or load.busy_pct is None or load.busy_pct < CONTENTION_BUSY_PCT:
        return None
    own = f"{load.own_cpu_pct:.0f} %" if load.own_cpu_pct is not None else "?"
    other = f"{load.other_cpu_pct:.0f} %" if load.other_cpu_pct is not None else "?"
    return (
        f"host contention: the {load.cores or '?'} cores were {load.busy_pct:.0f} % busy while "
        f"measuring (kit, the engine and its API server {own}, other processes {other})"
    )


def _checked(load: HostLoad | None, drift: str | None, rules: int, speed: str | None) -> str:
    """What was looked at when no cause was found (``speed``: the host-speed witness's word)."""
    parts = ["no held stream left in the headline"]
    if load is None or load.busy_pct is None:
        parts.append("host load not measured")
    else:
        parts.append(
            f"host {load.busy_pct:.0f} % busy (others {load.other_cpu_pct or 0:.0f} %), below "
            f"{CONTENTION_BUSY_PCT:g} %"
        )
        if rules >= 3:
            steal = "not measured" if load.steal_pct is None else f"{load.steal_pct:.1f} %"
            parts.append(f"hypervisor steal {steal}")
    parts.append(drift or "no drift across the runs")
    if speed:
        parts.append(speed)
    return "no cause found (checked: " + "; ".join(parts) + ")"


def vram_findings(report: Report) -> list[Finding]:
    """A GPU whose memory in use grew at every measured window's end."""
    sampling = report.gpu_sampling
    if sampling is None:
        return []
    found = []
    for gpu in sorted({s.gpu for s in sampling.samples}):
        ends = [
            s.memory_used_mib
            for s in sampling.samples
            if s.gpu == gpu and s.mark == "measure_end" and isinstance(s.memory_used_mib, int)
        ]
        if len(ends) < 2:
            continue
        rising = all(b > a for a, b in itertools.pairwise(ends))
        if rising and ends[-1] - ends[0] > VRAM_GROWTH_MIB:
            found.append(
                _finding(
                    "vram-growth",
                    "warning",
                    f"GPU {gpu}: memory in use rose at each of {len(ends)} measured windows' "
                    f"ends, {ends[0]:,} -> {ends[-1]:,} MiB (+{ends[-1] - ends[0]:,} MiB): a "
                    "leak, or a cache still filling",
                )
            )
    return found


def off_runs(runs: list[int], values: list[float]) -> str:
    """The runs off their median by more than CV_LIMIT_PCT, e.g. ``#2 112.3 (-9.8 %)``."""
    med = statistics.median(values)
    if not med:
        return "runs off the median by more than a percentage: none, the median is 0 tok/s"
    off = [
        f"#{i} {v:,.1f} ({(v / med - 1) * 100:+.1f} %)"
        for i, v in zip(runs, values, strict=True)
        if abs(v / med - 1) * 100 > CV_LIMIT_PCT
    ]
    where = ", ".join(off) if off else "none, the spread is even"
    return f"runs off the median {med:,.1f} tok/s by more than {CV_LIMIT_PCT:g} %: {where}"


def decode_findings(report: Report, rules: int) -> list[Finding]:
    """Per prompt of the sequential protocol, from the records alone (a verifier gets the same):

    - ``held-stream`` (warning): runs the server held, left out of the headline (kit.bench.held);
    - ``too-few-clean-runs`` (error): fewer than ``MIN_CLEAN_RUNS`` runs left for the headline;
    - ``decode-cv-high`` (error): the CV of the headline's runs above CV_LIMIT_PCT, with its causes
      (rules 3: also the runs off the median by more than CV_LIMIT_PCT, the hypervisor's steal, and
      the host-speed witness where recorded, :mod:`kit.report.speed`);
    - ``decode-drift`` (warning): a steady rise or fall across the runs (heat, memory pressure):
      a least-squares slope whose t-test rejects no trend at 5 %, and a change of 3 % or more;
    - ``host-contention`` (warning): the machine's cores saturated while measuring, with held or
      noisy runs: the engine, the API server and the client competed for them;
    - ``vram-growth`` (warning): a GPU's memory in use rose at every measured window's end, by
      more than ``VRAM_GROWTH_MIB`` in all (a leak, or a cache still filling).
    """
    found: list[Finding] = []
    bench = report.bench
    if bench is None:
        return found
    load = report.host_load
    contention = _contention(load)
    contended = False
    for p in bench.prompts:
        name = p.prompt
        usable = decode_runs(name, bench.records)
        held = held_runs(name, bench.records)
        head = decode_headline(name, bench.records)  # held and implausible runs left out
        values = [usable[i] for i in head.runs_used]
        if held:
            listed = "; ".join(f"#{i}: {why}" for i, why in sorted(held.items()))
            found.append(
                _finding(
                    "held-stream",
                    "warning",
                    f"{name}: {len(held)} of {len(usable)} measured runs were held streams, left "
                    f"out of the headline ({listed})" + (f"; {contention}" if contention else ""),
                )
            )
            contended = contended or contention is not None
            if len(values) < MIN_CLEAN_RUNS:
                found.append(
                    _finding(
                        "too-few-clean-runs",
                        "error",
                        f"{name}: {len(values)} of {len(usable)} measured runs are clean, the "
                        f"headline needs {MIN_CLEAN_RUNS}: the server held the others (see "
                        "held-stream)",
                    )
                )
        drift = None
        if len(values) >= DRIFT_MIN_RUNS:
            tau, change, t = kendall_tau(values), drift_pct(values), slope_t(values)
            if abs(t) >= t_critical(len(values) - 2) and abs(change) >= FLOOR_PCT:
                drift = (
                    f"a steady {'rise' if change > 0 else 'fall'} of {change:+.1f} % over runs "
                    f"{head.runs_used[0]}-{head.runs_used[-1]} ({values[0]:,.1f} -> "
                    f"{values[-1]:,.1f} tok/s, Kendall tau {tau:+.2f}, slope t {t:+.1f})"
                )
                found.append(
                    _finding(
                        "decode-drift",
                        "warning",
                        f"{name}: decode TPS drifts: {drift}: heat, clocks or memory pressure "
                        "changed while measuring",
                    )
                )
        cv = summarize(values).cv_pct if len(values) > 1 else None
        if cv is not None and cv > CV_LIMIT_PCT:
            causes = [c for c in (contention, drift) if c]
            if load is not None and (load.other_cpu_pct or 0) > 10:
                causes.append(f"other processes used {load.other_cpu_pct:.0f} % of the CPU")
            if rules >= 3 and load is not None and (load.steal_pct or 0) >= STEAL_PCT:
                causes.append(
                    f"the hypervisor took {load.steal_pct:.1f} % of the CPU time (steal): "
                    "other guests shared this machine's cores"
                )
            checked: list[str] = []
            if rules >= 3:
                for judge in (within_run, cpu_within_run):
                    cause, seen = judge(name, head.runs_used, values, bench.records, CV_LIMIT_PCT)
                    causes += [cause] if cause else []
                    checked += [seen] if seen else []
            steady = "; ".join(checked) or None
            contended = contended or contention is not None
            which = f" ({off_runs(head.runs_used, values)})" if rules >= 3 else ""
            found.append(
                _finding(
                    "decode-cv-high",
                    "error",
                    f"{name}: decode TPS CV {cv:.1f} % over the headline's {len(values)} runs "
                    f"is above {CV_LIMIT_PCT:.0f} %{which}; "
                    + ("; ".join(causes) if causes else _checked(load, drift, rules, steady)),
                )
            )
    if contended and contention is not None:
        found.append(_finding("host-contention", "warning", contention))
    return found + vram_findings(report)


# ---------------------------------------------------------------------------------------------
# synthetic acceptance


def step_sd(rates: list[float]) -> float:
    """The standard deviation of one step's accepted draft tokens A under unconditional rates
    p_1 >= ... >= p_k: the events "the first i accepted" nest, so E[A] = sum p_i and
    E[A^2] = sum (2i - 1) p_i."""
    first = sum(rates)
    second = sum((2 * i - 1) * p for i, p in enumerate(rates, start=1))
    return math.sqrt(max(second - first**2, 0.0))


def _within(achieved: float, wanted: float, tolerance: float, shortfall: float) -> bool:
    return wanted - tolerance - shortfall <= achieved <= wanted + tolerance


def acceptance_window(name: str, sd: SpecDecode, t: AcceptanceTarget) -> AcceptanceWindow:
    """One window's counters (``sd``, n = drafts > 0) against the target ``t``.

    Each step draws fresh uniforms, so a position's accepted count over n steps is binomial:
    its rate may lie ``ACCEPTANCE_Z * sqrt(p(1 - p) / n) + ACCEPTANCE_EPSILON`` from its target
    p, the mean ``ACCEPTANCE_Z * step_sd / sqrt(n) + ACCEPTANCE_EPSILON`` from ``sum p``. A step
    the scheduler cut short proposed fewer than k tokens: the counters' shortfall,
    (n × k - draft tokens) / n, is the most that can lower a rate or the mean, and widens each
    tolerance below the target by it."""
    n, k = sd.drafts, len(t.rates)
    shortfall = max(n * k - sd.draft_tokens, 0) / n
    mean_tol = ACCEPTANCE_Z * step_sd(t.rates) / math.sqrt(n) + ACCEPTANCE_EPSILON
    pos_tol = [ACCEPTANCE_Z * math.sqrt(p * (1 - p) / n) + ACCEPTANCE_EPSILON for p in t.rates]
    w = AcceptanceWindow(
        window=name,
        drafts=n,
        draft_tokens=sd.draft_tokens,
        accepted_per_draft=sd.accepted_tokens / n,
        mean_tolerance=mean_tol,
        per_position_rate=sd.per_position_rate,
        position_tolerance=pos_tol,
        shortfall=shortfall,
        met=True,
    )
    return w.model_copy(update={"met": not _missed(w, t)})


def synthetic_check(report: Report) -> SyntheticAcceptanceCheck | None:
    """A synthetic-acceptance run's target and each measured window (prompt, load point) that
    drafted, judged by :func:`acceptance_window`; None for a real-acceptance run."""
    t = target_of(report.recipe)
    if t is None:
        return None
    windows: list[tuple[str, SpecDecode | None]] = []
    if report.bench is not None:
        windows += [(p.prompt, p.spec_decode) for p in report.bench.prompts]
        windows += [(pt.label, pt.spec_decode) for pt in report.bench.load_points]
    return SyntheticAcceptanceCheck(
        target=t,
        z=ACCEPTANCE_Z,
        epsilon=ACCEPTANCE_EPSILON,
        windows=[acceptance_window(name, sd, t) for name, sd in windows if sd and sd.drafts],
    )


def _missed(w: AcceptanceWindow, t: AcceptanceTarget) -> list[str]:
    """The figures of a window outside their tolerance, in words."""
    out = []

    def judge(what: str, achieved: float, wanted: float, tol: float, digits: int) -> None:
        if not _within(achieved, wanted, tol, w.shortfall):
            below = f" (-{w.shortfall:.{digits}f} below: steps cut short)" if w.shortfall else ""
            out.append(
                f"{what} {achieved:.{digits}f}, target {wanted:.{digits}f}, tolerance "
                f"±{tol:.{digits}f}{below}"
            )

    judge("accepted per draft", w.accepted_per_draft, t.accepted_per_draft, w.mean_tolerance, 3)
    for i, (r, p, tol) in enumerate(
        zip(w.per_position_rate, t.rates, w.position_tolerance, strict=False), start=1
    ):
        judge(f"position {i} rate", r, p, tol, 4)
    return out


def synthetic_findings(report: Report) -> list[Finding]:
    """``synthetic-acceptance-missed`` (error, under any verdict rules): a window whose achieved
    acceptance (the mean or any position) lies beyond its tolerance from the synthetic target
    (:func:`synthetic_check`)."""
    try:
        check = synthetic_check(report)
    except BadInputError as exc:
        return [_finding("synthetic-acceptance-missed", "error", f"no target: {exc.message}")]
    if check is None:
        return []
    found = []
    for w in check.windows:
        missed = _missed(w, check.target)
        if missed:
            found.append(
                _finding(
                    "synthetic-acceptance-missed",
                    "error",
                    f"{w.window}: vLLM's counters over {w.drafts:,} drafts miss the synthetic "
                    f"target: {'; '.join(missed)} (tolerance: {check.z:g} standard errors + "
                    f"{check.epsilon:g}): the engine did not accept at the rates it was given",
                )
            )
    return found
