"""The probe's typed results: host facts, GPU sampling, host load and validity findings.

A value the source could not give is an :class:`Unavailable` with the reason, never a zero:
``"power_draw_w": {"reason": "NotSupported"}``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Unavailable(_Model):
    """A value that could not be read, and why."""

    reason: str = Field(
        description=(
            "Why: the NVML error name (NotSupported, NoPermission, FunctionNotFound, ...), "
            "'Redacted', or a kit reason (NotInDump, ValueNotAvailable, NoSampleInWindow, ...)."
        )
    )


# ---------------------------------------------------------------------------------------------
# host


class OsInfo(_Model):
    """The operating system, from /etc/os-release and the kernel."""

    name: str | Unavailable = Field(description="PRETTY_NAME from /etc/os-release.")
    id: str | Unavailable = Field(description="ID from /etc/os-release, e.g. 'ubuntu'.")
    version_id: str | Unavailable = Field(description="VERSION_ID from /etc/os-release.")
    kernel: str = Field(description="Kernel release (uname -r).")
    arch: str = Field(description="Machine architecture (uname -m).")


class CpuInfo(_Model):
    """The host's processors and memory."""

    model: str | Unavailable = Field(
        description=(
            "CPU model name from /proc/cpuinfo; on arm64 without one, the core named from "
            "'CPU implementer' and 'CPU part' (e.g. 'Neoverse-V1')."
        )
    )
    vendor: str | Unavailable | None = Field(
        default=None,
        description=(
            "x86: vendor_id (GenuineIntel, AuthenticAMD, ...); arm64: the 'CPU implementer' "
            "named (ARM, Ampere, Apple, HiSilicon, ...) or its code ('0x51') when unknown. "
            "None in reports written before kit recorded it."
        ),
    )
    isa: list[str] | None = Field(
        default=None,
        description=(
            "Instruction-set extensions that matter to inference engines, as the kernel names "
            "them, sorted: of X86_ISA_FLAGS from the first processor's 'flags', or of "
            "ARM64_ISA_FLAGS from its 'Features'. None in reports written before kit recorded "
            "it, or when /proc/cpuinfo lists no flags."
        ),
    )
    logical_cores: int | Unavailable = Field(description="Logical CPUs the OS reports.")
    usable_cores: int | Unavailable = Field(description="Logical CPUs this process may run on.")
    physical_cores: int | Unavailable = Field(description="Distinct (socket, core) pairs.")
    sockets: int | Unavailable = Field(description="Distinct physical packages.")
    hypervisor: bool | Unavailable = Field(description="The CPU flags say it runs in a VM.")
    ram_total_mib: int | Unavailable = Field(
        description="MemTotal from /proc/meminfo (a VM with a balloon may report less at start)."
    )
    cgroup_memory_limit_mib: int | None = Field(
        description="The cgroup memory limit of this process; None when none is set or readable."
    )
    numa_nodes: int | Unavailable = Field(description="NUMA nodes under /sys/devices/system/node.")


# The CPU flags (kernel names) an inference engine's kernels choose between.
X86_ISA_FLAGS = frozenset(
    {
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx_vnni",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512dq",
        "avx512cd",
        "avx512_bf16",
        "avx512_vnni",
        "avx512_fp16",
        "avx512vbmi",
        "amx_bf16",
        "amx_int8",
        "amx_tile",
    }
)
# asimd is NEON, asimddp the dot-product instructions.
ARM64_ISA_FLAGS = frozenset({"asimd", "sve", "sve2", "bf16", "i8mm", "asimddp"})

IsaLevel = Literal["avx512-bf16", "avx512", "avx2", "arm64-sve", "arm64-neon", "baseline"]


def isa_level(isa: list[str]) -> IsaLevel:
    """The widest vector tier the flags allow, the one CPU kernels are picked by.

    ``avx512-bf16`` (avx512f and avx512_bf16), ``avx512`` (avx512f), ``avx2``, ``arm64-sve``
    (sve), ``arm64-neon`` (asimd), else ``baseline``.
    """
    flags = set(isa)
    if "avx512f" in flags:
        return "avx512-bf16" if "avx512_bf16" in flags else "avx512"
    if "avx2" in flags:
        return "avx2"
    if "sve" in flags:
        return "arm64-sve"
    if "asimd" in flags:
        return "arm64-neon"
    return "baseline"


