"""The CPU: what /proc/cpuinfo says, and the vector tier an engine's CPU kernels are picked by.

:func:`parse_cpuinfo` keeps the facts of the text (a pure function, for recorded files too);
:func:`isa_level` and :func:`cpu_summary` read the tier from ``CpuInfo.isa``.
"""

from __future__ import annotations

from typing import Any, Literal

from kit.probe.models import CpuInfo

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

# Short vendor names for x86 vendor_id strings, for summaries.
_X86_VENDORS = {
    "GenuineIntel": "Intel",
    "AuthenticAMD": "AMD",
    "HygonGenuine": "Hygon",
    "CentaurHauls": "Centaur",
}

# arm64 'CPU implementer' codes (the MIDR implementer byte), as util-linux's lscpu names them.
ARM_IMPLEMENTERS = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "APM",
    0x51: "Qualcomm",
    0x53: "Samsung",
    0x56: "Marvell",
    0x61: "Apple",
    0x6D: "Microsoft",
    0xC0: "Ampere",
}

# (implementer, 'CPU part') -> core name, for the server cores an engine may meet.
ARM_PARTS = {
    (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD40): "Neoverse-V1",
    (0x41, 0xD49): "Neoverse-N2",
    (0x41, 0xD4F): "Neoverse-V2",
    (0x41, 0xD84): "Neoverse-V3",
    (0x41, 0xD8E): "Neoverse-N3",
    (0x46, 0x001): "A64FX",
    (0x48, 0xD01): "Kunpeng-920",
    (0xC0, 0xAC3): "Ampere-1",
    (0xC0, 0xAC4): "Ampere-1a",
}


# a table of /proc/cpuinfo keys, one branch each
def parse_cpuinfo(text: str) -> dict[str, Any]:  # noqa: C901
    """The facts kit keeps from the text of /proc/cpuinfo (a pure function, for recorded files).

    ``model``, ``vendor``, ``isa`` (the flags of :data:`X86_ISA_FLAGS` or :data:`ARM64_ISA_FLAGS`
    on the first processor, sorted; None without a flags line), ``processors``,
    ``physical_cores``, ``sockets`` and ``hypervisor``.
    """
    model: str | None = None
    vendor: str | None = None
    isa: list[str] | None = None
    implementer: int | None = None
    part: int | None = None
    processors = 0
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    hypervisor = False
    physical = core = ""
    for line in [*text.splitlines(), ""]:
        key, _, value = (field.strip() for field in line.partition(":"))
        if key == "processor":
            processors += 1
        elif key in ("model name", "Model Name", "Hardware") and model is None:
            model = value
        elif key == "vendor_id" and vendor is None:
            vendor = value
        elif key == "CPU implementer" and implementer is None:
            implementer = _hex(value)
        elif key == "CPU part" and part is None:
            part = _hex(value)
        elif key == "physical id":
            physical = value
            sockets.add(value)
        elif key == "core id":
            core = value
        elif key == "flags":
            hypervisor = hypervisor or "hypervisor" in value.split()
            if isa is None:
                isa = sorted(X86_ISA_FLAGS.intersection(value.split()))
        elif key == "Features" and isa is None:
            isa = sorted(ARM64_ISA_FLAGS.intersection(value.split()))
        elif not line.strip():
            if core:
                cores.add((physical, core))
            physical = core = ""
    if implementer is not None:
        vendor = vendor or ARM_IMPLEMENTERS.get(implementer, f"0x{implementer:02x}")
        if model is None and part is not None:
            model = ARM_PARTS.get((implementer, part))
    return {
        "model": model,
        "vendor": vendor,
        "isa": isa,
        "processors": processors,
        "physical_cores": len(cores) or None,
        "sockets": len(sockets) or None,
        "hypervisor": hypervisor if "flags" in text else None,
    }


def _hex(value: str) -> int | None:
    try:
        return int(value, 16)
    except ValueError:
        return None


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
