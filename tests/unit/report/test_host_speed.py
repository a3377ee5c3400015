"""The host-speed witness in both verdicts (kit.report.speed): within a run, rules 3's
decode-cv-high names it when it moved with the runs off the median, else says it was checked;
between runs, the reproduction verdict names ``host-speed`` when the witness explains at least
half of a decode figure's change, or says why it does not. Reports without it read as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from factories import quiet_load, with_measured

from kit.bench import RequestRecord
from kit.probe.hostspeed import HostSpeed
from kit.report import Report
from kit.report.files import read_report
from kit.report.reproduction import judge
from kit.report.validity import verdict
from kit.report.verify.recompute import summaries_item

Scaled = Callable[[Report, str, float], Report]
BASE = HostSpeed(python_ops_s=10e6, kernel_ops_s=20_000.0, kernel="numpy-matmul-f32-128", cpus=[0])
NOISY = [100.0, 120.0, 95.0, 118.0, 101.0]  # median 101: #1 +18.8 %, #2 -5.9 %, #3 +16.8 %
NONE_SEEN = (
    "none that kit can see: the reports show the same hardware, engine, patches and settings, "
    "and quiet hosts"
)


@pytest.fixture(scope="module")
def a(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports/cpu-tiny-a.json", allow_unsigned=True)[0]


def at(factor: float, kernel: str = BASE.kernel) -> HostSpeed:
    """The base reading with both parts ``factor`` times as fast."""
    return BASE.model_copy(
        update={
            "python_ops_s": BASE.python_ops_s * factor,
            "kernel_ops_s": BASE.kernel_ops_s * factor,
            "kernel": kernel,
        }
    )


def witnessed(
    report: Report, prompt: str, factors: list[float], decode: list[float] | None = None
) -> Report:
    """The report with one prompt's measured runs carrying the witness at ``factors`` (and
    decoding at ``decode``, by index), its summaries recomputed from the records."""

    def change(r: RequestRecord) -> RequestRecord:
        update: dict[str, object] = {"host_speed": at(factors[r.index])}
        if decode is not None:
            update["decode_tps"] = decode[r.index]
        return r.model_copy(update=update)

    return with_measured(report, prompt, change)


def quiet(report: Report) -> Report:
    return report.model_copy(update={"host_load": quiet_load()})


def cv_message(report: Report, rules: int = 3) -> str:
    found = verdict(report, rules=rules).reasons
    return next(f.message for f in found if f.code == "decode-cv-high")


# ---------------------------------------------------------------------------------------------
# within a run


def test_a_witness_that_moved_with_the_runs_off_the_median_is_the_cause(a: Report) -> None:
    noisy = quiet(witnessed(a, "code", [1.0, 1.15, 0.96, 1.14, 1.0], NOISY))
    assert cv_message(noisy).endswith(
        "; host speed: the fixed workload on the engine's cores, timed before each run, moved "
        "with the runs off the median (#1 +18.8 % vs witness +15.0 %, #2 -5.9 % vs witness "
        "-4.0 %, #3 +16.8 % vs witness +14.0 %)"
    )
    assert not verdict(noisy).valid  # named, not forgiven: the CV is still too high


def test_runs_the_witness_did_not_follow_are_listed(a: Report) -> None:
    noisy = quiet(witnessed(a, "code", [1.0, 1.15, 1.0, 1.14, 1.0], NOISY))
    text = cv_message(noisy)
    assert "(#1 +18.8 % vs witness +15.0 %, #3 +16.8 % vs witness +14.0 %); not with #2" in text


def test_a_steady_witness_is_among_what_was_checked(a: Report) -> None:
    noisy = quiet(witnessed(a, "code", [1.0, 1.01, 0.99, 1.0, 1.0], NOISY))
    assert cv_message(noisy).endswith(
        "no drift across the runs; host speed steady (the fixed workload within ±1.0 % of its "
        "median))"
    )


def test_a_witness_that_moved_the_other_way_is_not_the_cause(a: Report) -> None:
    noisy = quiet(witnessed(a, "code", [1.0, 0.85, 1.1, 0.86, 1.0], NOISY))
    assert cv_message(noisy).endswith(
        "host speed moved (the fixed workload within ±15.0 % of its median), not with the runs "
        "off the median)"
    )


def test_without_the_witness_or_under_rules_2_nothing_is_said_of_it(a: Report) -> None:
    witnessless = quiet(witnessed(a, "code", [1.0] * 5, NOISY))
    assert witnessless.bench is not None
    records = [r.model_copy(update={"host_speed": None}) for r in witnessless.bench.records]
    old = witnessless.model_copy(
        update={"bench": witnessless.bench.model_copy(update={"records": records})}
    )
    assert "host speed" not in cv_message(old)
    moved = quiet(witnessed(a, "code", [1.0, 1.15, 0.96, 1.14, 1.0], NOISY))
    assert "host speed" not in cv_message(moved, rules=2)


def test_a_report_with_the_witness_verifies_its_summaries(a: Report) -> None:
    report = witnessed(a, "code", [1.0, 1.1, 0.9, 1.2, 1.05])
    assert report.bench is not None
    code = next(p for p in report.bench.prompts if p.prompt == "code")
    assert code.host_speed == at(1.05)  # each part's median
    assert summaries_item(report).ok
    tampered = [
        p.model_copy(update={"host_speed": at(2.0)}) if p.prompt == "code" else p
        for p in report.bench.prompts
    ]
    bad = report.model_copy(update={"bench": report.bench.model_copy(update={"prompts": tampered})})
    assert summaries_item(bad).ok is False


# ---------------------------------------------------------------------------------------------
# between runs


def rerun(a: Report, scaled: Scaled, decode: float, host: float) -> tuple[Report, Report]:
    """The original with a steady witness, and a re-run whose code prompt decoded ``decode``
    times as fast on a host ``host`` times as fast."""
    return witnessed(a, "code", [1.0] * 5), witnessed(scaled(a, "code", decode), "code", [host] * 5)


def test_a_faster_host_is_named_and_the_verdict_stays_different(a: Report, scaled: Scaled) -> None:
    result = judge(*rerun(a, scaled, 1.25, 1.2))
    assert result.verdict == "DIFFERENT"
    assert result.summary.endswith(
        "outside their bands (code decode TPS), higher (better); host-speed: the re-run's host "
        "ran 20.0 % faster on the fixed workload"
    )
    assert result.causes == [
        "host-speed: code decode TPS +25.0 %: the re-run's host ran 20.0 % faster on the fixed "
        "workload (witness Python loop 10.00 M it/s, numpy-matmul-f32-128 20,000 calls/s vs Python "
        "loop 12.00 M it/s, numpy-matmul-f32-128 24,000 calls/s)"
    ]
    code = next(f for f in result.figures if f.metric == "code decode TPS")
    assert code.new == pytest.approx(code.original * 1.25)  # the headline as measured


def test_a_slower_host_is_named(a: Report, scaled: Scaled) -> None:
    result = judge(*rerun(a, scaled, 0.8, 0.85))
    assert result.verdict == "DIFFERENT"
    assert result.causes[0].startswith(
        "host-speed: code decode TPS -20.0 %: the re-run's host ran 15.0 % slower on the fixed "
        "workload (witness "
    )


@pytest.mark.parametrize(
    ("host", "said"),
    [
        (1.0, "host speed steady within 0.0 % (witness "),
        (0.9, "host speed -10.0 % on the fixed workload (witness "),
        (1.1, "host speed +10.0 % on the fixed workload (witness "),
    ],
)
def test_a_witness_that_does_not_explain_the_change_is_ruled_out(
    a: Report, scaled: Scaled, host: float, said: str
) -> None:
    result = judge(*rerun(a, scaled, 1.25, host))
    assert result.verdict == "DIFFERENT" and "host-speed" not in result.summary
    assert result.causes[0] == NONE_SEEN
    last = result.causes[-1]
    assert last.startswith(said) and last.endswith("not the cause of code decode TPS +25.0 %")
    why = {1.0: "): not", 0.9: "), the other way: not", 1.1: "), less than 50 % of it: not"}
    assert why[host] in last


def test_old_reports_and_one_sided_witnesses(a: Report, scaled: Scaled) -> None:
    assert judge(a, scaled(a, "code", 1.25)).causes == [NONE_SEEN]  # neither has it
    result = judge(a, witnessed(scaled(a, "code", 1.25), "code", [1.2] * 5))
    assert result.causes == [
        NONE_SEEN,
        "host speed not compared for code decode TPS: no witness in the original",
    ]
    other = witnessed(scaled(a, "code", 1.25), "code", [1.2] * 5)
    assert other.bench is not None
    zlib = [
        r.model_copy(update={"host_speed": at(1.2, "zlib-64k")}) if r.host_speed else r
        for r in other.bench.records
    ]
    other = other.model_copy(update={"bench": other.bench.model_copy(update={"records": zlib})})
    last = judge(witnessed(a, "code", [1.0] * 5), other).causes[-1]
    assert last.startswith("host speed not compared for code decode TPS: other kernels (witness ")