# Short vendor names for x86 vendor_id strings, for summaries.
_X86_VENDORS = {
    "GenuineIntel": "Intel",
    "AuthenticAMD": "AMD",
    "HygonGenuine": "Hygon",
    "CentaurHauls": "Centaur",
}


def cpu_summary(cpu: CpuInfo) -> str:
    """One line for humans: the CPU and what its vector units can do.

    ``AMD EPYC, avx2 (no avx512)``; ``Intel(R) Xeon(R) Platinum 8488C, avx512-bf16 + amx``;
    ``ARM Neoverse-V1, arm64-sve (bf16, i8mm, no sve2)``.
    """
    model = cpu.model if isinstance(cpu.model, str) else "unknown CPU"
    vendor = _X86_VENDORS.get(cpu.vendor, cpu.vendor) if isinstance(cpu.vendor, str) else None
    if vendor and not vendor.startswith("0x") and vendor.lower() not in model.lower():
        model = f"{vendor} {model}"
    if cpu.isa is None:
        return f"{model}, ISA not recorded"
    flags = set(cpu.isa)
    level = isa_level(cpu.isa)
    if level == "avx512-bf16":
        detail = " + amx" if "amx_bf16" in flags else " (no amx)"
    elif level == "avx512":
        detail = " (vnni, no bf16)" if "avx512_vnni" in flags else " (no bf16)"
    elif level == "avx2":
        detail = " (no avx512)"
    elif level in ("arm64-sve", "arm64-neon"):
        extras = [f for f in ("sve2", "bf16", "i8mm") if f in flags]
        missing = "no sve2" if level == "arm64-sve" else "no sve"
        if level == "arm64-sve" and "sve2" in flags:
            missing = ""
        detail = " (" + ", ".join([*extras, *([missing] if missing else [])]) + ")"
    else:
        detail = " (no avx2)" if cpu.vendor in _X86_VENDORS else ""
    return f"{model}, {level}{detail}"


class ContainerInfo(_Model):
    """Whether the probe runs in a container, and what showed it."""

    detected: bool = Field(description="Any container evidence was found.")
    runtime: str | None = Field(
        description="Best guess: kubernetes, podman, docker, containerd, lxc or $container."
    )
    evidence: list[str] = Field(description="What was seen: files, cgroup entries, variables.")


class PythonInfo(_Model):
    """The Python that ran the probe."""

    version: str = Field(description="Python version, e.g. '3.12.3'.")
    implementation: str = Field(description="CPython, PyPy, ...")
    executable: str = Field(
        description="The interpreter's path; the home folder is '~' when redacted."
    )


class DriverInfo(_Model):
    """The NVIDIA driver, as NVML reports it (one per host)."""

    driver_version: str | Unavailable = Field(
        description="Kernel driver version, e.g. '580.159.04'."
    )
    cuda_driver_version: str | Unavailable = Field(
        description="Newest CUDA version the driver supports, e.g. '13.0'."
    )
    nvml_version: str | Unavailable = Field(description="NVML library version.")


class PowerInfo(_Model):
    """A GPU's power limits and draw, in watts."""

    limit_w: float | Unavailable = Field(description="Power management limit in force.")
    default_limit_w: float | Unavailable = Field(description="The card's default power limit.")
    min_limit_w: float | Unavailable = Field(description="Lowest limit that may be set.")
    max_limit_w: float | Unavailable = Field(description="Highest limit that may be set.")
    enforced_limit_w: float | Unavailable = Field(
        description="Limit actually enforced (the lowest of all limiters)."
    )
    draw_w: float | Unavailable = Field(description="Power draw when probed.")


class ClockInfo(_Model):
    """A GPU's clocks, in MHz."""

    sm_mhz: int | Unavailable = Field(description="Current SM clock.")
    sm_max_mhz: int | Unavailable = Field(description="Maximum SM clock.")
    mem_mhz: int | Unavailable = Field(description="Current memory clock.")
    mem_max_mhz: int | Unavailable = Field(description="Maximum memory clock.")


