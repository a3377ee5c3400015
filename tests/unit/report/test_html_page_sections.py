"""The report page's sections for what the README cites: the roofline, the `vllm bench serve`
cross-check, energy per token, the load client's CPU, where warnings hit, the timeline's legend
and kernel names as people write them. Each is drawn from the committed H200 reports (their
copies in tests/fixtures/, read with the key their signature names) and kit's fixtures,
rendered for real, and checked against the report's own values; each is absent, or says "not
measured", without its data."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="kit's html extra: pip install 'kit[html]'")

from kit.enginelog import EngineChoices
from kit.figures import AGREEMENT_PCT
from kit.probe.findings import BENIGN_REASONS
from kit.report.describe import kernels_text, plain_name
from kit.report.files import read_report
from kit.report.html import render_html
from kit.report.schema import Report
from kit.report.validity import CLIENT_BUSY_PCT
from kit.signing import SignatureCheck, load_public_key
from kit.signing.keys import fingerprint
from kit.vllm_bench import TTFT_TOLERANCE_MS
from kit.vllm_bench.points import AGREEMENT

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KEYS = sorted((FIXTURES / "examples" / "keys").glob("*.pub"))
EXAMPLES = sorted((FIXTURES / "examples" / "reports").glob("*.report.json"))
RESULTS = FIXTURES / "results"
SWEEP = RESULTS / "h200-llama8b-bf16-sweep-2026-12-03" / "report.json"  # cross-check, JIT
SWEEP_S2 = RESULTS / "h200-llama8b-bf16-sweep-2026-12-02-s2" / "report.json"  # interrupted
CPU = FIXTURES / "reports" / "cpu-tiny-a.json"  # unsigned, no NVML


def read(path: Path) -> tuple[Report, SignatureCheck]:
    """A committed report, verified with the key its signature names (unsigned ones allowed)."""
    signed = json.loads(path.read_bytes()).get("signatures")
    keyid = signed[0]["keyid"] if signed else None
    key = next((k for k in KEYS if fingerprint(load_public_key(k)) == keyid), None)
    assert key or not signed, f"{path}: signed by no key in {KEYS[0].parent}"
    pub = load_public_key(key) if key else None
    report, check = read_report(path, pub, allow_unsigned=key is None)
    assert key is None or check.valid, path
    return report, check


def section(page: str, sid: str) -> str | None:
    found = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    return found.group(1) if found else None


def text(fragment: str) -> str:
    """The fragment's text, tags stripped and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def rows(fragment: str) -> list[list[str]]:
    """Each body row of the fragment's tables, as its cells' text."""
    out = []
    for tr in re.findall(r"<tr>(.*?)</tr>", fragment, re.S):
        if "<th" not in tr:
            out.append([text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)])
    return out


def rendered(report: Report, check: SignatureCheck, sid: str) -> str | None:
    return section(render_html(report, check), sid)


def f1(value: float) -> str:
    return f"{value:,.1f}"


def f2(value: float) -> str:
    return f"{value:,.2f}"


# ---------------------------------------------------------------------------------------------
# roofline


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_roofline_shows_each_prompts_bound_and_achieved_fraction(path: Path) -> None:
    report, check = read(path)
    roof = report.roofline
    assert roof is not None
    body = rendered(report, check, "roofline")
    assert body is not None
    table = {r[0]: r for r in rows(body)}
    assert set(table) == {p.prompt for p in roof.prompts}
    for p in roof.prompts:
        assert p.measured_decode_tps is not None and p.efficiency_pct is not None
        assert p.plain_efficiency_pct is not None
        assert table[p.prompt][1:6] == [
            f1(p.measured_decode_tps),
            f1(p.bound_tps),
            f1(p.efficiency_pct),
            f1(p.plain_bound_tps),
            f1(p.plain_efficiency_pct),
        ]
    words = text(body)
    assert f"{roof.bandwidth.used_gbps:,.0f} GB/s per GPU ({roof.bandwidth.used_source}" in words
    assert roof.formula in words
    assert all(note in words for note in roof.notes)


def test_roofline_says_not_measured_with_the_reports_reason_else_is_absent() -> None:
    report, check = read(EXAMPLES[0])
    bare = report.model_copy(update={"roofline": None})
    assert rendered(bare, check, "roofline") is None
    why = "roofline failed: no config.json in the served checkpoint"
    failed = bare.model_copy(update={"notes": [*bare.notes, why]})
    body = rendered(failed, check, "roofline")
    assert body is not None
    assert text(body).strip().endswith(f"not measured: {why}")
    assert "<table" not in body


