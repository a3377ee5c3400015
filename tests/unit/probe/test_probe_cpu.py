"""The CPU's vendor and ISA flags: /proc/cpuinfo texts parsed, and this machine probed for real.

tests/fixtures/cpuinfo/README.md says which fixture was recorded and which were written.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kit.probe import (
    CpuInfo,
    Unavailable,
    cpu_summary,
    host_probe_from_dump,
    isa_level,
    parse_cpuinfo,
    probe_host,
)
from kit.probe.cpu import ARM64_ISA_FLAGS, X86_ISA_FLAGS

# file -> (vendor, model, isa, isa level, summary)
EXPECTED: dict[str, tuple[str, str, list[str], str, str]] = {
    "amd-epyc-avx2.txt": (
        "AuthenticAMD",
        "AMD EPYC",
        ["avx", "avx2", "f16c", "fma"],
        "avx2",
        "AMD EPYC, avx2 (no avx512)",
    ),
    "intel-cascadelake-avx512.txt": (
        "GenuineIntel",
        "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz",
        [
            "avx",
            "avx2",
            "avx512_vnni",
            "avx512bw",
            "avx512cd",
            "avx512dq",
            "avx512f",
            "avx512vl",
            "f16c",
            "fma",
        ],
        "avx512",
        "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz, avx512 (vnni, no bf16)",
    ),
    "intel-sapphirerapids-amx.txt": (
        "GenuineIntel",
        "Intel(R) Xeon(R) Platinum 8488C",
        [
            "amx_bf16",
            "amx_int8",
            "amx_tile",
            "avx",
            "avx2",
            "avx512_bf16",
            "avx512_fp16",
            "avx512_vnni",
            "avx512bw",
            "avx512cd",
            "avx512dq",
            "avx512f",
            "avx512vbmi",
            "avx512vl",
            "avx_vnni",
            "f16c",
            "fma",
        ],
        "avx512-bf16",
        "Intel(R) Xeon(R) Platinum 8488C, avx512-bf16 + amx",
    ),
    "aws-graviton3-neoverse-v1.txt": (
        "ARM",
        "Neoverse-V1",
        ["asimd", "asimddp", "bf16", "i8mm", "sve"],
        "arm64-sve",
        "ARM Neoverse-V1, arm64-sve (bf16, i8mm, no sve2)",
    ),
}


@pytest.fixture
def cpuinfo(fixtures_dir: Path) -> Callable[[str], str]:
    """``cpuinfo(name)``: the text of a recorded /proc/cpuinfo under tests/fixtures/cpuinfo."""

    def read(name: str) -> str:
        return (fixtures_dir / "cpuinfo" / name).read_text()

    return read


@pytest.fixture
def dump(fixtures_dir: Path) -> dict[str, Any]:
    """The recorded H200 dump (written before kit kept the CPU's vendor and ISA)."""
    path = fixtures_dir / "probe/h200x2-nvml-dump.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _cpu(dump: dict[str, Any], parsed: dict[str, Any]) -> CpuInfo:
    """The CpuInfo a dump holding this parse gives."""
    dump["host"]["cpuinfo"] = parsed
    return host_probe_from_dump(dump).cpu


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_parses_to_vendor_model_and_isa(
    name: str, cpuinfo: Callable[[str], str], dump: dict[str, Any]
) -> None:
    vendor, model, isa, level, summary = EXPECTED[name]
    parsed = parse_cpuinfo(cpuinfo(name))
    assert parsed["vendor"] == vendor
    assert parsed["model"] == model
    assert parsed["isa"] == isa
    assert parsed["processors"] == 2
    assert isa_level(parsed["isa"]) == level
    cpu = _cpu(dump, parsed)
    assert (cpu.vendor, cpu.model, cpu.isa) == (vendor, model, isa)
    assert cpu_summary(cpu) == summary


def test_x86_fixtures_count_cores_and_see_the_hypervisor(cpuinfo: Callable[[str], str]) -> None:
    recorded = parse_cpuinfo(cpuinfo("amd-epyc-avx2.txt"))
    assert (recorded["physical_cores"], recorded["sockets"], recorded["hypervisor"]) == (2, 1, True)
    # two hyperthreads of one core, as on a 2-vCPU cloud VM
    cascade = parse_cpuinfo(cpuinfo("intel-cascadelake-avx512.txt"))
    assert (cascade["physical_cores"], cascade["sockets"], cascade["hypervisor"]) == (1, 1, True)


def test_arm64_has_no_x86_facts(cpuinfo: Callable[[str], str]) -> None:
    parsed = parse_cpuinfo(cpuinfo("aws-graviton3-neoverse-v1.txt"))
    assert (parsed["physical_cores"], parsed["sockets"], parsed["hypervisor"]) == (None, None, None)
    # svebf16 and svei8mm are other flags than bf16 and i8mm: only the listed names count
    assert set(parsed["isa"]) <= ARM64_ISA_FLAGS


def test_only_the_first_processors_flags_count() -> None:
    text = "processor\t: 0\nflags\t\t: fpu avx\n\nprocessor\t: 1\nflags\t\t: fpu avx avx2\n\n"
    assert parse_cpuinfo(text)["isa"] == ["avx"]


def test_arm64_implementers_and_parts() -> None:
    def arm(implementer: str, part: str) -> dict[str, Any]:
        return parse_cpuinfo(
            f"processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: {implementer}\n"
            f"CPU part\t: {part}\n\n"
        )

    assert (arm("0xc0", "0xac3")["vendor"], arm("0xc0", "0xac3")["model"]) == ("Ampere", "Ampere-1")
    assert (arm("0x48", "0xd01")["vendor"], arm("0x48", "0xd01")["model"]) == (
        "HiSilicon",
        "Kunpeng-920",
    )
    assert arm("0x61", "0x022")["vendor"] == "Apple"
    assert arm("0x61", "0x022")["model"] is None  # part not in the table
    assert arm("0x7a", "0x001")["vendor"] == "0x7a"  # unknown implementer: its code
    assert isa_level(arm("0x41", "0xd0c")["isa"]) == "arm64-neon"


def test_isa_levels() -> None:
    assert isa_level([]) == "baseline"
    assert isa_level(["avx", "fma"]) == "baseline"
    assert isa_level(["avx2"]) == "avx2"
    assert isa_level(["avx2", "avx512f"]) == "avx512"
    assert isa_level(["avx512_bf16", "avx512f"]) == "avx512-bf16"
    assert isa_level(["asimd", "sve", "sve2"]) == "arm64-sve"
    assert isa_level(["asimd"]) == "arm64-neon"


def test_text_without_flags_or_vendor(dump: dict[str, Any]) -> None:
    parsed = parse_cpuinfo("processor\t: 0\n\n")
    assert (parsed["vendor"], parsed["isa"], parsed["model"]) == (None, None, None)
    cpu = _cpu(dump, parsed)
    assert cpu.vendor == Unavailable(reason="NotInCpuinfo")
    assert cpu.isa is None
    assert cpu_summary(cpu) == "unknown CPU, ISA not recorded"


def test_a_dump_from_before_vendor_and_isa_gives_none(dump: dict[str, Any]) -> None:
    """Dumps (and the reports built from them) written before these fields still parse."""
    assert "vendor" not in dump["host"]["cpuinfo"]
    cpu = host_probe_from_dump(dump).cpu
    assert (cpu.vendor, cpu.isa) == (None, None)
    assert cpu_summary(cpu) == "Intel(R) Xeon(R) Processor, ISA not recorded"


def test_a_dump_keeps_only_known_flags(dump: dict[str, Any]) -> None:
    cpu = _cpu(dump, {"model": "x", "vendor": "GenuineIntel", "isa": ["avx2", "mmx", "avx"]})
    assert cpu.isa == ["avx", "avx2"]
    assert set(cpu.isa) <= X86_ISA_FLAGS


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs Linux /proc/cpuinfo")
def test_this_machine_is_probed_with_vendor_and_isa() -> None:
    cpu = probe_host().cpu
    assert isinstance(cpu.vendor, str) and cpu.vendor
    assert cpu.isa is not None
    assert cpu.isa == sorted(cpu.isa)
    expected = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    assert (cpu.vendor, cpu.isa) == (expected["vendor"], expected["isa"])
    if platform.machine() == "x86_64":
        assert set(cpu.isa) <= X86_ISA_FLAGS and "avx" in cpu.isa
    elif platform.machine() == "aarch64":
        assert set(cpu.isa) <= ARM64_ISA_FLAGS and "asimd" in cpu.isa
    assert f", {isa_level(cpu.isa)}" in cpu_summary(cpu)
