"""Verdict rules 2 and 3: every decode error names a cause kit can see, or what it checked; a
drift across runs and a saturated host are named with their figures; rules 3 also name the runs
off the median and the hypervisor's steal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kit.probe import HostLoad
from kit.report import Report
from kit.report.causes import drift_pct, kendall_tau, slope_t, t_critical
from kit.report.files import read_report
from kit.report.validity import RULES, verdict
from kit.signing import load_public_key


@pytest.fixture(scope="module")
def a(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports/cpu-tiny-a.json", allow_unsigned=True)[0]


def with_decode(report: Report, prompt: str, values: list[float], **update: Any) -> Report:
    """The report with one prompt's measured runs decoding at ``values`` (by index)."""
    assert report.bench is not None
    records = [
        r.model_copy(update={"decode_tps": values[r.index]})
        if r.prompt == prompt and r.phase == "measured"
        else r
        for r in report.bench.records
    ]
    bench = report.bench.model_copy(update={"records": records})
    return report.model_copy(update={"bench": bench, **update})


def load(busy: float, own: float, other: float, steal: float = 0.0) -> HostLoad:
    return HostLoad(
        window_s=20.0, windows=2, samples=40, cores=2, busy_pct=busy, steal_pct=steal,
        own_cpu_pct=own, other_cpu_pct=other, loadavg_start=1.0, loadavg_end=2.0, top_other=[],
        foreign_gpu_processes=None, foreign_gpu_unavailable="no NVML", error=None,
    )  # fmt: skip


def codes(report: Report) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in verdict(report).reasons]


def message(report: Report, code: str) -> str:
    return next(f.message for f in verdict(report).reasons if f.code == code)


def test_new_reports_are_judged_by_rules_3_and_old_ones_keep_theirs(
    a: Report, fixtures_dir: Path
) -> None:
    assert RULES == 3 and verdict(a).rules == 3 and a.validity.rules == 3
    examples = fixtures_dir / "examples"
    path = examples / "reports/h200x2-tp2.report.json"
    old, _ = read_report(path, load_public_key(examples / "keys/example.pub"))
    assert old.validity.rules == 1  # signed before rules 2: absent, read as 1
    assert verdict(old, old.host, old.gpu_sampling, rules=1) == old.validity
    # rules 2 would add the drift of its narrative runs (224 -> 206 tok/s)
    assert "decode-drift" in [f.code for f in verdict(old, old.host, old.gpu_sampling).reasons]


def test_a_steady_fall_is_a_drift_warning_with_its_slope(a: Report) -> None:
    # the committed TP=2 H200 report's narrative shape: 224 -> 206 over five runs, CV 3.4 %
    falling = with_decode(a, "narrative", [224.0, 219.5, 214.0, 211.0, 206.0])
    assert ("decode-drift", "warning") in codes(falling)
    text = message(falling, "decode-drift")
    assert text.startswith("narrative: decode TPS drifts: a steady fall of -8.")
    assert "(224.0 -> 206.0 tok/s, Kendall tau -1.00, slope t -" in text
    assert verdict(falling).valid  # CV 3.4 %: a warning, not an error


def test_a_noisy_figure_without_a_visible_cause_says_what_was_checked(a: Report) -> None:
    noisy = with_decode(a, "code", [100.0, 120.0, 95.0, 118.0, 101.0], host_load=load(60, 55, 3))
    assert ("decode-cv-high", "error") in codes(noisy)
    text = message(noisy, "decode-cv-high")
    assert text.startswith("code: decode TPS CV ") and "over the headline's 5 runs" in text
    # the runs off the median (101.0) by more than 5 %, by index
    assert (
        "(runs off the median 101.0 tok/s by more than 5 %: #1 120.0 (+18.8 %), #2 95.0 (-5.9 %), "
        "#3 118.0 (+16.8 %)); "
    ) in text
    assert text.endswith(
        "no cause found (checked: no held stream left in the headline; host 60 % busy (others "
        "3 %), below 90 %; hypervisor steal 0.0 %; no drift across the runs)"
    )
    # rules 2, which a report signed by them keeps, said neither
    old = verdict(noisy, rules=2)
    said = next(f.message for f in old.reasons if f.code == "decode-cv-high")
    assert "runs off the median" not in said and "steal" not in said


def test_steal_is_named_as_a_cause(a: Report) -> None:
    noisy = with_decode(
        a, "code", [100.0, 120.0, 95.0, 118.0, 101.0], host_load=load(60, 55, 3, steal=6.5)
    )
    assert message(noisy, "decode-cv-high").endswith(
        "; the hypervisor took 6.5 % of the CPU time (steal): other guests shared this "
        "machine's cores"
    )


def test_a_saturated_host_is_named_as_the_cause(a: Report) -> None:
    noisy = with_decode(a, "code", [100.0, 120.0, 95.0, 118.0, 101.0], host_load=load(97, 89, 8))
    contention = (
        "host contention: the 2 cores were 97 % busy while measuring (kit, the engine and its "
        "API server 89 %, other processes 8 %)"
    )
    assert message(noisy, "decode-cv-high").endswith(contention)
    assert message(noisy, "host-contention") == contention
    # a saturated host with steady runs is not named: nothing suffered from it
    steady = a.model_copy(update={"host_load": load(97, 89, 8)})
    assert "host-contention" not in [c for c, _ in codes(steady)]


def test_scatter_without_a_slope_is_no_drift(a: Report) -> None:
    # first and last 5 % apart, but the runs between scatter: the slope is not significant
    scatter = [257.8, 271.0, 255.0, 268.0, 270.9]
    assert abs(slope_t(scatter)) < t_critical(3)
    assert "decode-drift" not in [c for c, _ in codes(with_decode(a, "code", scatter))]


def test_tau_and_drift() -> None:
    assert kendall_tau([1.0, 2.0, 3.0, 4.0]) == 1.0
    assert kendall_tau([4.0, 3.0, 2.0, 1.0]) == -1.0
    assert kendall_tau([1.0, 3.0, 2.0, 4.0]) == pytest.approx(2 / 3)
    assert drift_pct([100.0, 101.0, 102.0, 103.0]) == pytest.approx(3 / 101.5 * 100)
    assert t_critical(3) == 3.182 and t_critical(11) == 2.228 and t_critical(100) == 1.96


def test_memory_rising_at_every_window_end_is_named(fixtures_dir: Path) -> None:
    gpu = read_report(fixtures_dir / "reports/h200x2.json", allow_unsigned=True)[0]
    assert gpu.gpu_sampling is not None
    assert "vram-growth" not in [c for c, _ in codes(gpu)]  # the recorded run: steady
    # three measured windows whose ends read more memory each time
    end = next(x for x in gpu.gpu_sampling.samples if x.mark == "measure_end" and x.gpu == 0)
    others = [x for x in gpu.gpu_sampling.samples if not (x.mark == "measure_end" and x.gpu == 0)]
    samples = others + [
        end.model_copy(update={"memory_used_mib": mib, "t_s": end.t_s + i})
        for i, mib in enumerate((1000, 1400, 1800))
    ]
    leaking = gpu.model_copy(
        update={"gpu_sampling": gpu.gpu_sampling.model_copy(update={"samples": samples})}
    )
    [growth] = [f for f in verdict(leaking).reasons if f.code == "vram-growth"]
    assert growth.message.startswith("GPU 0: memory in use rose at each of ")
    assert "3 measured windows' ends, 1,000 -> 1,800 MiB (+800 MiB)" in growth.message
