"""The host probe and the GPU sampler, on dumps recorded from two NVLinked H200s.

The fixtures are real readings (tests/fixtures/probe/README.md says from where); the no-GPU
path runs for real on a machine without an NVIDIA driver.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import platform
import re
from pathlib import Path
from typing import Any

import pytest

from kit.errors import BadInputError
from kit.probe import (
    GpuSample,
    GpuSampler,
    GpuSampling,
    HostProbe,
    Readings,
    Unavailable,
    anonymize_dump,
    build_sampling,
    collect_nvml_dump,
    energy_per_token_j,
    host_probe_from_dump,
    probe_findings,
    probe_host,
    probe_to_json,
    redact_value,
    window_energy,
)
from kit.probe.dump import strip_escapes
from kit.probe.nvml import as_reasons, constant

UUID0 = "GPU-00000000-0000-0000-0000-000000000001"


def _nvml_works() -> bool:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


needs_no_gpu = pytest.mark.skipif(_nvml_works(), reason="this machine has a working NVIDIA driver")


@pytest.fixture
def recorded(fixtures_dir: Path) -> Path:
    """tests/fixtures/probe: an anonymized dump and sampling from two H200s."""
    return fixtures_dir / "probe"


@pytest.fixture
def dump(recorded: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((recorded / "h200x2-nvml-dump.json").read_text())
    return data


@pytest.fixture
def host(dump: dict[str, Any]) -> HostProbe:
    return host_probe_from_dump(dump)


@pytest.fixture
def sampling(recorded: Path) -> GpuSampling:
    return GpuSampling.model_validate_json((recorded / "h200x2-sampling.json").read_text())


def calls(dump: dict[str, Any], gpu: int) -> dict[str, Any]:
    result: dict[str, Any] = dump["nvml"]["devices"][gpu]["calls"]
    return result


def rebuilt(sampling: GpuSampling, samples: list[GpuSample] | None = None) -> GpuSampling:
    """The sampling's summaries computed again, from its (possibly edited) readings."""
    return build_sampling(
        Readings(
            started_at=sampling.started_at,
            interval_s=sampling.interval_s,
            duration_s=sampling.duration_s,
            unavailable=sampling.unavailable,
            gpus=sampling.gpus,
            marks=sampling.marks,
            samples=sampling.samples if samples is None else samples,
        )
    )


def edit_window(sampling: GpuSampling, gpu: int, **update: Any) -> GpuSampling:
    """The sampling with one reading of ``gpu`` in the middle of the window changed."""
    assert sampling.window is not None
    middle = (sampling.window.start_s + sampling.window.end_s) / 2
    target = min((s for s in sampling.samples if s.gpu == gpu), key=lambda s: abs(s.t_s - middle))
    samples = [s.model_copy(update=update) if s is target else s for s in sampling.samples]
    return rebuilt(sampling, samples)


# ---------------------------------------------------------------------------------------------
# parsing the recorded dump


def test_gpus_driver_and_host_from_recorded_dump(host: HostProbe) -> None:
    assert host.nvml_error is None
    assert [g.index for g in host.gpus] == [0, 1]
    assert {g.name for g in host.gpus} == {"NVIDIA H200"}
    assert host.driver.driver_version == "580.159.04"
    assert host.driver.cuda_driver_version == "13.0"
    gpu = host.gpus[0]
    assert gpu.memory_total_mib == 143771
    assert gpu.power.limit_w == gpu.power.default_limit_w == gpu.power.enforced_limit_w == 700.0
    assert (gpu.power.min_limit_w, gpu.power.max_limit_w) == (200.0, 700.0)
    assert gpu.clocks.sm_max_mhz == 1980
    assert gpu.clock_event_reasons == ["GpuIdle"]
    assert gpu.mig_mode is False and gpu.persistence_mode is True
    assert host.os.id == "ubuntu" and host.cpu.logical_cores == 32
    assert host.cpu.hypervisor is True


def test_p2p_matrix_and_topology(host: HostProbe) -> None:
    assert [(p.gpu_a, p.gpu_b) for p in host.p2p] == [(0, 1), (1, 0)]
    for pair in host.p2p:
        assert (pair.read, pair.write, pair.atomics, pair.nvlink) == ("OK", "OK", "OK", "OK")
        assert pair.prop == "NOT_SUPPORTED"
    assert [(t.gpu_a, t.gpu_b, t.common_ancestor) for t in host.topology] == [(0, 1, "HOSTBRIDGE")]
    assert isinstance(host.nvidia_smi.topo_matrix, str)
    assert "NV18" in host.nvidia_smi.topo_matrix
    assert "\x1b" not in host.nvidia_smi.topo_matrix