class PcieInfo(_Model):
    """A GPU's PCIe link. An idle GPU may lower its link generation: compare under load."""

    bus_id: str | Unavailable = Field(description="PCI bus id, e.g. '00000000:19:00.0'.")
    gen_current: int | Unavailable = Field(description="Current link generation.")
    gen_max: int | Unavailable = Field(description="Highest generation of this GPU in this slot.")
    gen_gpu_max: int | Unavailable = Field(
        description="Highest generation the GPU supports; above gen_max means a slower slot."
    )
    width_current: int | Unavailable = Field(description="Current link width (lanes).")
    width_max: int | Unavailable = Field(description="Maximum link width (lanes).")


class NvLink(_Model):
    """One NVLink of a GPU."""

    link: int = Field(description="Link index.")
    active: bool = Field(description="The link is up.")
    version: int | Unavailable = Field(description="NVLink version of the link.")
    remote_bus_id: str | Unavailable = Field(description="PCI bus id at the other end.")
    remote_device_type: str | Unavailable = Field(description="GPU, SWITCH, IBMNPU or UNKNOWN.")


class GpuInfo(_Model):
    """One NVIDIA GPU as NVML saw it when probed."""

    index: int = Field(description="NVML index.")
    name: str | Unavailable = Field(description="Product name, e.g. 'NVIDIA H200'.")
    uuid: str | Unavailable = Field(
        description="GPU UUID; 'redacted:<sha256 prefix>' when redacted."
    )
    serial: str | Unavailable = Field(
        description="Board serial; Unavailable 'Redacted' when redacted."
    )
    vbios_version: str | Unavailable = Field(description="VBIOS version.")
    numa_node: int | Unavailable = Field(description="NUMA node nearest the GPU.")
    memory_total_mib: int | Unavailable = Field(description="Total memory, MiB.")
    memory_used_mib: int | Unavailable = Field(description="Memory in use when probed, MiB.")
    power: PowerInfo = Field(description="Power limits and draw.")
    clocks: ClockInfo = Field(description="Clocks.")
    clock_event_reasons: list[str] | Unavailable = Field(
        description="Active clocks-event (throttle) reasons when probed, e.g. ['GpuIdle']."
    )
    temperature_c: int | Unavailable = Field(description="GPU temperature, °C.")
    pcie: PcieInfo = Field(description="PCIe link.")
    nvlinks: list[NvLink] | Unavailable = Field(description="NVLinks that answered, by index.")
    persistence_mode: bool | Unavailable = Field(description="Persistence mode is on.")
    mig_mode: bool | Unavailable = Field(description="MIG mode is on (current, not pending).")
    compute_mode: str | Unavailable = Field(description="DEFAULT, EXCLUSIVE_PROCESS, ...")


class P2PStatus(_Model):
    """Peer-to-peer capability from one GPU to another (nvmlDeviceGetP2PStatus)."""

    gpu_a: int = Field(description="Source GPU index.")
    gpu_b: int = Field(description="Peer GPU index.")
    read: str | Unavailable = Field(description="P2P read: OK, NOT_SUPPORTED, ...")
    write: str | Unavailable = Field(description="P2P write.")
    nvlink: str | Unavailable = Field(description="P2P over NVLink.")
    atomics: str | Unavailable = Field(description="P2P atomics.")
    prop: str | Unavailable = Field(description="P2P over PCIe (the PROP/PCI index).")


class Topology(_Model):
    """The PCIe ancestor two GPUs share. NVLinked GPUs still report their PCIe path."""

    gpu_a: int = Field(description="First GPU index.")
    gpu_b: int = Field(description="Second GPU index (greater than gpu_a).")
    common_ancestor: str | Unavailable = Field(
        description="INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE or SYSTEM."
    )


class NvidiaSmiEvidence(_Model):
    """nvidia-smi's own view of the topology, kept as text (escape sequences removed)."""

    topo_matrix: str | Unavailable = Field(description="Output of 'nvidia-smi topo -m'.")
    topo_p2p: str | Unavailable = Field(description="Output of 'nvidia-smi topo -p2p rwnap'.")


