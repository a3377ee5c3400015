"""Reading the machine into a raw dump: a plain JSON-able dict of what each source returned.

The dump keeps NVML's answers call by call (``{"value": ...}`` or ``{"error": "NotSupported"}``),
the host facts read from /proc, /sys and /etc, and nvidia-smi's topology text, all unredacted.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from kit.probe.cpu import parse_cpuinfo
from kit.probe.nvml import P2P_CAPS, Raw, call, constant, error_name
from kit.probe.redaction import redact_value

DUMP_FORMAT = "kit-probe-dump"
DUMP_VERSION = 1

# Device calls: dump key -> (pynvml function, constant arguments as (pynvml name, default)).
_DEVICE_CALLS: tuple[tuple[str, str, tuple[tuple[str, int], ...]], ...] = (
    ("nvmlDeviceGetName", "nvmlDeviceGetName", ()),
    ("nvmlDeviceGetUUID", "nvmlDeviceGetUUID", ()),
    ("nvmlDeviceGetSerial", "nvmlDeviceGetSerial", ()),
    ("nvmlDeviceGetVbiosVersion", "nvmlDeviceGetVbiosVersion", ()),
    ("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo", ()),
    ("nvmlDeviceGetNumaNodeId", "nvmlDeviceGetNumaNodeId", ()),
    ("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo", ()),
    ("nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetPowerManagementLimit", ()),
    ("nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetPowerManagementDefaultLimit", ()),
    (
        "nvmlDeviceGetPowerManagementLimitConstraints",
        "nvmlDeviceGetPowerManagementLimitConstraints",
        (),
    ),
    ("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetEnforcedPowerLimit", ()),
    ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetPowerUsage", ()),
    ("nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetTotalEnergyConsumption", ()),
    ("nvmlDeviceGetClockInfo(SM)", "nvmlDeviceGetClockInfo", (("NVML_CLOCK_SM", 1),)),
    ("nvmlDeviceGetClockInfo(MEM)", "nvmlDeviceGetClockInfo", (("NVML_CLOCK_MEM", 2),)),
    ("nvmlDeviceGetMaxClockInfo(SM)", "nvmlDeviceGetMaxClockInfo", (("NVML_CLOCK_SM", 1),)),
    ("nvmlDeviceGetMaxClockInfo(MEM)", "nvmlDeviceGetMaxClockInfo", (("NVML_CLOCK_MEM", 2),)),
    ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksEventReasons", ()),
    ("nvmlDeviceGetSupportedClocksEventReasons", "nvmlDeviceGetSupportedClocksEventReasons", ()),
    (
        "nvmlDeviceGetTemperature(GPU)",
        "nvmlDeviceGetTemperature",
        (("NVML_TEMPERATURE_GPU", 0),),
    ),
    ("nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkGeneration", ()),
    ("nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkGeneration", ()),
    ("nvmlDeviceGetGpuMaxPcieLinkGeneration", "nvmlDeviceGetGpuMaxPcieLinkGeneration", ()),
    ("nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetCurrPcieLinkWidth", ()),
    ("nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth", ()),
    ("nvmlDeviceGetPersistenceMode", "nvmlDeviceGetPersistenceMode", ()),
    ("nvmlDeviceGetMigMode", "nvmlDeviceGetMigMode", ()),
    ("nvmlDeviceGetComputeMode", "nvmlDeviceGetComputeMode", ()),
)

_SYSTEM_CALLS = (
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetNVMLVersion",
)

_NO_FUNCTION = {"FunctionMissing", "FunctionNotFound"}

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")

_CONTAINER_ENV = ("container", "KUBERNETES_SERVICE_HOST", "DOCKER_CONTAINER", "SINGULARITY_NAME")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def collect_nvml_dump() -> dict[str, Any]:
    """Read NVML, nvidia-smi and the host into a raw, JSON-able dump. Never raises. It holds
    host name, user, UUIDs and serials unredacted: :func:`anonymize_dump` replaces them before a
    dump is shared; :func:`kit.probe.parse.host_probe_from_dump` redacts what it builds."""
    return {
        "format": DUMP_FORMAT,
        "format_version": DUMP_VERSION,
        "collected_at": utc_now(),
        "nvidia_ml_py": _package_version("nvidia-ml-py"),
        "nvml": _collect_nvml(),
        "nvidia_smi": _collect_nvidia_smi(),
        "host": collect_host_facts(),
    }


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _collect_nvml() -> dict[str, Any]:
    try:
        # lazy: a failed import is a probe answer
        import pynvml  # noqa: PLC0415
    except ImportError as exc:
        return {"init": {"error": "ImportError", "message": str(exc)}}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no driver, no library, a broken driver: all are answers here
        return {"init": {"error": error_name(exc), "message": str(exc)}}
    try:
        return _collect_nvml_devices(pynvml)
    finally:
        call(pynvml, "nvmlShutdown")


def _collect_nvml_devices(nvml: Any) -> dict[str, Any]:
    section: dict[str, Any] = {"init": {"value": None}}
    section["system"] = {name: call(nvml, name) for name in _SYSTEM_CALLS}
    count = call(nvml, "nvmlDeviceGetCount")
    section["device_count"] = count
    handles: dict[int, Any] = {}
    devices: list[dict[str, Any]] = []
    for index in range(int(count.get("value") or 0)):
        try:
            handles[index] = nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:
            devices.append({"index": index, "handle": {"error": error_name(exc)}})
            continue
        devices.append(_collect_device(nvml, index, handles[index]))
    section["devices"] = devices
    pairs: list[dict[str, Any]] = []
    for a, handle_a in handles.items():
        for b, handle_b in handles.items():
            if a == b:
                continue
            calls: dict[str, Raw] = {}
            for key, name, default in P2P_CAPS:
                index = constant(nvml, name, default)
                calls[f"nvmlDeviceGetP2PStatus({key})"] = call(
                    nvml, "nvmlDeviceGetP2PStatus", handle_a, handle_b, index
                )
            calls["nvmlDeviceGetTopologyCommonAncestor"] = call(
                nvml, "nvmlDeviceGetTopologyCommonAncestor", handle_a, handle_b
            )
            pairs.append({"a": a, "b": b, "calls": calls})
    section["pairs"] = pairs
    return section


def _collect_device(nvml: Any, index: int, handle: Any) -> dict[str, Any]:
    calls: dict[str, Raw] = {}
    for key, function, args in _DEVICE_CALLS:
        values = [constant(nvml, name, default) for name, default in args]
        calls[key] = call(nvml, function, handle, *values)
    # Drivers and bindings older than the "clocks event" names only have the "throttle" ones.
    if calls["nvmlDeviceGetCurrentClocksEventReasons"].get("error") in _NO_FUNCTION:
        calls["nvmlDeviceGetCurrentClocksThrottleReasons"] = call(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", handle
        )
    links: list[dict[str, Any]] = []
    for link in range(constant(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        entry: dict[str, Any] = {"link": link}
        entry["nvmlDeviceGetNvLinkState"] = call(nvml, "nvmlDeviceGetNvLinkState", handle, link)
        if "value" in entry["nvmlDeviceGetNvLinkState"]:
            for function in (
                "nvmlDeviceGetNvLinkVersion",
                "nvmlDeviceGetNvLinkRemotePciInfo",
                "nvmlDeviceGetNvLinkRemoteDeviceType",
            ):
                entry[function] = call(nvml, function, handle, link)
        links.append(entry)
    return {"index": index, "handle": {"value": None}, "calls": calls, "nvlinks": links}


def strip_escapes(text: str) -> str:
    """Text without terminal escape sequences (nvidia-smi colours its topology legend)."""
    return "\n".join(line.rstrip() for line in _ANSI.sub("", text).splitlines())


def _run_text(args: list[str]) -> Raw:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return {"error": "Timeout"}
    except OSError as exc:
        return {"error": type(exc).__name__}
    if done.returncode != 0:
        return {"error": f"ExitCode{done.returncode}", "message": strip_escapes(done.stderr)[-500:]}
    return {"value": strip_escapes(done.stdout)}


def _collect_nvidia_smi() -> dict[str, Raw]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {
            "topo_m": {"error": "NvidiaSmiNotFound"},
            "topo_p2p": {"error": "NvidiaSmiNotFound"},
        }
    return {
        "topo_m": _run_text([exe, "topo", "-m"]),
        "topo_p2p": _run_text([exe, "topo", "-p2p", "rwnap"]),
    }


# ---------------------------------------------------------------------------------------------
# host facts


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _os_release() -> dict[str, str] | None:
    text = _read_text("/etc/os-release") or _read_text("/usr/lib/os-release")
    if text is None:
        return None
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            values[key.strip()] = value.strip().strip('"').strip("'")
    return values


def _cpuinfo() -> dict[str, Any]:
    text = _read_text("/proc/cpuinfo")
    if text is None:
        return {"error": "NoProcCpuinfo"}
    return parse_cpuinfo(text)


def _meminfo_total_kib() -> int | None:
    for line in (_read_text("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return None


def _cgroup_memory_limit() -> str | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = _read_text(path)
        if text is not None:
            return text.strip()
    return None


def _numa_nodes() -> list[int] | None:
    base = Path("/sys/devices/system/node")
    if not base.is_dir():
        return None
    return sorted(int(p.name[4:]) for p in base.glob("node[0-9]*"))


def _affinity() -> int | None:
    getter = getattr(os, "sched_getaffinity", None)
    return len(getter(0)) if getter is not None else None


HOST_FACTS_ENV = "KIT_HOST_FACTS"  # the host's identity and OS, given to a container
FACTS_FROM_HOST = "the host (kit compose env)"
FACTS_FROM_HERE = "this machine"


def host_facts_for_containers() -> str:
    """What a container cannot see of its host, as JSON for ``$KIT_HOST_FACTS``: the host name
    (already a keyed stand-in, so the env file names no host) and /etc/os-release. The kernel,
    CPU and memory a container reads are the host's already."""
    return json.dumps({"hostname": redact_value(socket.gethostname()), "os_release": _os_release()})


