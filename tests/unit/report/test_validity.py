"""The validity verdict under rules 1: reasons in order, and what the host was doing when a
figure is noisy (report.host_load).

The reports are the committed cpu-tiny fixture (tests/fixtures/reports/README.md), given a
host_load, a noisy decode figure or another status where a test needs one, and validated back
into a Report the way ``kit report verify`` reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kit.metrics import spec_decode_from_counts
from kit.probe import HostLoad, ProcessCpu
from kit.report import Report
from kit.report.files import read_report
from kit.report.validity import verdict as verdict_now


def verdict(data: Report) -> Any:
    """The first rules (rules 1), which these tests pin: a report written under them keeps its
    verdict. tests/unit/report/test_causes.py tests rules 2."""
    return verdict_now(data, data.host, data.gpu_sampling, rules=1)


@pytest.fixture
def base(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports" / "cpu-tiny-a.json", allow_unsigned=True)[0]


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


def report(base: Report, load: HostLoad | None, narrative_cv: float | None = None) -> Report:
    out = base.model_copy(update={"host_load": load}).model_dump(mode="json")
    if narrative_cv is not None:
        [narrative] = [p for p in out["bench"]["prompts"] if p["prompt"] == "narrative"]
        narrative["decode_tps"]["cv_pct"] = narrative_cv
    return Report.model_validate(out)


def messages(data: Report) -> list[tuple[str, str, str]]:
    return [(f.code, f.severity, f.message) for f in verdict(data).reasons]


def test_the_fixture_is_quiet_and_steady(base: Report) -> None:
    data = report(base, None)
    assert data.host_load is None
    assert data.bench is not None
    assert all(p.decode_tps and (p.decode_tps.cv_pct or 0) <= 5 for p in data.bench.prompts)
    v = verdict(data)
    assert v.valid
    assert [f.code for f in v.reasons] == ["not-canonical"]


def test_a_noisy_decode_figure_names_the_busy_host(base: Report) -> None:
    v = verdict(report(base, NOISY, narrative_cv=7.5))
    assert not v.valid
    assert [(f.code, f.severity) for f in v.reasons] == [
        ("decode-cv-high", "error"),
        ("host-not-quiet", "warning"),
        ("not-canonical", "warning"),
    ]
    assert v.reasons[0].message == f"narrative: decode TPS CV 7.5% is above 5%; {NOT_QUIET}"
    assert v.reasons[1].message == NOT_QUIET


def test_without_host_load_the_messages_are_unchanged(base: Report) -> None:
    plain = messages(report(base, None, narrative_cv=7.5))
    assert [code for code, _, _ in plain] == ["decode-cv-high", "not-canonical"]
    assert plain[0][2] == "narrative: decode TPS CV 7.5% is above 5%"


def test_a_quiet_host_adds_nothing(base: Report) -> None:
    quiet = host_load(other_cpu_pct=2.0)
    assert messages(report(base, quiet, narrative_cv=7.5)) == messages(
        report(base, None, narrative_cv=7.5)
    )
    assert messages(report(base, quiet)) == messages(report(base, None))


def test_a_busy_host_with_steady_figures_is_only_a_warning(base: Report) -> None:
    v = verdict(report(base, NOISY))
    assert v.valid
    assert [f.code for f in v.reasons] == ["host-not-quiet", "not-canonical"]
    assert v.reasons[0].message == NOT_QUIET


def test_every_cause_seen_is_named_in_code_order(base: Report) -> None:
    load = host_load(other_cpu_pct=35.0, top_other=NOISY.top_other, steal_pct=7.6)
    v = verdict(report(base, load, narrative_cv=7.5))
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


def _report(base: Report, **over: object) -> Report:
    """The fixture as a complete, canonical DFlash run of one steady prompt, then ``over``."""
    data = base.model_dump(mode="json")
    data.update(status="complete", incomplete_reason=None, canonical=True, non_canonical=[])
    data["recipe"]["speculative"] = {"method": "dflash"}
    [narrative] = [p for p in data["bench"]["prompts"] if p["prompt"] == "narrative"]
    narrative.update(measured=5, usable=5)
    narrative["decode_tps"]["cv_pct"] = 3.0
    data["bench"].update(records=[], prompts=[narrative])
    data["bench"]["spec_decode"] = spec_decode_from_counts(10, 20, 10, [6, 4]).model_dump()
    data.update(over)
    return Report.model_validate(data)


def test_verdict_valid_and_reasons_ordered(base: Report) -> None:
    assert verdict(_report(base)).valid
    bad = _report(
        base,
        status="incomplete",
        incomplete_reason="server died",
        canonical=False,
        non_canonical=["ignore_eos"],
    ).model_dump(mode="json")
    bad["bench"]["prompts"][0].update(usable=3)
    bad["bench"]["prompts"][0]["decode_tps"]["cv_pct"] = 7.5
    bad["bench"]["spec_decode"] = None
    v = verdict(Report.model_validate(bad))
    assert not v.valid
    assert [f.code for f in v.reasons] == [
        "incomplete",
        "runs-ended-early",
        "decode-cv-high",
        "acceptance-missing",
        "not-canonical",
    ]
    assert v.reasons[2].message == "narrative: decode TPS CV 7.5% is above 5%"


def test_a_stream_delivered_in_one_burst_is_named(base: Report) -> None:
    out = base.model_dump(mode="json")
    measured = [r for r in out["bench"]["records"] if r["phase"] == "measured"]
    first = measured[0]
    n = len(first["text_chunk_times_s"])
    assert n >= 8
    # every chunk at the end of the stream: the client read them all at once
    first["text_chunk_times_s"] = [first["wall_s"] - 0.0002] * n
    v = verdict(Report.model_validate(out))
    burst = [f for f in v.reasons if f.code == "burst-delivery"]
    assert not v.valid and burst and burst[0].severity == "error"
    assert burst[0].message.startswith(
        f"1 of {len(measured)} measured requests arrived in one burst"
    )
    assert "burst-delivery" not in [f.code for f in verdict(base).reasons]


def test_a_load_point_whose_client_was_saturated_is_named(base: Report) -> None:
    from kit.bench.load import summarize_point

    measured = [r for r in base.bench.records if r.phase == "measured"] if base.bench else []
    recs = [r.model_copy(update={"phase": "load", "prompt": "concurrency-1", "sent_s": 0.0})
            for r in measured[:2]]  # fmt: skip
    point = summarize_point("concurrency-1", "concurrency", 1, recs, None)

    def with_cpu(pct: float) -> Report:
        out = base.model_dump(mode="json")
        out["bench"]["load_points"] = [
            point.model_copy(update={"client_cpu_pct": pct}).model_dump(mode="json")
        ]
        return Report.model_validate(out)

    v = verdict(with_cpu(96.5))
    busy = [f for f in v.reasons if f.code == "client-saturated"]
    assert not v.valid and busy and busy[0].severity == "error"
    assert busy[0].message.startswith(
        "concurrency-1: kit's load client used 96 % of a core at concurrency-1 (90 % or more)"
    )
    assert "client-saturated" not in [f.code for f in verdict(with_cpu(40.0)).reasons]


def test_a_kernel_compiled_while_serving_is_a_warning(base: Report) -> None:
    from kit.enginelog import parse_engine_log

    def with_log(text: str) -> Report:
        out = base.model_dump(mode="json")
        assert out["server"] is not None
        out["server"]["engine_choices"] = parse_engine_log(text).model_dump(mode="json")
        return Report.model_validate(out)

    line = "WARNING [jit_monitor.py:135] Triton kernel JIT compilation during inference: _k.\n"
    jit = [f for f in verdict(with_log(line)).reasons if f.code == "engine-jit-while-serving"]
    assert jit and jit[0].severity == "warning"
    assert jit[0].message.startswith("the engine compiled _k while serving")
    codes = [f.code for f in verdict(with_log("INFO nothing compiled\n")).reasons]
    assert "engine-jit-while-serving" not in codes


# the real line of the 2026-12-03 H200 DFlash2 run: vLLM met this shape in narrative warm-up #0
JIT_AT_WARMUP = (
    "(EngineCore pid=3014) WARNING 12-03 05:43:21 [jit_monitor.py:135] Triton kernel JIT "
    "compilation during inference: _prepare_dflash_inputs_kernel. This causes a latency spike; "
    "consider extending warmup to cover this shape/config.\n"
)


def test_a_compile_counts_only_inside_a_measured_request(fixtures_dir: Path) -> None:
    import datetime as dt

    from kit.enginelog import parse_engine_log

    path = fixtures_dir / "results" / "h200-dflash2-2026-12-03" / "int4-dflash2.report.json"
    run = read_report(path, allow_untrusted=True)[0]
    assert run.bench is not None and run.server is not None

    def jit(line: str, offset: int | None) -> list[str]:
        choices = parse_engine_log(line).model_copy(update={"log_utc_offset_s": offset})
        server = run.server.model_copy(update={"engine_choices": choices})  # type: ignore[union-attr]
        again = run.model_copy(update={"server": server})
        reasons = verdict_now(again, again.host, again.gpu_sampling).reasons
        return [f.message for f in reasons if f.code == "engine-jit-while-serving"]

    # the server's clock in UTC, or two hours ahead of it: warm-up #0, outside every figure
    assert jit(JIT_AT_WARMUP, 0) == []
    assert jit(JIT_AT_WARMUP.replace("05:43:21", "07:43:21"), 7200) == []
    # the same compile a second into measured run #0 stalled it, and the warning says where
    first = next(r for r in run.bench.records if r.phase == "measured")
    at = dt.datetime.fromisoformat(first.started_at) + dt.timedelta(seconds=1)
    inside = JIT_AT_WARMUP.replace("12-03 05:43:21", at.strftime("%m-%d %H:%M:%S"))
    [message] = jit(inside, 0)
    assert message.startswith(
        f"the engine compiled _prepare_dflash_inputs_kernel at {at:%m-%d %H:%M:%S} in "
        f"{first.prompt} measured #{first.index} while serving"
    )
    # where the server's clock is not known (a report written before it was recorded, a
    # server kit did not start), every compile counts, in the words such reports carry
    [old] = jit(JIT_AT_WARMUP, None)
    assert old.startswith("the engine compiled _prepare_dflash_inputs_kernel while serving")
    assert old.endswith("(warm up at each point's concurrency; the server log has the time)")


def test_a_compile_is_placed_by_its_line_where_kit_read_the_logs_size(fixtures_dir: Path) -> None:
    """Where kit started the server it read the log's size at each measured window's start and
    end: a compile's line offset in one of those ranges is inside, outside them it is not,
    whatever its whole logged second overlaps (a compile at the start of the quality probe, in
    the second the last measured run ended)."""
    import datetime as dt

    from kit.enginelog import parse_engine_log

    path = fixtures_dir / "results" / "h200-dflash2-2026-12-03" / "int4-dflash2.report.json"
    run = read_report(path, allow_untrusted=True)[0]
    assert run.bench is not None and run.server is not None
    last = [r for r in run.bench.records if r.phase == "measured"][-1]
    assert last.wall_s is not None
    end = dt.datetime.fromisoformat(last.started_at) + dt.timedelta(seconds=last.wall_s)
    line = JIT_AT_WARMUP.replace("12-03 05:43:21", end.strftime("%m-%d %H:%M:%S"))

    def jit(offset: int, spans: list[tuple[int, int]]) -> list[str]:
        choices = parse_engine_log(line)
        events = [e.model_copy(update={"offset": offset}) for e in choices.jit_events]
        update = {"log_utc_offset_s": 0, "jit_events": events, "measured_log_spans": spans}
        server = run.server.model_copy(update={"engine_choices": choices.model_copy(update=update)})  # type: ignore[union-attr]
        again = run.model_copy(update={"server": server})
        reasons = verdict_now(again, again.host, again.gpu_sampling).reasons
        return [f.message for f in reasons if f.code == "engine-jit-while-serving"]

    # the time alone says inside the last measured run (its end falls in that second)
    [by_time] = jit(5000, [])
    assert f"in {last.prompt} measured #{last.index}" in by_time
    # its line after the last window closed: outside, no warning
    assert jit(5000, [(100, 2000), (2100, 4000)]) == []
    # its line inside a window: inside
    [inside] = jit(3000, [(100, 2000), (2100, 4000)])
    assert "_prepare_dflash_inputs_kernel at" in inside and "in a measured window" in inside


def test_the_log_spans_are_the_logs_size_at_each_window(tmp_path: Path) -> None:
    from kit.measure import LogSpans

    log = tmp_path / "server.log"
    log.write_text("boot\n")
    spans = LogSpans(log)
    spans.mark("idle")
    spans.mark("measure_start")
    log.write_text("boot\nserving\n")
    spans.mark("measure_end")
    spans.mark("measure_end")  # a second end without a start adds nothing
    assert spans.spans == [(5, 13)]
    spans.mark("measure_start")
    log.unlink()
    spans.mark("measure_end")  # a log gone: nothing read, nothing recorded
    assert spans.spans == [(5, 13)]
