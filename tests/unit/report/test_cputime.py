"""The scheduler's account in rules 3's decode-cv-high (kit.report.cputime): the runs off the
median are put beside their CPU time and their wait for a CPU per token; the verdict names
which followed them, or says that neither did. Reports without the account read as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import quiet_load, with_measured

from kit.bench import RequestRecord
from kit.probe.schedstat import CpuAccount
from kit.report import Report
from kit.report.files import read_report
from kit.report.reproduction import judge
from kit.report.validity import verdict

NOISY = [100.0, 120.0, 95.0, 118.0, 101.0]  # median 101: #1 +18.8 %, #2 -5.9 %, #3 +16.8 %


@pytest.fixture(scope="module")
def a(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports/cpu-tiny-a.json", allow_unsigned=True)[0]


def accounted(
    report: Report,
    decode: list[float],
    run_us: list[float],
    wait_us: list[float],
    worker: bool = False,
) -> Report:
    """The report with the code prompt's measured runs decoding at ``decode`` and carrying an
    account of ``run_us`` on a CPU (the worker's, where ``worker``: the engine's other threads
    then poll for a steady 1,000 us per token) and ``wait_us`` waiting per token (by index), on
    a quiet host, its summaries recomputed from the records."""

    def change(r: RequestRecord) -> RequestRecord:
        n = r.completion_tokens or 1
        cpu = CpuAccount(
            engine_run_us=(run_us[r.index] + (1_000.0 if worker else 0.0)) * n,
            engine_wait_us=wait_us[r.index] * n,
            worker_run_us=run_us[r.index] * n if worker else None,
            worker_wait_us=wait_us[r.index] * n if worker else None,
            client_run_us=10.0 * n,
            client_wait_us=0.0,
        )
        wall = n / decode[r.index]  # a negligible first token: wall per token is decode's
        # (a microsecond: the quickest a first token can plausibly be, kit.bench.plausible)
        update = {"cpu": cpu, "decode_tps": decode[r.index], "wall_s": wall, "ttft_s": 1e-6}
        return r.model_copy(update=update)

    changed = with_measured(report, "code", change)
    return changed.model_copy(update={"host_load": quiet_load()})


def cv_message(report: Report, rules: int = 3) -> str:
    found = verdict(report, rules=rules).reasons
    return next(f.message for f in found if f.code == "decode-cv-high")


def per_token(decode: list[float]) -> list[float]:
    return [1e6 / d for d in decode]  # microseconds per token


def test_cpu_time_in_step_with_the_runs_off_the_median_is_the_cause(a: Report) -> None:
    run = [0.8 * t for t in per_token(NOISY)]  # the same share of every run on a CPU
    text = cv_message(accounted(a, NOISY, run, [0.0] * 5))
    assert (
        "scheduler: the engine's CPU time per token moved with the runs off the median (#1 -15.8 "
        "% CPU time per token vs -15.8 % time per token, #2 +6.3 % CPU time per token vs +6.3 % "
        "time per token, #3 -14.4 % CPU time per token vs -14.4 % time per token): the same work "
        "took longer on the CPU, or there was more of it"
    ) in text
    assert not verdict(accounted(a, NOISY, run, [0.0] * 5)).valid  # named, not forgiven


def test_the_workers_cpu_time_is_the_one_judged_where_the_account_has_it(a: Report) -> None:
    run = [0.8 * t for t in per_token(NOISY)]
    text = cv_message(accounted(a, NOISY, run, [0.0] * 5, worker=True))
    assert "scheduler: the engine worker's CPU time per token moved with the runs off" in text
    assert "(#1 -15.8 % CPU time per token vs -15.8 % time per token," in text
    # the worker steady while the others poll: no cause, whatever the engine's total did
    steady = cv_message(accounted(a, NOISY, [5_000.0] * 5, [0.0] * 5, worker=True))
    assert "the engine worker's CPU time per token within ±0.0 % of its median" in steady


def test_waiting_for_a_cpu_is_the_cause_of_a_slow_run(a: Report) -> None:
    wait = [0.0, 0.0, 600.0, 0.0, 0.0]  # #2 runs 625 us per token slower than the median
    text = cv_message(accounted(a, NOISY, [5_000.0] * 5, wait))
    assert (
        "scheduler: the engine's threads waited for a CPU in the runs off the median (#2 +600 "
        "of +625 us per token): the CPUs were busy with other work; not with #1, #3"
    ) in text


def test_neither_is_said_with_what_was_checked(a: Report) -> None:
    text = cv_message(accounted(a, NOISY, [5_000.0, 5_050.0, 4_990.0, 5_000.0, 5_000.0], [0.0] * 5))
    assert text.endswith(
        "no drift across the runs; scheduler: the engine's CPU time per token within ±1.0 % of "
        "its median and its wait for a CPU 0 us per token of 9,901; neither followed the runs off "
        "the median (#1, #2, #3): its threads were idle longer between steps)"
    )
    assert "no cause found" in text


def test_without_the_account_or_under_rules_2_nothing_is_said_of_it(a: Report) -> None:
    report = accounted(a, NOISY, [5_000.0] * 5, [0.0] * 5)
    assert report.bench is not None
    records = [r.model_copy(update={"cpu": None}) for r in report.bench.records]
    old = report.model_copy(update={"bench": report.bench.model_copy(update={"records": records})})
    assert "scheduler" not in cv_message(old)
    assert "scheduler" not in cv_message(report, rules=2)


# ---------------------------------------------------------------------------------------------
# between runs

STEADY = [100.0, 101.0, 99.0, 100.0, 100.5]
SLOWER = [v * 0.85 for v in STEADY]


def test_a_rerun_whose_worker_needed_more_cpu_time_names_it(a: Report) -> None:
    original = accounted(a, STEADY, [0.8 * t for t in per_token(STEADY)], [0.0] * 5, worker=True)
    rerun = accounted(a, SLOWER, [0.8 * t for t in per_token(SLOWER)], [0.0] * 5, worker=True)
    result = judge(original, rerun)
    assert result.verdict == "DIFFERENT"
    assert result.summary.endswith(
        "outside their bands (code decode TPS), lower (worse); scheduler: the re-run's engine "
        "needed more CPU time"
    )
    assert result.causes[0] == (
        "scheduler: code decode TPS -15.0 %: the re-run's engine worker's threads needed more CPU "
        "time for the same tokens (engine worker's CPU time per token +17.6 % (8,000 -> 9,412 us) "
        "against time per token +17.6 %): the same work ran slower on the CPU, or there was less "
        "or more of it"
    )


def test_a_rerun_whose_worker_waited_or_did_neither(a: Report) -> None:
    original = accounted(a, STEADY, [8_000.0] * 5, [0.0] * 5, worker=True)
    waited = accounted(a, SLOWER, [8_000.0] * 5, [1_500.0] * 5, worker=True)
    result = judge(original, waited)
    assert result.causes[0] == (
        "scheduler: code decode TPS -15.0 %: the re-run's engine worker's threads waited for a CPU "
        "(+1,500 of +1,765 us per token): the CPUs were busy with other work"
    )
    idle = judge(original, accounted(a, SLOWER, [8_000.0] * 5, [0.0] * 5, worker=True))
    assert "scheduler" not in idle.summary
    assert idle.causes[-1] == (
        "scheduler: engine worker's CPU time per token +0.0 % (8,000 -> 8,000 us) against time "
        "per token +17.6 %: not the cause of code decode TPS -15.0 %"
    )
    without = judge(a, accounted(a, SLOWER, [8_000.0] * 5, [0.0] * 5, worker=True))
    assert not any("scheduler" in c for c in without.causes)  # one side has no account


def prefill_accounted(report: Report, slower: float, cpu_share: float) -> Report:
    """The report with its prefill-512 runs ``slower`` times as long (first token and wall), each
    carrying an account whose worker ran ``cpu_share`` of its wall time; the stored prefill
    headlines dropped, so the records speak."""
    assert report.bench is not None
    records = []
    for r in report.bench.records:
        if r.prompt == "prefill-512" and r.phase == "prefill" and r.ttft_s and r.wall_s:
            wall_us = r.wall_s * slower * 1e6
            cpu = CpuAccount(
                engine_run_us=wall_us, engine_wait_us=0.0, worker_run_us=wall_us * cpu_share,
                worker_wait_us=0.0, client_run_us=10.0, client_wait_us=0.0,
            )  # fmt: skip
            r = r.model_copy(
                update={"ttft_s": r.ttft_s * slower, "wall_s": r.wall_s * slower, "cpu": cpu}
            )
        records.append(r)
    prefill = [pf.model_copy(update={"headline": None}) for pf in report.bench.prefill]
    bench = report.bench.model_copy(update={"records": records, "prefill": prefill})
    return report.model_copy(update={"bench": bench})


def test_a_slower_prefill_whose_worker_needed_more_cpu_time_names_it(a: Report) -> None:
    original = prefill_accounted(a, 1.0, 0.9)
    result = judge(original, prefill_accounted(a, 1.2, 0.9))
    assert result.verdict == "DIFFERENT"
    cause = next(c for c in result.causes if c.startswith("scheduler: prefill 512"))
    assert "the re-run's engine worker's threads needed more CPU time for the same requests" in (
        cause
    )
    assert "CPU time per request +20.0 %" in cause and "against time per request +20.0 %" in cause
    # the same CPU time for a slower prefill: not the cause
    steady = judge(original, prefill_accounted(a, 1.2, 0.75))
    assert any(
        c.startswith("scheduler: engine worker's CPU time per request +0.0 %")
        and c.endswith("not the cause of prefill 512 -16.7 %")
        for c in steady.causes
    )