def test_pcie_and_nvlink_fields(host: HostProbe) -> None:
    for gpu in host.gpus:
        pcie = gpu.pcie
        assert (pcie.gen_current, pcie.gen_max, pcie.gen_gpu_max) == (5, 5, 5)
        assert (pcie.width_current, pcie.width_max) == (16, 16)
        assert isinstance(gpu.nvlinks, list)
        assert [link.link for link in gpu.nvlinks] == list(range(18))  # 18-35: InvalidArgument
        assert all(link.active and link.version == 6 for link in gpu.nvlinks)
        assert {link.remote_device_type for link in gpu.nvlinks} == {"SWITCH"}
    assert host.gpus[0].pcie.bus_id == "00000000:00:06.0"


def test_unsupported_values_are_unavailable_with_reason(host: HostProbe) -> None:
    for gpu in host.gpus:
        assert gpu.numa_node == Unavailable(reason="NotSupported")
        assert isinstance(gpu.nvlinks, list)
        # the VM hides the NVSwitch: NVML answers an all-ones bus id, not a value
        assert gpu.nvlinks[0].remote_bus_id == Unavailable(reason="ValueNotAvailable")


def test_every_failed_call_is_unavailable_never_zero(dump: dict[str, Any]) -> None:
    for device in dump["nvml"]["devices"]:
        device["calls"] = {key: {"error": "NotSupported"} for key in device["calls"]}
        for link in device["nvlinks"]:
            link.clear()
            link.update({"link": 0, "nvmlDeviceGetNvLinkState": {"error": "NotSupported"}})
    host = host_probe_from_dump(dump)

    leaves: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict) and set(value) != {"reason"}:
            for item in value.values():
                walk(item)
        else:
            leaves.append(value)

    for gpu in host.gpus:
        fields = gpu.model_dump(exclude={"index"})
        walk(fields)
    assert len(leaves) == 2 * 29  # every field of GpuInfo but its index
    assert all(leaf == {"reason": "NotSupported"} for leaf in leaves)


def test_one_failed_call_keeps_its_error_name(dump: dict[str, Any]) -> None:
    calls(dump, 1)["nvmlDeviceGetPowerUsage"] = {"error": "NoPermission"}
    calls(dump, 1)["nvmlDeviceGetCurrPcieLinkGeneration"] = {"value": 0xFFFFFFFF}
    del calls(dump, 1)["nvmlDeviceGetTemperature(GPU)"]
    gpu = host_probe_from_dump(dump).gpus[1]
    assert gpu.power.draw_w == Unavailable(reason="NoPermission")
    assert gpu.pcie.gen_current == Unavailable(reason="ValueNotAvailable")
    assert gpu.temperature_c == Unavailable(reason="NotInDump")


def test_redaction_by_default_and_kept_without(dump: dict[str, Any]) -> None:
    redacted = host_probe_from_dump(dump)
    text = probe_to_json(redacted)
    assert redacted.redacted is True
    assert redacted.gpus[0].uuid == redact_value(UUID0)
    assert str(redacted.gpus[0].uuid).startswith("redacted:")
    assert redacted.gpus[0].serial == Unavailable(reason="Redacted")
    assert redacted.hostname == redact_value("example-host")
    assert UUID0 not in text and "example-host" not in text and "0000000000001" not in text

    kept = host_probe_from_dump(dump, redact=False)
    assert kept.redacted is False
    assert kept.gpus[0].uuid == UUID0
    assert kept.gpus[1].serial == "0000000000002"
    assert kept.hostname == "example-host"


def test_redaction_scrubs_home_host_and_user_from_text(dump: dict[str, Any]) -> None:
    dump["host"].update(hostname="alice-box", user="alice", home="/home/alice")
    dump["host"]["python"]["executable"] = "/home/alice/venvs/kit/bin/python"
    dump["nvidia_smi"]["topo_m"] = {"value": "GPU0 on alice-box for alice"}
    redacted = host_probe_from_dump(dump)
    assert redacted.python.executable == "~/venvs/kit/bin/python"
    assert redacted.nvidia_smi.topo_matrix == "GPU0 on <host> for <user>"
    assert "alice" not in probe_to_json(redacted)
    assert "alice" in probe_to_json(host_probe_from_dump(dump, redact=False))


