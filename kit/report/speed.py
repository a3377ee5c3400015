"""The host-speed witness in the verdicts: did the host itself run slower or faster?

A decode change is put beside the change of the fixed workload timed before each measured run
(:mod:`kit.probe.hostspeed`): within a run (:func:`within_run`), between two runs
(:func:`between_runs`). docs/noise.md, "The host-speed witness".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kit.bench.summary import prompt_host_speed
from kit.noise import FLOOR_PCT
from kit.probe.hostspeed import HostSpeed, change_pct, describe, median_speed
from kit.report.verdict import num

if TYPE_CHECKING:
    from kit.bench import RequestRecord
    from kit.report.schema import Report
    from kit.report.verdict import FigureCheck

EXPLAINS = 0.5  # the share of a change the witness must match, the same way, to explain it


def explains(change: float, witness: float | None) -> bool:
    """Whether a witness change (percent) explains a figure's ``change`` (percent)."""
    return witness is not None and witness * change > 0 and abs(witness) >= EXPLAINS * abs(change)


def _faster(pct: float) -> str:
    return f"{abs(pct):.1f} % {'faster' if pct > 0 else 'slower'}"


def within_run(
    prompt: str, runs: list[int], values: list[float], records: list[RequestRecord], off_pct: float
) -> tuple[str | None, str | None]:
    """For a noisy prompt, in rules 3's ``decode-cv-high``: (a cause, when the witness followed
    its runs off the median by more than ``off_pct``; else what it checked). (None, None)
    without the witness."""
    speeds = {
        r.index: r.host_speed
        for r in records
        if r.prompt == prompt and r.phase == "measured" and r.host_speed is not None
    }
    have = [i for i in runs if i in speeds]
    ref = median_speed([speeds[i] for i in have])
    if ref is None or len(have) < 2:
        return None, None
    witness = {i: change_pct(ref, speeds[i]) for i in have}
    med = statistics.median(values)
    if not med:  # no run is off a median of 0 by a percentage
        return None, None
    off = {
        i: (v / med - 1) * 100
        for i, v in zip(runs, values, strict=True)
        if abs(v / med - 1) * 100 > off_pct
    }
    matched = [i for i in off if explains(off[i], witness.get(i))]
    spread = max(abs(w) for w in witness.values() if w is not None)
    if matched:
        listed = ", ".join(f"#{i} {off[i]:+.1f} % vs witness {witness[i]:+.1f} %" for i in matched)
        rest = [f"#{i}" for i in off if i not in matched]
        return (
            "host speed: the fixed workload on the engine's cores, timed before each run, "
            f"moved with the runs off the median ({listed})"
            + (f"; not with {', '.join(rest)}" if rest else ""),
            None,
        )
    if spread < off_pct:
        return None, f"host speed steady (the fixed workload within ±{spread:.1f} % of its median)"
    moved = f"host speed moved (the fixed workload within ±{spread:.1f} % of its median)"
    return None, moved + (", not with the runs off the median" if off else "")


@dataclass
class SpeedLines:
    """What the witness says of a re-run's decode figures outside their bands: the causes it
    names, what it ruled out, and the summary's short form of the first cause."""

    causes: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    summary: str = ""


def _prompt_speeds(report: Report) -> dict[str, HostSpeed | None]:
    b = report.bench
    if b is None:
        return {}
    # the figure's name as kit.report.figures gives it
    return {f"{p.prompt} decode TPS": prompt_host_speed(p.prompt, b.records) for p in b.prompts}


def _line(check: FigureCheck, wa: HostSpeed, wb: HostSpeed, out: SpeedLines) -> None:
    d = check.delta_pct or 0.0
    w = change_pct(wa, wb)
    seen = f"(witness {describe(wa)} vs {describe(wb)})"
    figure = f"{check.metric} {num(d, '+.1f')} %"
    if w is None:
        out.checked.append(f"host speed not compared for {check.metric}: other kernels {seen}")
    elif explains(d, w):
        out.causes.append(
            f"host-speed: {figure}: the re-run's host ran {_faster(w)} on the fixed workload {seen}"
        )
        out.summary = (
            out.summary or f"; host-speed: the re-run's host ran {_faster(w)} on the fixed workload"
        )
    elif abs(w) < FLOOR_PCT:
        out.checked.append(
            f"host speed steady within {abs(w):.1f} % {seen}: not the cause of {figure}"
        )
    else:
        how = "the other way" if w * d < 0 else f"less than {EXPLAINS * 100:g} % of it"
        out.checked.append(
            f"host speed {w:+.1f} % on the fixed workload {seen}, {how}: not the cause of {figure}"
        )


def between_runs(a: Report, b: Report, outside: list[FigureCheck]) -> SpeedLines:
    """For the reproduction verdict, each decode figure outside its band: whether the two runs'
    witness medians moved the same way by at least ``EXPLAINS`` of it (a cause), or not (ruled
    out). Reports without the witness get no line."""
    out = SpeedLines()
    mine, theirs = _prompt_speeds(a), _prompt_speeds(b)
    for check in outside:
        if check.metric not in mine or check.metric not in theirs:
            continue
        wa, wb = mine[check.metric], theirs[check.metric]
        if wa is not None and wb is not None:
            _line(check, wa, wb, out)
        elif wa is not None or wb is not None:
            side = "original" if wa is None else "re-run"
            out.checked.append(
                f"host speed not compared for {check.metric}: no witness in the {side}"
            )
    return out