def _given_host_facts() -> dict[str, Any] | None:
    """``$KIT_HOST_FACTS`` checked: a stand-in host name and string-valued os-release."""
    raw = os.environ.get(HOST_FACTS_ENV, "")
    if not raw or len(raw) > 65536:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    hostname, release = data.get("hostname"), data.get("os_release")
    if not (isinstance(hostname, str) and hostname.startswith("redacted:")):
        return None
    if release is not None and not (
        isinstance(release, dict) and all(isinstance(v, str) for v in release.values())
    ):
        return None
    return {"hostname": hostname, "os_release": release}


def collect_host_facts() -> dict[str, Any]:
    """Raw host facts: identity, OS, CPU, memory, NUMA, container evidence, Python. In a
    container given ``$KIT_HOST_FACTS``, the host name and OS are the host's, and
    ``facts_from`` says so."""
    try:
        user: str | None = getpass.getuser()
    except Exception:  # no passwd entry for this uid in some containers
        user = None
    given = _given_host_facts()
    return {
        "hostname": given["hostname"] if given else socket.gethostname(),
        "facts_from": FACTS_FROM_HOST if given else FACTS_FROM_HERE,
        "user": user,
        "home": str(Path.home()) if os.environ.get("HOME") or user else None,
        "os_release": given["os_release"] if given else _os_release(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "cpuinfo": _cpuinfo(),
        "os_cpu_count": os.cpu_count(),
        "affinity_cpus": _affinity(),
        "meminfo_total_kib": _meminfo_total_kib(),
        "cgroup_memory_max": _cgroup_memory_limit(),
        "numa_nodes": _numa_nodes(),
        "container": {
            "dockerenv": Path("/.dockerenv").exists(),
            "containerenv": Path("/run/.containerenv").exists(),
            "cgroup": (_read_text("/proc/self/cgroup") or "")[:4000],
            "env": {name: os.environ[name] for name in _CONTAINER_ENV if name in os.environ},
        },
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
    }


# ---------------------------------------------------------------------------------------------
# sharing


def anonymize_dump(dump: dict[str, Any]) -> dict[str, Any]:
    """A copy of a dump safe to share: host name, user, home, UUIDs and serials replaced.

    Replacements are placeholders of the same shape (``GPU-00000000-...-000000000001``), so the
    copy still parses. They apply to every string value in the dump (keys are left alone), the
    host name as a whole word only.
    """
    host = dump.get("host") or {}
    patterns: list[tuple[re.Pattern[str], str]] = []
    for device in (dump.get("nvml") or {}).get("devices") or []:
        calls = device.get("calls") or {}
        number = int(device.get("index", 0)) + 1
        uuid = (calls.get("nvmlDeviceGetUUID") or {}).get("value")
        if uuid:
            fake = f"GPU-00000000-0000-0000-0000-{number:012d}"
            patterns.append((re.compile(re.escape(str(uuid))), fake))
        serial = (calls.get("nvmlDeviceGetSerial") or {}).get("value")
        if serial:
            patterns.append((re.compile(re.escape(str(serial))), f"{number:013d}"))
    if host.get("home") and host["home"] != "/":
        patterns.append(
            (re.compile(re.escape(str(host["home"])) + r"(?=/|$)"), "/home/example-user")
        )
    if host.get("hostname"):
        patterns.append((re.compile(rf"\b{re.escape(str(host['hostname']))}\b"), "example-host"))

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            for pattern, replacement in patterns:
                value = pattern.sub(replacement, value)
            return value
        if isinstance(value, dict):
            return {key: scrub(item) for key, item in value.items()}
        if isinstance(value, list):
            return [scrub(item) for item in value]
        return value

    copy: dict[str, Any] = scrub(dump)
    if copy.get("host", {}).get("user"):
        copy["host"]["user"] = "example-user"
    return copy