def test_anonymize_dump_replaces_identities_and_leaves_keys(dump: dict[str, Any]) -> None:
    real_uuid = "GPU-f0e1d2c3-0000-1111-2222-333344445555"
    calls(dump, 0)["nvmlDeviceGetUUID"] = {"value": real_uuid}
    calls(dump, 0)["nvmlDeviceGetSerial"] = {"value": "1654321098765"}
    dump["host"].update(hostname="vm", home="/root", user="root")
    dump["nvidia_smi"]["topo_m"] = {"value": f"{real_uuid} on vm"}
    safe = anonymize_dump(dump)
    text = json.dumps(safe)
    assert real_uuid not in text and "1654321098765" not in text and "/root" not in text
    assert safe["nvidia_smi"]["topo_m"]["value"] == f"{UUID0} on example-host"
    assert safe["host"]["user"] == "example-user"
    assert "nvml" in safe  # a short host name must not rewrite keys or other words
    assert host_probe_from_dump(safe, redact=False).gpus[0].uuid == UUID0


def test_dump_from_newer_kit_is_refused(dump: dict[str, Any]) -> None:
    dump["format_version"] = 99
    with pytest.raises(BadInputError) as caught:
        host_probe_from_dump(dump)
    assert "newer" in caught.value.message
    assert caught.value.hint == "upgrade kit to read this dump"
    with pytest.raises(BadInputError, match="not a kit probe dump"):
        host_probe_from_dump({"gpus": []})


def test_probe_json_round_trips(host: HostProbe) -> None:
    again = HostProbe.model_validate_json(probe_to_json(host))
    assert again == host


def test_p2p_index_constant_is_an_integer_even_as_a_tuple() -> None:
    import pynvml

    assert constant(pynvml, "NVML_P2P_CAPS_INDEX_READ", 0) == 0
    assert constant(pynvml, "NVML_P2P_CAPS_INDEX_PROP", 4) == 4
    assert constant(pynvml, "NO_SUCH_CONSTANT", 7) == 7


def test_clock_event_reasons_and_escape_stripping() -> None:
    assert as_reasons(0x5) == ["GpuIdle", "SwPowerCap"]
    assert as_reasons(0x1040) == ["HwThermalSlowdown", "Unknown(0x1000)"]
    assert as_reasons(0) == []
    assert strip_escapes("\x1b[4mGPU0\x1b[0m\tX  \n\x1b]0;title\x07NV18") == "GPU0\tX\nNV18"


# ---------------------------------------------------------------------------------------------
# no GPU: runs for real on this machine


@needs_no_gpu
def test_probe_without_gpu_returns_cleanly() -> None:
    host = probe_host()
    assert host.gpus == [] and host.p2p == [] and host.topology == []
    assert host.nvml_error is not None and host.nvml_error.startswith("NVML could not start")
    assert isinstance(host.driver.driver_version, Unavailable)
    assert host.driver.driver_version.reason in host.nvml_error
    assert host.cpu.logical_cores == os.cpu_count()
    assert host.os.kernel == platform.release()
    assert isinstance(host.hostname, str) and host.hostname.startswith("redacted:")
    assert HostProbe.model_validate_json(probe_to_json(host)) == host
    if Path("/.dockerenv").exists():
        assert host.container.detected and "/.dockerenv exists" in host.container.evidence
    raw = collect_nvml_dump()
    assert json.loads(json.dumps(raw)) == raw  # plain JSON all the way down
    assert "error" in raw["nvml"]["init"]


@needs_no_gpu
def test_sampler_without_gpu_gives_empty_result_with_reason() -> None:
    with GpuSampler(interval_s=0.01) as sampler:
        sampler.mark("measure_start")
        sampler.mark("measure_end")
    result = sampler.sampling
    assert result.samples == [] and result.summaries == [] and result.window is None
    assert result.unavailable is not None and result.unavailable.startswith("NVML")
    assert [m.label for m in result.marks] == ["measure_start", "measure_end"]
    assert energy_per_token_j(result, 100) == Unavailable(reason=result.unavailable)
    assert probe_findings(probe_host(), result) == []


