"""Building a HostProbe from a raw dump, redacting identities on the way."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kit.errors import BadInputError
from kit.probe.cpu import ARM64_ISA_FLAGS, X86_ISA_FLAGS
from kit.probe.dump import DUMP_FORMAT, DUMP_VERSION, FACTS_FROM_HERE, FACTS_FROM_HOST
from kit.probe.models import (
    ClockInfo,
    ContainerInfo,
    CpuInfo,
    DriverInfo,
    GpuInfo,
    HostProbe,
    NvidiaSmiEvidence,
    NvLink,
    OsInfo,
    P2PStatus,
    PcieInfo,
    PowerInfo,
    PythonInfo,
    Topology,
    Unavailable,
)
from kit.probe.nvml import (
    COMPUTE_MODES,
    NVLINK_REMOTE_TYPES,
    P2P_STATUS,
    TOPOLOGY_LEVELS,
    Raw,
    as_bool,
    as_bus_id,
    as_cuda_version,
    as_int,
    as_mib,
    as_name,
    as_reasons,
    as_str,
    as_uint,
    as_watts,
    read,
)
from kit.probe.redaction import redact_value, redaction_secret, runtime_name

REDACTED = Unavailable(reason="Redacted")
# Links that do not exist on a GPU answer InvalidArgument: they are not links, not failures.
_NO_SUCH_LINK = {"InvalidArgument"}


def probe_to_json(host: HostProbe) -> str:
    """The probe as indented JSON."""
    return host.model_dump_json(indent=2)


def host_probe_from_dump(
    dump: dict[str, Any], redact: bool = True, secret: bytes | None = None
) -> HostProbe:
    """Build the HostProbe from a raw dump (see :func:`kit.probe.dump.collect_nvml_dump`).

    Redacted identifiers are keyed with ``secret``, by default the install's
    (:func:`kit.probe.redaction.redaction_secret`)."""
    if not isinstance(dump, dict) or dump.get("format") != DUMP_FORMAT:
        raise BadInputError(
            "not a kit probe dump (no 'format': 'kit-probe-dump')",
            hint="record one with kit.probe.collect_nvml_dump() on the machine",
        )
    version = dump.get("format_version")
    if not isinstance(version, int) or version > DUMP_VERSION:
        raise BadInputError(
            f"probe dump format_version {version!r} is newer than this kit reads ({DUMP_VERSION})",
            hint="upgrade kit to read this dump",
        )
    host: dict[str, Any] = dump.get("host") or {}
    nvml: dict[str, Any] = dump.get("nvml") or {}
    scrub = _scrubber(host) if redact else _identity
    key = (redaction_secret() if secret is None else secret) if redact else None

    init: Raw = nvml.get("init") or {"error": "NotInDump"}
    nvml_error: str | None = None
    if "error" in init:
        nvml_error = f"NVML could not start: {init['error']}"
        if init.get("message"):
            nvml_error += f" ({init['message']})"
    devices = nvml.get("devices") or []
    if nvml_error is None and not devices:
        nvml_error = "NVML found no NVIDIA GPU"

    system: dict[str, Raw] = nvml.get("system") or {}
    missing = init if "error" in init else None
    hostname = host.get("hostname")
    facts_from = str(host.get("facts_from") or FACTS_FROM_HERE)
    given_stand_in = (
        facts_from == FACTS_FROM_HOST
        and isinstance(hostname, str)
        and hostname.startswith("redacted:")
    )
    smi: dict[str, Raw] = dump.get("nvidia_smi") or {}
    return HostProbe(
        collected_at=str(dump.get("collected_at", "")),
        redacted=redact,
        hostname=str(hostname) if given_stand_in else _identifier(hostname, key),
        facts_from=facts_from,
        os=_os(host),
        cpu=_cpu(host),
        container=_container(host),
        python=_python(host, scrub),
        nvml_error=nvml_error,
        driver=DriverInfo(
            driver_version=read(missing or system.get("nvmlSystemGetDriverVersion"), as_str),
            cuda_driver_version=read(
                missing or system.get("nvmlSystemGetCudaDriverVersion"), as_cuda_version
            ),
            nvml_version=read(missing or system.get("nvmlSystemGetNVMLVersion"), as_str),
        ),
        gpus=[_gpu(device, key) for device in devices],
        p2p=[_p2p(pair) for pair in nvml.get("pairs") or []],
        topology=[
            Topology(
                gpu_a=int(pair["a"]),
                gpu_b=int(pair["b"]),
                common_ancestor=read(
                    pair["calls"].get("nvmlDeviceGetTopologyCommonAncestor"),
                    as_name(TOPOLOGY_LEVELS, "LEVEL_"),
                ),
            )
            for pair in nvml.get("pairs") or []
            if int(pair["a"]) < int(pair["b"])
        ],
        nvidia_smi=NvidiaSmiEvidence(
            topo_matrix=read(smi.get("topo_m"), lambda v: scrub(as_str(v))),
            topo_p2p=read(smi.get("topo_p2p"), lambda v: scrub(as_str(v))),
        ),
    )


def _identity(text: str) -> str:
    return text


def _scrubber(host: dict[str, Any]) -> Callable[[str], str]:
    """A function that removes the home folder, host name and user name from free text."""
    replacements: list[tuple[re.Pattern[str], str]] = []
    if host.get("home") and host["home"] != "/":
        replacements.append((re.compile(re.escape(str(host["home"]))), "~"))
    if host.get("hostname"):
        replacements.append((re.compile(rf"\b{re.escape(str(host['hostname']))}\b"), "<host>"))
    user = str(host.get("user") or "")
    if len(user) >= 3 and user != "root":
        replacements.append((re.compile(rf"\b{re.escape(user)}\b"), "<user>"))

    def scrub(text: str) -> str:
        for pattern, replacement in replacements:
            text = pattern.sub(replacement, text)
        return text

    return scrub


def _identifier(value: Any, key: bytes | None) -> str | Unavailable:
    """The value, or with a redaction ``key`` its keyed stand-in."""
    if not value:
        return Unavailable(reason="NotInDump")
    return str(value) if key is None else redact_value(str(value), key)


def _fact(value: Any, reason: str = "NotReadable") -> Any:
    return Unavailable(reason=reason) if value is None else value


def _os(host: dict[str, Any]) -> OsInfo:
    release: dict[str, str] = host.get("os_release") or {}
    missing = "NoOsRelease"
    return OsInfo(
        name=_fact(release.get("PRETTY_NAME"), missing),
        id=_fact(release.get("ID"), missing),
        version_id=_fact(release.get("VERSION_ID"), missing),
        kernel=str(host.get("kernel", "")),
        arch=str(host.get("arch", "")),
    )


def _cpu(host: dict[str, Any]) -> CpuInfo:
    info: dict[str, Any] = host.get("cpuinfo") or {}
    total_kib = host.get("meminfo_total_kib")
    return CpuInfo(
        model=_fact(info.get("model"), "NotInCpuinfo"),
        vendor=_cpu_vendor(info),
        isa=_cpu_isa(info),
        logical_cores=_fact(host.get("os_cpu_count")),
        usable_cores=_fact(host.get("affinity_cpus")),
        physical_cores=_fact(info.get("physical_cores"), "NotInCpuinfo"),
        sockets=_fact(info.get("sockets"), "NotInCpuinfo"),
        hypervisor=_fact(info.get("hypervisor"), "NotInCpuinfo"),
        ram_total_mib=_fact(None if total_kib is None else int(total_kib) // 1024),
        cgroup_memory_limit_mib=_cgroup_limit_mib(host.get("cgroup_memory_max")),
        numa_nodes=_fact(None if host.get("numa_nodes") is None else len(host["numa_nodes"])),
    )


def _cpu_vendor(info: dict[str, Any]) -> str | Unavailable | None:
    """The vendor; None from a dump written before kit recorded it."""
    if "error" in info:
        return Unavailable(reason=str(info["error"]))
    if "vendor" not in info:
        return None
    vendor = info["vendor"]
    return Unavailable(reason="NotInCpuinfo") if vendor is None else str(vendor)


def _cpu_isa(info: dict[str, Any]) -> list[str] | None:
    """The known ISA flags of the dump, sorted; None when not recorded."""
    isa = info.get("isa")
    if not isinstance(isa, list):
        return None
    return sorted({str(flag) for flag in isa} & (X86_ISA_FLAGS | ARM64_ISA_FLAGS))


def _cgroup_limit_mib(text: Any) -> int | None:
    if not isinstance(text, str) or not text.isdigit():
        return None  # "max", or nothing readable
    limit = int(text)
    return None if limit >= 2**62 else limit // (1024 * 1024)  # cgroup v1 "no limit" is huge


def _container(host: dict[str, Any]) -> ContainerInfo:
    raw: dict[str, Any] = host.get("container") or {}
    env: dict[str, str] = raw.get("env") or {}
    cgroup = str(raw.get("cgroup") or "")
    found: list[tuple[str, str]] = []  # (runtime, evidence)
    if "KUBERNETES_SERVICE_HOST" in env:
        found.append(("kubernetes", "env KUBERNETES_SERVICE_HOST"))
    for marker, runtime in (
        ("kubepods", "kubernetes"),
        ("libpod", "podman"),
        ("docker", "docker"),
        ("containerd", "containerd"),
        ("lxc", "lxc"),
    ):
        if marker in cgroup:
            found.append((runtime, f"cgroup mentions {marker}"))
    if raw.get("containerenv"):
        found.append(("podman", "/run/.containerenv exists"))
    if raw.get("dockerenv"):
        found.append(("docker", "/.dockerenv exists"))
    if env.get("container"):
        runtime = runtime_name(env["container"])
        found.append((runtime, f"env container={runtime}"))
    for name in ("DOCKER_CONTAINER", "SINGULARITY_NAME"):
        if name in env:
            found.append(("singularity" if name.startswith("SING") else "docker", f"env {name}"))
    return ContainerInfo(
        detected=bool(found),
        runtime=found[0][0] if found else None,
        evidence=[evidence for _, evidence in found],
    )


def _python(host: dict[str, Any], scrub: Callable[[str], str]) -> PythonInfo:
    raw: dict[str, Any] = host.get("python") or {}
    return PythonInfo(
        version=str(raw.get("version", "")),
        implementation=str(raw.get("implementation", "")),
        executable=scrub(str(raw.get("executable", ""))),
    )


def _gpu(device: dict[str, Any], key: bytes | None) -> GpuInfo:
    calls: dict[str, Raw] = device.get("calls") or {}
    handle: Raw = device.get("handle") or {}
    failed = handle if "error" in handle else None

    def get(key: str) -> Raw | None:
        return failed or calls.get(key)

    uuid = read(get("nvmlDeviceGetUUID"), as_str)
    serial = read(get("nvmlDeviceGetSerial"), as_str)
    if key is not None:
        uuid = redact_value(uuid, key) if isinstance(uuid, str) else uuid
        serial = REDACTED if isinstance(serial, str) else serial
    # A dump from old bindings holds the "throttle" call where the "event" one was missing.
    reasons = calls.get("nvmlDeviceGetCurrentClocksThrottleReasons") or get(
        "nvmlDeviceGetCurrentClocksEventReasons"
    )
    constraints = get("nvmlDeviceGetPowerManagementLimitConstraints")
    return GpuInfo(
        index=int(device["index"]),
        name=read(get("nvmlDeviceGetName"), as_str),
        uuid=uuid,
        serial=serial,
        vbios_version=read(get("nvmlDeviceGetVbiosVersion"), as_str),
        numa_node=read(get("nvmlDeviceGetNumaNodeId"), as_int),
        memory_total_mib=read(get("nvmlDeviceGetMemoryInfo"), as_mib("total")),
        memory_used_mib=read(get("nvmlDeviceGetMemoryInfo"), as_mib("used")),
        power=PowerInfo(
            limit_w=read(get("nvmlDeviceGetPowerManagementLimit"), as_watts),
            default_limit_w=read(get("nvmlDeviceGetPowerManagementDefaultLimit"), as_watts),
            min_limit_w=read(constraints, lambda v: as_watts(v[0])),
            max_limit_w=read(constraints, lambda v: as_watts(v[1])),
            enforced_limit_w=read(get("nvmlDeviceGetEnforcedPowerLimit"), as_watts),
            draw_w=read(get("nvmlDeviceGetPowerUsage"), as_watts),
        ),
        clocks=ClockInfo(
            sm_mhz=read(get("nvmlDeviceGetClockInfo(SM)"), as_uint),
            sm_max_mhz=read(get("nvmlDeviceGetMaxClockInfo(SM)"), as_uint),
            mem_mhz=read(get("nvmlDeviceGetClockInfo(MEM)"), as_uint),
            mem_max_mhz=read(get("nvmlDeviceGetMaxClockInfo(MEM)"), as_uint),
        ),
        clock_event_reasons=read(reasons, as_reasons),
        temperature_c=read(get("nvmlDeviceGetTemperature(GPU)"), as_uint),
        pcie=PcieInfo(
            bus_id=read(get("nvmlDeviceGetPciInfo"), as_bus_id),
            gen_current=read(get("nvmlDeviceGetCurrPcieLinkGeneration"), as_uint),
            gen_max=read(get("nvmlDeviceGetMaxPcieLinkGeneration"), as_uint),
            gen_gpu_max=read(get("nvmlDeviceGetGpuMaxPcieLinkGeneration"), as_uint),
            width_current=read(get("nvmlDeviceGetCurrPcieLinkWidth"), as_uint),
            width_max=read(get("nvmlDeviceGetMaxPcieLinkWidth"), as_uint),
        ),
        nvlinks=_nvlinks(device.get("nvlinks"), failed),
        persistence_mode=read(get("nvmlDeviceGetPersistenceMode"), as_bool),
        mig_mode=read(get("nvmlDeviceGetMigMode"), lambda v: as_bool(v[0])),
        compute_mode=read(get("nvmlDeviceGetComputeMode"), as_name(COMPUTE_MODES, "MODE_")),
    )


def _nvlinks(entries: Any, failed: Raw | None) -> list[NvLink] | Unavailable:
    if failed is not None:
        return Unavailable(reason=str(failed["error"]))
    if not entries:
        return Unavailable(reason="NotInDump")
    links: list[NvLink] = []
    errors: list[str] = []
    for entry in entries:
        state = read(entry.get("nvmlDeviceGetNvLinkState"), as_bool)
        if isinstance(state, Unavailable):
            errors.append(state.reason)
            continue
        links.append(
            NvLink(
                link=int(entry["link"]),
                active=state,
                version=read(entry.get("nvmlDeviceGetNvLinkVersion"), as_uint),
                remote_bus_id=read(entry.get("nvmlDeviceGetNvLinkRemotePciInfo"), as_bus_id),
                remote_device_type=read(
                    entry.get("nvmlDeviceGetNvLinkRemoteDeviceType"),
                    as_name(NVLINK_REMOTE_TYPES, "TYPE_"),
                ),
            )
        )
    if links:
        return links
    real = [reason for reason in errors if reason not in _NO_SUCH_LINK]
    return Unavailable(reason=(real or errors)[0])


def _p2p(pair: dict[str, Any]) -> P2PStatus:
    calls: dict[str, Raw] = pair.get("calls") or {}
    status = as_name(P2P_STATUS, "STATUS_")

    def get(key: str) -> str | Unavailable:
        return read(calls.get(f"nvmlDeviceGetP2PStatus({key})"), status)

    return P2PStatus(
        gpu_a=int(pair["a"]),
        gpu_b=int(pair["b"]),
        read=get("READ"),
        write=get("WRITE"),
        nvlink=get("NVLINK"),
        atomics=get("ATOMICS"),
        prop=get("PROP"),
    )