class HostProbe(_Model):
    """What the machine is: CPU, OS, container, driver, GPUs and how they are linked."""

    collected_at: str = Field(description="When the readings were taken (UTC, ISO 8601).")
    redacted: bool = Field(description="Host name, paths, UUIDs and serials were redacted.")
    hostname: str | Unavailable = Field(
        description="Host name; 'redacted:<sha256 prefix>' if redacted."
    )
    os: OsInfo = Field(description="Operating system and kernel.")
    cpu: CpuInfo = Field(description="Processors and memory.")
    container: ContainerInfo = Field(description="Container detection.")
    python: PythonInfo = Field(description="The Python that ran the probe.")
    nvml_error: str | None = Field(description="Why no GPU could be read; None when NVML worked.")
    driver: DriverInfo = Field(description="NVIDIA driver versions.")
    gpus: list[GpuInfo] = Field(description="GPUs by NVML index; empty without a driver.")
    p2p: list[P2PStatus] = Field(description="P2P status for every ordered pair of GPUs.")
    topology: list[Topology] = Field(description="PCIe common ancestor for every pair of GPUs.")
    nvidia_smi: NvidiaSmiEvidence = Field(description="nvidia-smi topology text as evidence.")


# ---------------------------------------------------------------------------------------------
# sampling


class Mark(_Model):
    """A phase boundary recorded with GpuSampler.mark()."""

    label: str = Field(description="idle, measure_start, measure_end, post, or another label.")
    t_s: float = Field(description="Seconds since the sampler started.")


class SampledGpu(_Model):
    """A GPU the sampler watched, with the static facts its summary compares against."""

    index: int = Field(description="NVML index.")
    name: str | Unavailable = Field(description="Product name.")
    pcie_gen_max: int | Unavailable = Field(description="Highest PCIe generation in this slot.")
    pcie_width_max: int | Unavailable = Field(description="Maximum PCIe link width.")


class GpuSample(_Model):
    """One reading of one GPU."""

    gpu: int = Field(description="NVML index.")
    t_s: float = Field(description="Seconds since the sampler started.")
    mark: str | None = Field(description="The mark label this reading was taken for, if any.")
    memory_used_mib: int | Unavailable = Field(description="Memory in use, MiB.")
    power_w: float | Unavailable = Field(description="Power draw, W.")
    energy_mj: int | Unavailable = Field(description="Energy counter since driver load, mJ.")
    sm_clock_mhz: int | Unavailable = Field(description="SM clock, MHz.")
    pcie_gen: int | Unavailable = Field(description="Current PCIe generation.")
    pcie_width: int | Unavailable = Field(description="Current PCIe width.")
    temperature_c: int | Unavailable = Field(description="Temperature, °C.")
    clock_event_reasons: list[str] | Unavailable = Field(description="Active clocks-event reasons.")


class SamplingWindow(_Model):
    """The measured window the summaries cover."""

    start_s: float = Field(description="Start, seconds since the sampler started.")
    end_s: float = Field(description="End, seconds since the sampler started.")
    source: Literal["marks", "whole_session"] = Field(
        description="From the measure_start/measure_end marks, or the whole session without them."
    )


class VramTriplet(_Model):
    """Memory in use before, during and after the measured window, MiB."""

    idle_mib: int | Unavailable = Field(
        description="At the last 'idle' mark before the window, else the last reading before it."
    )
    peak_mib: int | Unavailable = Field(description="Highest reading inside the window.")
    post_mib: int | Unavailable = Field(
        description="At the last 'post' mark after the window, else the last reading after it."
    )
    growth_mib: int | Unavailable = Field(description="post - idle.")


class GpuSummary(_Model):
    """One GPU over the measured window."""

    gpu: int = Field(description="NVML index.")
    samples_in_window: int = Field(description="Readings inside the window.")
    vram: VramTriplet = Field(description="Memory idle/peak/post.")
    pcie_gen_max: int | Unavailable = Field(description="Highest PCIe generation in this slot.")
    pcie_width_max: int | Unavailable = Field(description="Maximum PCIe width.")
    pcie_gen_min_under_load: int | Unavailable = Field(description="Lowest generation in window.")
    pcie_width_min_under_load: int | Unavailable = Field(description="Lowest width in window.")
    clock_event_reasons_seen: list[str] = Field(description="Every reason active in the window.")
    power_max_w: float | Unavailable = Field(description="Highest power draw in the window.")
    temperature_max_c: int | Unavailable = Field(description="Highest temperature in the window.")
    energy_j: float | Unavailable = Field(description="Energy over the window, J.")
    energy_method: Literal["energy_counter", "power_trapezoid"] | None = Field(
        description="Counter delta (preferred) or trapezoid over the power readings."
    )