# ---------------------------------------------------------------------------------------------
# the `vllm bench serve` cross-check


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_crosscheck_per_prompt_shows_agreement_both_figures_and_tolerance(path: Path) -> None:
    report, check = read(path)
    vb = report.vllm_bench
    assert vb is not None and vb.agree is not None
    body = rendered(report, check, "crosscheck")
    assert body is not None
    assert f'id="crosscheck-agree">agree: {str(vb.agree).lower()}</div>' in body
    words = text(body)
    assert f"±{AGREEMENT_PCT:g} %" in words and f"±{TTFT_TOLERANCE_MS:g} ms" in words
    table = {r[0]: r for r in rows(body)}
    for p in vb.prompts:
        assert p.kit_decode_tps and p.decode_tps and p.decode_delta_pct is not None
        assert p.kit_ttft_ms and p.mean_ttft_ms and p.ttft_delta_ms is not None
        assert table[p.prompt][1:8] == [
            f"agree: {str(p.agree).lower()}",
            f2(p.kit_decode_tps),
            f2(p.decode_tps),
            f"{p.decode_delta_pct:+,.2f}",
            f2(p.kit_ttft_ms),
            f2(p.mean_ttft_ms),
            f"{p.ttft_delta_ms:+,.2f}",
        ]
    assert all(note in words for note in vb.notes)


def test_the_committed_payloads_hold_both_verdicts() -> None:
    verdicts = {read(p)[0].vllm_bench.agree for p in EXAMPLES}  # type: ignore[union-attr]
    assert verdicts == {True, False}  # so both banners above were rendered


def test_crosscheck_per_load_point_shows_every_figure_of_both_tools() -> None:
    report, check = read(SWEEP)
    vb = report.vllm_bench
    assert vb is not None and vb.points
    body = rendered(report, check, "crosscheck")
    assert body is not None
    assert f"agree: {str(vb.agree).lower()}</div>" in body
    assert f"{', '.join(AGREEMENT)} each within ±{AGREEMENT_PCT:g} %" in text(body)
    table = {r[0]: r for r in rows(body)}
    assert list(table) == [p.label for p in vb.points]
    for p in vb.points:
        cells = table[p.label]
        assert cells[1] == f"agree: {str(p.agree).lower()}"
        for f in p.figures:
            assert f.kit is not None and f.vllm is not None and f.delta_pct is not None
            assert f"{f2(f.kit)} / {f2(f.vllm)} ({f.delta_pct:+.2f} %)" in cells


def test_crosscheck_not_measured_when_asked_for_and_missing_absent_when_not_asked() -> None:
    report, check = read(SWEEP_S2)
    assert report.vllm_bench is None and report.recipe["bench"]["vllm_bench"] is not None
    body = rendered(report, check, "crosscheck")
    assert body is not None
    words = text(body).strip()
    assert words.startswith("Cross-check") and "not measured: " in words
    assert f"the run is incomplete: {report.incomplete_reason}" in words

    failed = report.model_copy(update={"notes": ["vllm bench serve failed: exit 1"]})
    assert "not measured: vllm bench serve failed: exit 1" in text(
        rendered(failed, check, "crosscheck") or ""
    )

    cpu, unsigned = read(CPU)
    assert cpu.vllm_bench is None and cpu.recipe["bench"].get("vllm_bench") is None
    assert rendered(cpu, unsigned, "crosscheck") is None


# ---------------------------------------------------------------------------------------------
# energy per token


def counter_joules(report: Report, start: float, end: float) -> float:
    """Energy of every sampled GPU between its first and last reading in [start, end], from
    the energy counter (mJ), as an independent check of the page's figure."""
    s = report.gpu_sampling
    assert s is not None
    total = 0.0
    for gpu in s.gpus:
        inside = [x for x in s.samples if x.gpu == gpu.index and start <= x.t_s <= end]
        first, last = inside[0].energy_mj, inside[-1].energy_mj
        assert isinstance(first, int) and isinstance(last, int)
        total += (last - first) / 1000
    return total