def test_sampler_misuse_is_refused() -> None:
    sampler = GpuSampler()
    with pytest.raises(RuntimeError, match="outside its 'with' block"):
        sampler.mark("idle")
    with pytest.raises(RuntimeError, match="after the 'with' block"):
        _ = sampler.sampling
    with pytest.raises(BadInputError, match="positive"):
        GpuSampler(interval_s=0)


# ---------------------------------------------------------------------------------------------
# the recorded sampling: triplet and energy


def test_recorded_summaries_are_reproduced(sampling: GpuSampling) -> None:
    again = rebuilt(sampling)
    assert again.summaries == sampling.summaries
    assert again.energy_j == sampling.energy_j
    assert sampling.window is not None and sampling.window.source == "marks"


def test_vram_triplet(sampling: GpuSampling) -> None:
    for summary in sampling.summaries:
        mine = [s for s in sampling.samples if s.gpu == summary.gpu]
        idle = next(s for s in mine if s.mark == "idle").memory_used_mib
        post = next(s for s in mine if s.mark == "post").memory_used_mib
        start = next(s for s in mine if s.mark == "measure_start").t_s
        end = next(s for s in mine if s.mark == "measure_end").t_s
        inside = [s.memory_used_mib for s in mine if start <= s.t_s <= end]
        assert isinstance(idle, int) and isinstance(post, int)
        assert summary.vram.idle_mib == idle == 11639
        assert summary.vram.peak_mib == max(m for m in inside if isinstance(m, int)) == 18009
        assert summary.vram.post_mib == post == 11737
        assert summary.vram.growth_mib == post - idle == 98
        assert summary.samples_in_window == len(inside)


def test_energy_from_counter_and_trapezoid(sampling: GpuSampling) -> None:
    window = sampling.window
    assert window is not None
    for summary in sampling.summaries:
        inside = [
            s
            for s in sampling.samples
            if s.gpu == summary.gpu and window.start_s <= s.t_s <= window.end_s
        ]
        first, last = inside[0], inside[-1]
        assert (first.mark, last.mark) == ("measure_start", "measure_end")
        assert isinstance(first.energy_mj, int) and isinstance(last.energy_mj, int)
        assert summary.energy_method == "energy_counter"
        assert summary.energy_j == round((last.energy_mj - first.energy_mj) / 1000, 3)

        no_counter = [
            s.model_copy(update={"energy_mj": Unavailable(reason="NotSupported")}) for s in inside
        ]
        energy, method = window_energy(no_counter)
        points = [(s.t_s, s.power_w) for s in inside if isinstance(s.power_w, float)]
        by_hand = sum(
            (p0 + p1) / 2 * (t1 - t0) for (t0, p0), (t1, p1) in itertools.pairwise(points)
        )
        assert method == "power_trapezoid"
        assert energy == round(by_hand, 3)
        # two ways to measure the same 10 s agree to within 10 % on real readings
        assert isinstance(energy, float) and isinstance(summary.energy_j, float)
        assert abs(energy - summary.energy_j) / summary.energy_j < 0.10
    per_gpu = [s.energy_j for s in sampling.summaries]
    assert all(isinstance(e, float) for e in per_gpu)
    assert sampling.energy_j == pytest.approx(sum(e for e in per_gpu if isinstance(e, float)))


def test_energy_per_token(sampling: GpuSampling) -> None:
    assert isinstance(sampling.energy_j, float)
    assert energy_per_token_j(sampling, 1000) == pytest.approx(sampling.energy_j / 1000)
    assert energy_per_token_j(sampling, 0) == Unavailable(reason="NoTokens")


def test_without_marks_the_window_is_the_whole_session(sampling: GpuSampling) -> None:
    unmarked = build_sampling(
        Readings(
            started_at=sampling.started_at,
            interval_s=sampling.interval_s,
            duration_s=sampling.duration_s,
            unavailable=None,
            gpus=sampling.gpus,
            marks=[],
            samples=sampling.samples,
        )
    )
    assert unmarked.window is not None and unmarked.window.source == "whole_session"
    assert unmarked.window.start_s == sampling.samples[0].t_s
    assert unmarked.summaries[0].samples_in_window == len(
        [s for s in sampling.samples if s.gpu == 0]
    )