class GpuSampling(_Model):
    """What GpuSampler recorded, and its per-GPU summaries."""

    started_at: str = Field(description="When sampling started (UTC, ISO 8601).")
    interval_s: float = Field(description="Seconds between background readings.")
    duration_s: float = Field(description="Seconds from start to stop.")
    unavailable: str | None = Field(description="Why there are no readings; None when there are.")
    gpus: list[SampledGpu] = Field(description="The GPUs watched.")
    marks: list[Mark] = Field(description="Phase boundaries in time order.")
    samples: list[GpuSample] = Field(description="Readings in time order.")
    window: SamplingWindow | None = Field(description="The measured window; None without readings.")
    summaries: list[GpuSummary] = Field(description="Per-GPU summaries over the window.")
    energy_j: float | Unavailable = Field(description="Energy of all GPUs over the window, J.")


# ---------------------------------------------------------------------------------------------
# host load


class ProcessCpu(_Model):
    """CPU time that processes of one name used in the measured windows."""

    comm: str = Field(
        description="The processes' name (/proc/[pid]/comm, at most 15 characters); never a "
        "command line."
    )
    cpu_s: float = Field(
        description="User + system CPU seconds, summed over processes and windows."
    )


class HostLoad(_Model):
    """How busy the machine was while measuring, and with what: is the box quiet?

    Percentages are of the whole machine's capacity, ``cores`` × ``window_s``: 50 % on two
    cores is one core's worth. Several measured windows (one per prompt) are summed.
    """

    window_s: float = Field(description="Seconds inside measured windows, summed.")
    windows: int = Field(description="Measured windows (measure_start .. measure_end) seen.")
    samples: int = Field(description="Readings of /proc taken inside the windows, edges included.")
    cores: int | None = Field(description="Online CPUs (the cpuN lines of /proc/stat).")
    busy_pct: float | None = Field(
        description="user + nice + system + irq + softirq of all CPUs, % of the /proc/stat total "
        "(idle, iowait and steal are not busy)."
    )
    steal_pct: float | None = Field(
        description="CPU time the hypervisor gave to other guests, % of the /proc/stat total."
    )
    own_cpu_pct: float | None = Field(
        description="CPU of kit, the server and their children (own_pids), % of capacity."
    )
    other_cpu_pct: float | None = Field(
        description="CPU of every other process, kernel threads included, % of capacity."
    )
    loadavg_start: float | None = Field(
        description="1-minute load average at the first window's start (/proc/loadavg)."
    )
    loadavg_end: float | None = Field(
        description="1-minute load average at the last window's end (/proc/loadavg)."
    )
    top_other: list[ProcessCpu] = Field(
        description="The (at most 5) other process names that used the most CPU, most first."
    )
    foreign_gpu_processes: int | None = Field(
        description="Most compute processes seen at once on all GPUs whose pid is not ours "
        "(nvmlDeviceGetComputeRunningProcesses); None without NVML (see foreign_gpu_unavailable)."
    )
    foreign_gpu_unavailable: str | None = Field(
        description="Why foreign GPU processes were not counted; None when they were."
    )
    error: str | None = Field(
        description="What went wrong while sampling (the figures cover what was read before); "
        "None when nothing did."
    )


# ---------------------------------------------------------------------------------------------
# findings


class Finding(_Model):
    """One problem with the host or the measurement, for the report's validity verdict."""

    code: str = Field(description="Short slug, e.g. 'pcie-link-degraded'.")
    severity: Literal["error", "warning"] = Field(
        description="error: the numbers do not describe this hardware; warning: read with care."
    )
    message: str = Field(description="What was seen, with the GPUs and values.")
