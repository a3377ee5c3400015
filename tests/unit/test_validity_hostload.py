"""The verdict names what the host was doing when a figure is noisy (report.host_load).

The report is the committed cpu-tiny fixture (tests/fixtures/reports/README.md), given a
host_load and, where a test needs one, a noisy decode figure, and dumped as JSON the way
``kit report verify`` reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.probe import HostLoad, ProcessCpu
from kit.report import Report
from kit.sign import read_report
from kit.validity import verdict

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "reports" / "cpu-tiny-a.json"

NOT_QUIET = (
    "host not quiet: other processes used 35 % of the CPU "
    "(2 cores, 12.0 s measured; top: cc1 30.2 s, python3 4.1 s)"
)


def host_load(**values: Any) -> HostLoad:
    base: dict[str, Any] = {
        "window_s": 12.0,
        "windows": 2,
        "samples": 26,
        "cores": 2,
        "busy_pct": 90.0,
        "steal_pct": 0.4,
        "own_cpu_pct": 55.0,
        "other_cpu_pct": 2.0,
        "loadavg_start": 1.1,
        "loadavg_end": 1.9,
        "top_other": [],
        "foreign_gpu_processes": None,
        "foreign_gpu_unavailable": "NVML not available",
        "error": None,
    }
    return HostLoad.model_validate({**base, **values})


NOISY = host_load(
    other_cpu_pct=35.0,
    top_other=[ProcessCpu(comm="cc1", cpu_s=30.2), ProcessCpu(comm="python3", cpu_s=4.1)],
)


def report(load: HostLoad | None, narrative_cv: float | None = None) -> dict[str, Any]:
    payload, _ = read_report(FIXTURE.read_bytes())
    data = Report.model_validate(payload).model_copy(update={"host_load": load})
    out = data.model_dump(mode="json")
    if narrative_cv is not None:
        [narrative] = [p for p in out["bench"]["prompts"] if p["prompt"] == "narrative"]
        narrative["decode_tps"]["cv_pct"] = narrative_cv
    return out


def messages(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f.code, f.severity, f.message) for f in verdict(data).reasons]


def test_the_fixture_is_quiet_and_steady() -> None:
    data = report(None)
    assert data["host_load"] is None
    assert all(p["decode_tps"]["cv_pct"] <= 5 for p in data["bench"]["prompts"])
    v = verdict(data)
    assert v.valid
    assert [f.code for f in v.reasons] == ["not-canonical"]


def test_a_noisy_decode_figure_names_the_busy_host() -> None:
    v = verdict(report(NOISY, narrative_cv=7.5))
    assert not v.valid
    assert [(f.code, f.severity) for f in v.reasons] == [
        ("decode-cv-high", "error"),
        ("host-not-quiet", "warning"),
        ("not-canonical", "warning"),
    ]
    assert v.reasons[0].message == f"narrative: decode TPS CV 7.5% is above 5%; {NOT_QUIET}"
    assert v.reasons[1].message == NOT_QUIET


def test_without_host_load_the_messages_are_unchanged() -> None:
    plain = messages(report(None, narrative_cv=7.5))
    assert [code for code, _, _ in plain] == ["decode-cv-high", "not-canonical"]
    assert plain[0][2] == "narrative: decode TPS CV 7.5% is above 5%"


def test_a_quiet_host_adds_nothing() -> None:
    quiet = host_load(other_cpu_pct=2.0)
    assert messages(report(quiet, narrative_cv=7.5)) == messages(report(None, narrative_cv=7.5))
    assert messages(report(quiet)) == messages(report(None))


def test_a_busy_host_with_steady_figures_is_only_a_warning() -> None:
    v = verdict(report(NOISY))
    assert v.valid
    assert [f.code for f in v.reasons] == ["host-not-quiet", "not-canonical"]
    assert v.reasons[0].message == NOT_QUIET


def test_every_cause_seen_is_named_in_code_order() -> None:
    load = host_load(other_cpu_pct=35.0, top_other=NOISY.top_other, steal_pct=7.6)
    v = verdict(report(load, narrative_cv=7.5))
    steal = (
        "CPU steal: the hypervisor gave 8 % of this VM's CPU time to other guests while measuring"
    )
    assert [f.code for f in v.reasons] == [
        "decode-cv-high",
        "cpu-steal",
        "host-not-quiet",
        "not-canonical",
    ]
    assert v.reasons[0].message == (
        f"narrative: decode TPS CV 7.5% is above 5%; {steal}; {NOT_QUIET}"
    )