def windows(report: Report) -> list[tuple[float, float]]:
    s = report.gpu_sampling
    assert s is not None
    starts = [m.t_s for m in s.marks if m.label == "measure_start"]
    ends = [m.t_s for m in s.marks if m.label == "measure_end"]
    return list(zip(starts, ends, strict=True))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_energy_shows_the_reports_figure_and_each_prompts_window(path: Path) -> None:
    report, check = read(path)
    assert report.energy_per_token_j is not None and report.bench is not None
    body = rendered(report, check, "energy")
    assert body is not None
    assert f"{report.energy_per_token_j:.3f} J per generated token" in text(body)
    table = rows(body)
    assert [r[0] for r in table] == [p.prompt for p in report.bench.prompts]
    for r, (start, end) in zip(table, windows(report), strict=True):
        tokens = sum(
            x.completion_tokens or 0
            for x in report.bench.records
            if x.phase == "measured" and x.prompt == r[0]
        )
        joules = counter_joules(report, start, end)
        assert r[3:] == [f"{tokens:,}", f"{joules / tokens:.3f}"]
        assert r[2] == f"{joules:,.0f}"


@pytest.mark.parametrize("path", [SWEEP, SWEEP_S2], ids=["sweep", "sweep-s2"])
def test_energy_of_a_sweep_without_the_figure_is_computed_per_load_point(path: Path) -> None:
    report, check = read(path)
    assert report.energy_per_token_j is None and report.bench is not None
    body = rendered(report, check, "energy")
    assert body is not None
    assert "J per generated token over the measured span" not in body
    table = rows(body)
    points = report.bench.load_points
    assert [r[0] for r in table] == [p.label for p in points]
    for r, p, (start, end) in zip(table, points, windows(report), strict=True):
        joules = counter_joules(report, start, end)
        assert r[3:] == [f"{p.output_tokens:,}", f"{joules / p.output_tokens:.3f}"]


def test_energy_not_measured_with_the_samplers_reason_and_absent_without_sampling() -> None:
    report, check = read(CPU)
    s = report.gpu_sampling
    assert s is not None and not isinstance(s.energy_j, float)
    body = rendered(report, check, "energy")
    assert body is not None
    assert f"not measured: {s.energy_j.reason}" in text(body)
    assert "<table" not in body
    assert rendered(report.model_copy(update={"gpu_sampling": None}), check, "energy") is None


# ---------------------------------------------------------------------------------------------
# the load client's CPU


def test_client_cpu_per_load_point_flagged_when_busy_and_not_measured_when_missing() -> None:
    report, check = read(SWEEP)
    b = report.bench
    assert b is not None and all(p.client_cpu_pct is not None for p in b.load_points)
    body = rendered(report, check, "client")
    assert body is not None
    assert f"{CLIENT_BUSY_PCT:g} %" in text(body)
    ordered = sorted(b.load_points, key=lambda p: p.level)
    assert rows(body) == [
        [
            p.label,
            f"{p.client_cpu_pct:.1f}",
            "client may have set the pace" if (p.client_cpu_pct or 0) >= CLIENT_BUSY_PCT else "no",
        ]
        for p in ordered
    ]
    first, last = ordered[0], ordered[-1]
    changed = [
        p.model_copy(update={"client_cpu_pct": None})
        if p is first
        else p.model_copy(update={"client_cpu_pct": CLIENT_BUSY_PCT})
        if p is last
        else p
        for p in b.load_points
    ]
    edited = report.model_copy(update={"bench": b.model_copy(update={"load_points": changed})})
    table = {r[0]: r for r in rows(rendered(edited, check, "client") or "")}
    assert table[first.label][1:] == ["not measured", "not measured"]
    assert table[last.label][1:] == [f"{CLIENT_BUSY_PCT:.1f}", "client may have set the pace"]


def test_client_cpu_is_absent_without_load_points() -> None:
    report, check = read(EXAMPLES[0])
    assert report.bench is not None and not report.bench.load_points
    assert rendered(report, check, "client") is None


# ---------------------------------------------------------------------------------------------
# where warnings hit


def test_jit_warning_names_the_kernel_and_says_the_report_keeps_no_time() -> None:
    report, check = read(SWEEP)
    choices = report.server.engine_choices if report.server else None
    assert choices is not None and choices.jit_kernels
    body = rendered(report, check, "events")
    assert body is not None
    jit = [r for r in rows(body) if r[0] == "engine JIT compile while serving"]
    assert [r[1] for r in jit] == choices.jit_kernels
    for r in jit:
        assert r[2].startswith("not recorded in the report") and choices.source in r[2]
        assert r[3] == "not recorded in the report"
        assert not re.search(r"\d+(\.\d+)? s\b", r[2])  # no time made up