# ---------------------------------------------------------------------------------------------
# findings


def test_findings_on_the_recorded_run(host: HostProbe, sampling: GpuSampling) -> None:
    assert probe_findings(host, None) == []
    findings = probe_findings(host, sampling)
    assert [(f.code, f.severity) for f in findings] == [("gpu-clocks-limited", "warning")]
    assert "GPU 0 SwPowerCap" in findings[0].message


def test_slot_slower_than_gpu(dump: dict[str, Any]) -> None:
    calls(dump, 1)["nvmlDeviceGetMaxPcieLinkGeneration"] = {"value": 4}
    findings = probe_findings(host_probe_from_dump(dump), None)
    assert [(f.code, f.severity) for f in findings] == [("pcie-slot-below-gpu-max", "warning")]
    assert "GPU 1 Gen4 (GPU supports Gen5)" in findings[0].message


def test_power_limits_differ_and_below_default(dump: dict[str, Any]) -> None:
    calls(dump, 1)["nvmlDeviceGetPowerManagementLimit"] = {"value": 500000}
    calls(dump, 1)["nvmlDeviceGetEnforcedPowerLimit"] = {"value": 500000}
    findings = probe_findings(host_probe_from_dump(dump), None)
    assert [f.code for f in findings] == ["power-limit-below-default", "power-limits-differ"]
    assert findings[0].message.endswith("GPU 1 500 W (default 700 W)")
    assert findings[1].message.endswith("GPU 0 700 W, GPU 1 500 W")


def test_pcie_link_down_under_load(host: HostProbe, sampling: GpuSampling) -> None:
    slow = edit_window(sampling, 1, pcie_gen=3)
    assert slow.summaries[1].pcie_gen_min_under_load == 3
    findings = probe_findings(host, slow)
    assert [(f.code, f.severity) for f in findings] == [
        ("pcie-link-degraded", "error"),
        ("gpu-clocks-limited", "warning"),
    ]
    assert "GPU 1 down to Gen3 x16 (max Gen5 x16)" in findings[0].message
    narrow = edit_window(sampling, 0, pcie_width=8)
    assert "GPU 0 down to Gen5 x8" in probe_findings(host, narrow)[0].message


def test_idle_pcie_downshift_is_not_a_finding(host: HostProbe, sampling: GpuSampling) -> None:
    idle = next(s for s in sampling.samples if s.mark == "idle" and s.gpu == 0)
    samples = [s.model_copy(update={"pcie_gen": 1}) if s is idle else s for s in sampling.samples]
    assert [f.code for f in probe_findings(host, rebuilt(sampling, samples))] == [
        "gpu-clocks-limited"
    ]


def test_thermal_throttling_is_an_error(host: HostProbe, sampling: GpuSampling) -> None:
    hot = edit_window(sampling, 0, clock_event_reasons=["HwThermalSlowdown", "GpuIdle"])
    findings = probe_findings(host, hot)
    assert [(f.code, f.severity) for f in findings] == [
        ("gpu-throttled", "error"),
        ("gpu-clocks-limited", "warning"),
    ]
    assert findings[0].message.endswith("GPU 0 HwThermalSlowdown")
    assert "GpuIdle" not in findings[1].message


def test_gpus_present_but_not_sampled(host: HostProbe, sampling: GpuSampling) -> None:
    empty = sampling.model_copy(
        update={"samples": [], "summaries": [], "window": None, "unavailable": "NVML went away"}
    )
    findings = probe_findings(host, empty)
    assert [(f.code, f.severity) for f in findings] == [("gpu-not-sampled", "warning")]
    assert findings[0].message.endswith("NVML went away")


def test_fixture_holds_no_identities(recorded: Path) -> None:
    text = (recorded / "h200x2-nvml-dump.json").read_text()
    uuids = set(re.findall(r"GPU-[0-9a-fA-F-]{36}", text))
    assert uuids == {UUID0, "GPU-00000000-0000-0000-0000-000000000002"}
    dump = json.loads(text)
    assert (dump["host"]["hostname"], dump["host"]["user"]) == ("example-host", "example-user")
    assert anonymize_dump(dump) == copy.deepcopy(dump)  # nothing left to replace
    assert "GPU-" not in (recorded / "h200x2-sampling.json").read_text()
