"""The probe's typed results: what the machine is (:class:`HostProbe`), host load, findings.

GPU sampling has its models beside its summaries, in :mod:`kit.probe.sampling`. A value the
source could not give is an :class:`Unavailable` with the reason, never a zero:
``"power_draw_w": {"reason": "NotSupported"}``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.base import FrozenModel


class Unavailable(FrozenModel):
    """A value that could not be read, and why."""

    reason: str = Field(
        description=(
            "Why: the NVML error name (NotSupported, NoPermission, FunctionNotFound, ...), "
            "'Redacted', or a kit reason (NotInDump, ValueNotAvailable, NoSampleInWindow, ...)."
        )
    )


# ---------------------------------------------------------------------------------------------
# host


class OsInfo(FrozenModel):
    """The operating system, from /etc/os-release and the kernel."""

    name: str | Unavailable = Field(description="PRETTY_NAME from /etc/os-release.")
    id: str | Unavailable = Field(description="ID from /etc/os-release, e.g. 'ubuntu'.")
    version_id: str | Unavailable = Field(description="VERSION_ID from /etc/os-release.")
    kernel: str = Field(description="Kernel release (uname -r).")
    arch: str = Field(description="Machine architecture (uname -m).")


class CpuInfo(FrozenModel):
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


class ContainerInfo(FrozenModel):
    """Whether the probe runs in a container, and what showed it."""

    detected: bool = Field(description="Any container evidence was found.")
    runtime: str | None = Field(
        description=(
            "Best guess: kubernetes, podman, docker, containerd, lxc, or $container when it "
            "names a known runtime (else 'other')."
        )
    )
    evidence: list[str] = Field(description="What was seen: files, cgroup entries, variables.")


class PythonInfo(FrozenModel):
    """The Python that ran the probe."""

    version: str = Field(description="Python version, e.g. '3.12.3'.")
    implementation: str = Field(description="CPython, PyPy, ...")
    executable: str = Field(
        description="The interpreter's path; the home folder is '~' when redacted."
    )


class DriverInfo(FrozenModel):
    """The NVIDIA driver, as NVML reports it (one per host)."""

    driver_version: str | Unavailable = Field(
        description="Kernel driver version, e.g. '580.159.04'."
    )
    cuda_driver_version: str | Unavailable = Field(
        description="Newest CUDA version the driver supports, e.g. '13.0'."
    )
    nvml_version: str | Unavailable = Field(description="NVML library version.")


class PowerInfo(FrozenModel):
    """A GPU's power limits and draw, in watts."""

    limit_w: float | Unavailable = Field(description="Power management limit in force.")
    default_limit_w: float | Unavailable = Field(description="The card's default power limit.")
    min_limit_w: float | Unavailable = Field(description="Lowest limit that may be set.")
    max_limit_w: float | Unavailable = Field(description="Highest limit that may be set.")
    enforced_limit_w: float | Unavailable = Field(
        description="Limit actually enforced (the lowest of all limiters)."
    )
    draw_w: float | Unavailable = Field(description="Power draw when probed.")


class ClockInfo(FrozenModel):
    """A GPU's clocks, in MHz."""

    sm_mhz: int | Unavailable = Field(description="Current SM clock.")
    sm_max_mhz: int | Unavailable = Field(description="Maximum SM clock.")
    mem_mhz: int | Unavailable = Field(description="Current memory clock.")
    mem_max_mhz: int | Unavailable = Field(description="Maximum memory clock.")


class PcieInfo(FrozenModel):
    """A GPU's PCIe link. An idle GPU may lower its link generation: compare under load."""

    bus_id: str | Unavailable = Field(description="PCI bus id, e.g. '00000000:19:00.0'.")
    gen_current: int | Unavailable = Field(description="Current link generation.")
    gen_max: int | Unavailable = Field(description="Highest generation of this GPU in this slot.")
    gen_gpu_max: int | Unavailable = Field(
        description="Highest generation the GPU supports; above gen_max means a slower slot."
    )
    width_current: int | Unavailable = Field(description="Current link width (lanes).")
    width_max: int | Unavailable = Field(description="Maximum link width (lanes).")


class NvLink(FrozenModel):
    """One NVLink of a GPU."""

    link: int = Field(description="Link index.")
    active: bool = Field(description="The link is up.")
    version: int | Unavailable = Field(description="NVLink version of the link.")
    remote_bus_id: str | Unavailable = Field(description="PCI bus id at the other end.")
    remote_device_type: str | Unavailable = Field(description="GPU, SWITCH, IBMNPU or UNKNOWN.")


class GpuInfo(FrozenModel):
    """One NVIDIA GPU as NVML saw it when probed."""

    index: int = Field(description="NVML index.")
    name: str | Unavailable = Field(description="Product name, e.g. 'NVIDIA H200'.")
    uuid: str | Unavailable = Field(
        description="GPU UUID; 'redacted:<keyed HMAC-SHA256 prefix>' when redacted."
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


class P2PStatus(FrozenModel):
    """Peer-to-peer capability from one GPU to another (nvmlDeviceGetP2PStatus)."""

    gpu_a: int = Field(description="Source GPU index.")
    gpu_b: int = Field(description="Peer GPU index.")
    read: str | Unavailable = Field(description="P2P read: OK, NOT_SUPPORTED, ...")
    write: str | Unavailable = Field(description="P2P write.")
    nvlink: str | Unavailable = Field(description="P2P over NVLink.")
    atomics: str | Unavailable = Field(description="P2P atomics.")
    prop: str | Unavailable = Field(description="P2P over PCIe (the PROP/PCI index).")


class Topology(FrozenModel):
    """The PCIe ancestor two GPUs share. NVLinked GPUs still report their PCIe path."""

    gpu_a: int = Field(description="First GPU index.")
    gpu_b: int = Field(description="Second GPU index (greater than gpu_a).")
    common_ancestor: str | Unavailable = Field(
        description="INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE or SYSTEM."
    )


class NvidiaSmiEvidence(FrozenModel):
    """nvidia-smi's own view of the topology, kept as text (escape sequences removed)."""

    topo_matrix: str | Unavailable = Field(description="Output of 'nvidia-smi topo -m'.")
    topo_p2p: str | Unavailable = Field(description="Output of 'nvidia-smi topo -p2p rwnap'.")


class HostProbe(FrozenModel):
    """What the machine is: CPU, OS, container, driver, GPUs and how they are linked."""

    collected_at: str = Field(description="When the readings were taken (UTC, ISO 8601).")
    redacted: bool = Field(description="Host name, paths, UUIDs and serials were redacted.")
    hostname: str | Unavailable = Field(
        description="Host name; 'redacted:<keyed HMAC-SHA256 prefix>' if redacted."
    )
    facts_from: str = Field(
        "this machine",
        description="Where the host name and OS were read: this machine, or the host of the "
        "container the probe ran in (given by kit compose env).",
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
# host load


class ProcessCpu(FrozenModel):
    """CPU time that processes of one name used in the measured windows."""

    comm: str = Field(
        description="The processes' name (/proc/[pid]/comm, at most 15 characters); never a "
        "command line."
    )
    cpu_s: float = Field(
        description="User + system CPU seconds, summed over processes and windows."
    )


class HostLoad(FrozenModel):
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


class Finding(FrozenModel):
    """One problem with the host or the measurement, for the report's validity verdict."""

    code: str = Field(description="Short slug, e.g. 'pcie-link-degraded'.")
    severity: Literal["error", "warning"] = Field(
        description="error: the numbers do not describe this hardware; warning: read with care."
    )
    message: str = Field(description="What was seen, with the GPUs and values.")