def test_clock_events_give_the_time_and_the_load_point_they_hit() -> None:
    report, check = read(SWEEP)
    s, b = report.gpu_sampling, report.bench
    assert s is not None and b is not None
    spans = list(zip((p.label for p in b.load_points), windows(report), strict=True))
    hits: dict[tuple[int, str], list[tuple[float, str, float]]] = {}
    for x in s.samples:
        where = next(((n, a) for n, (a, z) in spans if a <= x.t_s <= z), None)
        if where is None or not isinstance(x.clock_event_reasons, list):
            continue
        for reason in set(x.clock_event_reasons) - BENIGN_REASONS:
            hits.setdefault((x.gpu, reason), []).append((x.t_s, *where))
    assert hits, "the committed sweep ran power-capped"
    body = rendered(report, check, "events")
    assert body is not None
    table = {r[1]: r for r in rows(body) if r[0] == "GPU clocks event"}
    assert set(table) == {f"GPU {gpu} {reason}" for gpu, reason in hits}
    for (gpu, reason), seen in hits.items():
        (t0, name, start), t1 = seen[0], seen[-1][0]
        when = table[f"GPU {gpu} {reason}"][2]
        assert when.startswith(f"{t0:.1f}-{t1:.1f} s after sampling started")
        n = len(seen)
        assert f"first {t0 - start:.1f} s into {name} ({n} reading{'s' * (n != 1)})" in when
        assert table[f"GPU {gpu} {reason}"][3] == ", ".join(dict.fromkeys(n for _, n, _ in seen))
    assert s.started_at in text(body)


def test_events_section_absent_without_a_warning_with_a_place() -> None:
    report, check = read(EXAMPLES[0])
    choices = report.server.engine_choices if report.server else None
    assert choices is None or not choices.jit_kernels
    assert rendered(report, check, "events") is None
    # the same run with a kernel compiled while serving gains the section
    assert report.server is not None
    jit = EngineChoices(
        linear_kernels=[],
        quant_method=None,
        w4a16_path=None,
        w4a16_fallback_reason=None,
        cpu_kernel_build=None,
        attention_backend=None,
        source="server.log",
        jit_kernels=["some_kernel"],
    )
    server = report.server.model_copy(update={"engine_choices": jit})
    body = rendered(report.model_copy(update={"server": server}), check, "events")
    assert body is not None and [r[1] for r in rows(body)] == ["some_kernel"]


# ---------------------------------------------------------------------------------------------
# the timeline's legend, kernel names


@pytest.mark.parametrize(
    "path", [*EXAMPLES, SWEEP, SWEEP_S2], ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_timeline_names_the_prefill_probe_only_when_the_run_has_one(path: Path) -> None:
    report, check = read(path)
    assert report.bench is not None
    probed = any(r.phase == "prefill" for r in report.bench.records)
    body = rendered(report, check, "timeline")
    assert body is not None
    caption = body.rsplit("</svg>", 1)[1]
    assert ("orange: prefill probe" in body) is probed  # the chart's title
    assert ("prefill probe" in text(caption)) is probed


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("AttentionBackendEnum.FLASH_ATTN", "FLASH_ATTN"),
        ("_Backend.FLASHINFER", "FLASHINFER"),
        ("FLASH_ATTN", "FLASH_ATTN"),
        ("CPU_ATTN", "CPU_ATTN"),
        ("Flash Attention", "Flash Attention"),
        ("vllm._C_AVX2", "vllm._C_AVX2"),
        (None, None),
    ],
)
def test_plain_name_turns_an_enum_repr_into_its_member(name: str | None, shown: str) -> None:
    assert plain_name(name) == shown


def test_kernel_names_print_without_the_enum_class_in_every_view() -> None:
    report, check = read(EXAMPLES[0].with_name("h200-tp1-rerun.report.json"))
    choices = report.server.engine_choices if report.server else None
    assert choices is not None and choices.attention_backend is not None
    assert "." in choices.attention_backend  # the report stores the repr the engine logged
    member = choices.attention_backend.rsplit(".", 1)[1]
    assert (
        kernels_text(report) == choices.model_copy(update={"attention_backend": member}).summary()
    )
    assert kernels_text(report, short=True) is not None
    assert choices.attention_backend not in (kernels_text(report, short=True) or "")
    page = render_html(report, check)
    assert choices.attention_backend not in page
    assert f"attention {member}" in text(section(page, "verdict") or "")
