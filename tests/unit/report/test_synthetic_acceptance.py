"""A synthetic-acceptance run in its report: the target and the achieved acceptance recorded,
the verdict's tolerance rule, comparability with other runs, and the label every view gives
it (docs/synthetic-acceptance.md).

The reports are cpu-tiny runs as kit writes them (tests/factories.py), given a synthetic
acceptance by ``--set`` and spec-decode counters set by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from factories import build_report

from kit.errors import VerificationFailed
from kit.metrics import add_spec, spec_decode_from_counts
from kit.report import Report
from kit.report.causes import ACCEPTANCE_EPSILON, ACCEPTANCE_Z, step_sd, synthetic_check
from kit.report.comparability import comparability
from kit.report.compare import compare_reports, label
from kit.report.describe import spec_text, synthetic_label
from kit.report.files import write_report
from kit.report.reproduction import judge
from kit.report.show import markdown_row, show_table
from kit.report.table.cells import row
from kit.report.validity import verdict
from kit.report.verify import verify_report

SA = "speculative.synthetic_acceptance"
N = 2000  # drafts per prompt window
MISSED = "synthetic-acceptance-missed"


def report_at(fixtures_dir: Path, *sets: str) -> Report:
    return build_report(fixtures_dir, overrides=tuple(f"{SA}.{s}" for s in sets))


def counted(report: Report, rates: dict[str, list[float]], short: int = 0) -> Report:
    """The report with each named prompt's counters at ``rates`` over N drafts (``short``
    draft tokens fewer than N × k), the synthetic check and verdict recomputed."""
    assert report.bench is not None
    prompts = []
    for p in report.bench.prompts:
        if p.prompt in rates:
            per_pos = [round(N * r) for r in rates[p.prompt]]
            k = len(per_pos)
            sd = spec_decode_from_counts(N, N * k - short, sum(per_pos), per_pos)
            p = p.model_copy(update={"spec_decode": sd})
        prompts.append(p)
    overall = add_spec(p.spec_decode for p in prompts if p.spec_decode is not None)
    bench = report.bench.model_copy(update={"prompts": prompts, "spec_decode": overall})
    out = report.model_copy(update={"bench": bench})
    out = out.model_copy(update={"synthetic_acceptance": synthetic_check(out)})
    return out.model_copy(update={"validity": verdict(out, out.host, out.gpu_sampling)})


def geometric(c: float, k: int = 7) -> list[float]:
    return [c**i for i in range(1, k + 1)]


def missed(report: Report) -> list[str]:
    return [f.message for f in report.validity.reasons if f.code == MISSED]


# ---------------------------------------------------------------------------------------------
# the tolerance


def test_step_sd_is_the_spread_of_accepted_tokens_per_step() -> None:
    rates = [0.9, 0.7, 0.7, 0.2]
    # P(A = j) = p_j - p_(j+1), with p_0 = 1 and p_(k+1) = 0
    p = [1.0, *rates, 0.0]
    probs = [p[j] - p[j + 1] for j in range(len(rates) + 1)]
    mean = sum(j * q for j, q in enumerate(probs))
    var = sum((j - mean) ** 2 * q for j, q in enumerate(probs))
    assert math.isclose(mean, sum(rates))
    assert math.isclose(step_sd(rates), math.sqrt(var))
    assert step_sd([1.0, 1.0, 0.0]) == 0.0  # a step schedule of whole tokens never varies


# ---------------------------------------------------------------------------------------------
# the verdict


def test_counters_at_the_target_pass(fixtures_dir: Path) -> None:
    report = counted(report_at(fixtures_dir, "conditional=0.8"), {
        "narrative": geometric(0.8), "code": geometric(0.8),
    })  # fmt: skip
    assert missed(report) == []
    check = report.synthetic_acceptance
    assert check is not None and [w.window for w in check.windows] == ["narrative", "code"]
    assert all(w.met for w in check.windows)
    w = check.windows[0]
    assert (w.drafts, w.draft_tokens, w.shortfall) == (N, N * 7, 0.0)
    tol = ACCEPTANCE_Z * math.sqrt(0.8 * 0.2 / N) + ACCEPTANCE_EPSILON
    assert math.isclose(w.position_tolerance[0], tol)
    mean_tol = ACCEPTANCE_Z * step_sd(geometric(0.8)) / math.sqrt(N) + ACCEPTANCE_EPSILON
    assert math.isclose(w.mean_tolerance, mean_tol)


def test_a_position_off_its_target_fails_and_is_named(fixtures_dir: Path) -> None:
    off = geometric(0.8)
    off[2] = 0.45  # target 0.512
    report = counted(report_at(fixtures_dir, "conditional=0.8"), {
        "narrative": off, "code": geometric(0.8),
    })  # fmt: skip
    assert not report.validity.valid
    tol = ACCEPTANCE_Z * math.sqrt(0.512 * 0.488 / N) + ACCEPTANCE_EPSILON
    assert missed(report) == [
        f"narrative: vLLM's counters over 2,000 drafts miss the synthetic target: position 3 "
        f"rate 0.4500, target 0.5120, tolerance ±{tol:.4f} (tolerance: 4 standard errors + "
        "0.005): the engine did not accept at the rates it was given"
    ]
    check = report.synthetic_acceptance
    assert check is not None and [w.met for w in check.windows] == [False, True]


def test_a_mean_off_its_target_fails_though_each_position_is_within(fixtures_dir: Path) -> None:
    low = [r - 0.035 for r in geometric(0.8)]  # each within its own ±0.04, all the same way
    report = counted(report_at(fixtures_dir, "conditional=0.8"), {"narrative": low, "code": low})
    messages = missed(report)
    assert len(messages) == 2 and all("position" not in m for m in messages)
    assert messages[1].startswith(
        "code: vLLM's counters over 2,000 drafts miss the synthetic target: accepted per draft "
    )


def test_the_wrong_target_fails_the_run(fixtures_dir: Path) -> None:
    # the draft accepts at c = 0.6 while vLLM was told 3.35 per step (c = 0.81)
    report = counted(
        report_at(fixtures_dir, "mean=3.35", "convention=accepted_per_draft"),
        {"narrative": geometric(0.6), "code": geometric(0.6)},
    )
    assert not report.validity.valid and len(missed(report)) == 2
    assert "accepted per draft 1.458, target 3.350" in missed(report)[0]


def test_steps_cut_short_widen_the_tolerance_below(fixtures_dir: Path) -> None:
    # a step schedule: positions 1-3 always, 4 at 0.35, none after
    sets = ("mean=4.35", "convention=acceptance_length", "profile=step")
    target = [1.0, 1.0, 1.0, 0.35, 0.0, 0.0, 0.0]
    cut = [1.0, 1.0, 0.96, 0.33, 0.0, 0.0, 0.0]  # 4 % of steps lacked position 3 and after
    full = counted(report_at(fixtures_dir, *sets), {"narrative": cut, "code": target})
    assert len(missed(full)) == 1 and "position 3 rate 0.9600, target 1.0000" in missed(full)[0]
    # the counters show 5 draft tokens short per 100 steps: the rates may lie 0.05 lower
    short = counted(report_at(fixtures_dir, *sets), {"narrative": cut, "code": target}, short=100)
    assert missed(short) == []


def test_a_real_acceptance_run_has_no_check(fixtures_dir: Path) -> None:
    report = build_report(fixtures_dir)
    assert report.synthetic_acceptance is None and synthetic_check(report) is None
    assert "synthetic_acceptance" not in report.model_dump(mode="json")


def test_the_report_records_target_and_achieved_and_verify_recomputes_them(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    report = report_at(fixtures_dir, "mean=4.35", "convention=acceptance_length", "profile=step")
    check = report.synthetic_acceptance  # written by finish_report, as for every run
    assert check is not None
    t = check.target
    assert (t.form, t.mean, t.convention, t.profile) == ("mean", 4.35, "acceptance_length", "step")
    assert t.rates[:3] == [1.0, 1.0, 1.0] and math.isclose(t.acceptance_length, 4.35)
    assert report.bench is not None
    assert [w.per_position_rate for w in check.windows] == [
        p.spec_decode.per_position_rate for p in report.bench.prompts if p.spec_decode
    ]
    # the factory's counters (c = 0.78) miss a step schedule by far
    assert not report.validity.valid and len(missed(report)) == 2
    checklist = verify_report(write_report(report, tmp_path / "ok"), allow_unsigned=True)
    assert checklist.item("summaries").ok and checklist.item("validity").ok
    forged = check.model_copy(update={"windows": [w.model_copy(update={"met": True})
                                                  for w in check.windows]})  # fmt: skip
    bad = report.model_copy(update={"synthetic_acceptance": forged})
    checklist = verify_report(write_report(bad, tmp_path / "bad"), allow_unsigned=True)
    assert checklist.failed == ["summaries"]
    assert any("synthetic_acceptance" in p for p in checklist.item("summaries").problems)


# ---------------------------------------------------------------------------------------------
# comparability


def test_synthetic_and_real_acceptance_do_not_compare(fixtures_dir: Path) -> None:
    real = build_report(fixtures_dir)
    synthetic = report_at(fixtures_dir, "conditional=0.8")
    diffs = [d for d in comparability(real, synthetic) if d.aspect == "acceptance"]
    assert len(diffs) == 1 and diffs[0].refuses
    assert diffs[0].detail == (
        "the draft's real vs synthetic, target AL 4.16 (geometric, c 0.8): only like acceptance "
        "compares"
    )
    # the acceptance aspect says it; serving does not list the section again
    assert not any("synthetic_acceptance" in d.detail for d in comparability(real, synthetic))
    with pytest.raises(VerificationFailed, match="acceptance differs"):
        compare_reports(real, synthetic)
    assert judge(real, synthetic).verdict == "NOT COMPARABLE"


def test_two_targets_do_not_compare_and_one_target_does(fixtures_dir: Path) -> None:
    step = report_at(fixtures_dir, "mean=4.35", "convention=acceptance_length", "profile=step")
    geo = report_at(fixtures_dir, "mean=4.35", "convention=acceptance_length")
    diffs = [d for d in comparability(step, geo) if d.aspect == "acceptance"]
    assert len(diffs) == 1 and diffs[0].refuses
    assert diffs[0].detail.startswith(
        "synthetic target AL 4.35 (step) vs target AL 4.35 (geometric), rates 1/1/1/0.35/0/0/0 vs "
    )
    # the same rates stated another way are the same target
    rates = report_at(fixtures_dir, "rates=[1,1,1,0.35,0,0,0]")
    assert not [d for d in comparability(step, rates) if d.aspect == "acceptance"]
    same = [d for d in comparability(step, step) if d.aspect == "acceptance"]
    assert same == []


# ---------------------------------------------------------------------------------------------
# the label


def test_every_text_view_labels_a_synthetic_run(fixtures_dir: Path) -> None:
    report = report_at(fixtures_dir, "mean=4.35", "convention=acceptance_length", "profile=step")
    tag = "SYNTHETIC acceptance, target AL 4.35 (step)"
    assert synthetic_label(report) == tag
    assert synthetic_label(report, short=True) == "SYNTHETIC, target AL 4.35"
    assert spec_text(report).endswith(f", {tag}")
    assert tag in show_table(report)
    assert tag in markdown_row(report)
    assert label(report).endswith(f", {tag})")
    assert row(report, "r.json", "k").cells["acceptance"].endswith(", SYNTHETIC, target AL 4.35")
    ref = report_at(fixtures_dir, "conditional=0.5")
    assert synthetic_label(ref) == "SYNTHETIC acceptance, target AL 1.99 (geometric, c 0.5)"


def test_a_real_run_carries_no_label(fixtures_dir: Path) -> None:
    report = build_report(fixtures_dir)
    assert synthetic_label(report) is None
    assert "SYNTHETIC" not in show_table(report) + markdown_row(report) + label(report)
    assert "SYNTHETIC" not in row(report, "r.json", "k").cells["acceptance"]
