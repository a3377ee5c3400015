"""The host probe: what the machine is, how its GPUs behave while measured, what is wrong.

:func:`probe_host` reads the machine; :class:`GpuSampler` and :class:`HostLoadSampler` sample it
during a benchmark; :func:`probe_findings` and :func:`host_load_findings` judge what they found.
"""

from __future__ import annotations

from kit.probe.cpu import IsaLevel, cpu_summary, isa_level, parse_cpuinfo
from kit.probe.dump import anonymize_dump, collect_host_facts, collect_nvml_dump
from kit.probe.findings import host_load_findings, probe_findings
from kit.probe.hostload import HostLoadSampler
from kit.probe.models import (
    CpuInfo,
    Finding,
    GpuInfo,
    HostLoad,
    HostProbe,
    ProcessCpu,
    Unavailable,
)
from kit.probe.parse import host_probe_from_dump, probe_to_json
from kit.probe.procfs import process_group, process_tree
from kit.probe.redaction import redact_value, redaction_secret
from kit.probe.sampler import GpuSampler
from kit.probe.sampling import (
    GpuSample,
    GpuSampling,
    GpuSummary,
    Mark,
    Readings,
    VramTriplet,
    build_sampling,
    energy_per_token_j,
    window_energy,
)

__all__ = [
    "CpuInfo",
    "Finding",
    "GpuInfo",
    "GpuSample",
    "GpuSampler",
    "GpuSampling",
    "GpuSummary",
    "HostLoad",
    "HostLoadSampler",
    "HostProbe",
    "IsaLevel",
    "Mark",
    "ProcessCpu",
    "Readings",
    "Unavailable",
    "VramTriplet",
    "anonymize_dump",
    "build_sampling",
    "collect_host_facts",
    "collect_nvml_dump",
    "cpu_summary",
    "energy_per_token_j",
    "host_load_findings",
    "host_probe_from_dump",
    "isa_level",
    "parse_cpuinfo",
    "probe_findings",
    "probe_host",
    "probe_to_json",
    "process_group",
    "process_tree",
    "redact_value",
    "redaction_secret",
    "window_energy",
]


def probe_host(redact: bool = True) -> HostProbe:
    """Probe this machine: read NVML, nvidia-smi and the host into a raw dump
    (:func:`collect_nvml_dump`) and build a :class:`HostProbe` from it
    (:func:`host_probe_from_dump`), the parsing that recorded dumps go through too. Never fails
    for want of a GPU: the probe then has no GPUs and says why in ``HostProbe.nvml_error``."""
    return host_probe_from_dump(collect_nvml_dump(), redact=redact)
