"""Findings about the host and the measurement, for the report's validity verdict."""

from __future__ import annotations

from kit.probe.models import Finding, HostLoad, HostProbe, Unavailable
from kit.probe.sampling import GpuSampling

# Clocks-event reasons that say nothing against a measurement: an idle GPU, boost sync, display.
BENIGN_REASONS = frozenset({"GpuIdle", "SyncBoost", "DisplayClockSetting"})
# Reasons that slow the GPU below what the hardware would do when healthy and cool.
SEVERE_REASONS = frozenset(
    {"HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"}
)
# Host load (kit.probe.hostload): above these, the measured window was not the bench's alone.
OTHER_CPU_PCT_MAX = 10.0  # other processes' CPU, % of the machine's capacity
STEAL_PCT_MAX = 5.0  # CPU time the hypervisor gave to other guests, % of all CPU time
FOREIGN_GPU_PROCESSES_MAX = 0  # compute processes on the GPUs that are not ours
TOP_CPU_S_MIN = 0.1  # other processes named in the message used at least this many seconds


def probe_findings(host: HostProbe, sampling: GpuSampling | None) -> list[Finding]:
    """Every finding, errors first, then by code.

    From the probe: a slot slower than the GPU, power limits that differ across cards or sit
    below the default. From the sampling: a PCIe link below its maximum under load, throttling
    in the measured window. An idle GPU may lower its PCIe link; only load counts.
    """
    findings = [
        *_slot_findings(host),
        *_power_findings(host),
        *(_sampling_findings(host, sampling) if sampling is not None else []),
    ]
    return sorted(findings, key=lambda f: (f.severity != "error", f.code, f.message))


def _slot_findings(host: HostProbe) -> list[Finding]:
    slow = [
        f"GPU {g.index} Gen{g.pcie.gen_max} (GPU supports Gen{g.pcie.gen_gpu_max})"
        for g in host.gpus
        if isinstance(g.pcie.gen_max, int)
        and isinstance(g.pcie.gen_gpu_max, int)
        and g.pcie.gen_max < g.pcie.gen_gpu_max
    ]
    if not slow:
        return []
    return [
        Finding(
            code="pcie-slot-below-gpu-max",
            severity="warning",
            message="PCIe slot slower than the GPU: " + "; ".join(slow),
        )
    ]


def _limit(power_limit: float | Unavailable, enforced: float | Unavailable) -> float | None:
    for value in (enforced, power_limit):
        if isinstance(value, float):
            return value
    return None


def _power_findings(host: HostProbe) -> list[Finding]:
    findings: list[Finding] = []
    limits = {
        g.index: limit
        for g in host.gpus
        if (limit := _limit(g.power.limit_w, g.power.enforced_limit_w)) is not None
    }
    if len(set(limits.values())) > 1:
        listed = ", ".join(f"GPU {i} {w:g} W" for i, w in sorted(limits.items()))
        findings.append(
            Finding(
                code="power-limits-differ",
                severity="warning",
                message=f"GPU power limits differ: {listed}",
            )
        )
    low = [
        f"GPU {g.index} {limits[g.index]:g} W (default {g.power.default_limit_w:g} W)"
        for g in host.gpus
        if g.index in limits
        and isinstance(g.power.default_limit_w, float)
        and limits[g.index] < g.power.default_limit_w
    ]
    if low:
        findings.append(
            Finding(
                code="power-limit-below-default",
                severity="warning",
                message="Power limit below the card's default: " + "; ".join(low),
            )
        )
    return findings


def _sampling_findings(host: HostProbe, sampling: GpuSampling) -> list[Finding]:
    if sampling.unavailable is not None or not sampling.summaries:
        if not host.gpus:
            return []
        why = sampling.unavailable or "no readings in the measured window"
        return [
            Finding(
                code="gpu-not-sampled",
                severity="warning",
                message=f"GPU power, clocks and links were not sampled: {why}",
            )
        ]
    probed = {g.index: g for g in host.gpus}
    degraded: list[str] = []
    severe: list[str] = []
    limited: list[str] = []
    for s in sampling.summaries:
        gen_max = s.pcie_gen_max
        width_max = s.pcie_width_max
        if s.gpu in probed:  # the sampler's own reading first, the probe's as a fallback
            gen_max = gen_max if isinstance(gen_max, int) else probed[s.gpu].pcie.gen_max
            width_max = width_max if isinstance(width_max, int) else probed[s.gpu].pcie.width_max
        gen, width = s.pcie_gen_min_under_load, s.pcie_width_min_under_load
        low_gen = isinstance(gen, int) and isinstance(gen_max, int) and gen < gen_max
        low_width = isinstance(width, int) and isinstance(width_max, int) and width < width_max
        if low_gen or low_width:
            degraded.append(
                f"GPU {s.gpu} down to Gen{gen} x{width} (max Gen{gen_max} x{width_max})"
            )
        reasons = [r for r in s.clock_event_reasons_seen if r not in BENIGN_REASONS]
        bad = [r for r in reasons if r in SEVERE_REASONS]
        mild = [r for r in reasons if r not in SEVERE_REASONS]
        if bad:
            severe.append(f"GPU {s.gpu} {', '.join(bad)}")
        if mild:
            limited.append(f"GPU {s.gpu} {', '.join(mild)}")
    findings: list[Finding] = []
    if degraded:
        findings.append(
            Finding(
                code="pcie-link-degraded",
                severity="error",
                message="PCIe link below its maximum under load: " + "; ".join(degraded),
            )
        )
    if severe:
        findings.append(
            Finding(
                code="gpu-throttled",
                severity="error",
                message="GPU slowed down (thermal or hardware) while measuring: "
                + "; ".join(severe),
            )
        )
    if limited:
        findings.append(
            Finding(
                code="gpu-clocks-limited",
                severity="warning",
                message="GPU clocks held back by power cap or settings while measuring: "
                + "; ".join(limited),
            )
        )
    return findings


def host_load_findings(load: HostLoad) -> list[Finding]:
    """Warnings that the host was not quiet while measuring, by code.

    ``host-not-quiet`` when other processes used more than :data:`OTHER_CPU_PCT_MAX` % of the
    CPU, ``cpu-steal`` when steal passed :data:`STEAL_PCT_MAX` %, ``foreign-gpu-processes``
    when a GPU ran compute processes that are not ours. Figures that were not measured give none.
    """
    findings: list[Finding] = []
    if load.other_cpu_pct is not None and load.other_cpu_pct > OTHER_CPU_PCT_MAX:
        top = ", ".join(
            f"{p.comm} {p.cpu_s:.1f} s" for p in load.top_other[:3] if p.cpu_s >= TOP_CPU_S_MIN
        )
        findings.append(
            Finding(
                code="host-not-quiet",
                severity="warning",
                message=f"host not quiet: other processes used {load.other_cpu_pct:.0f} % of the "
                f"CPU ({load.cores} cores, {load.window_s:.1f} s measured"
                + (f"; top: {top})" if top else ")"),
            )
        )
    if load.steal_pct is not None and load.steal_pct > STEAL_PCT_MAX:
        findings.append(
            Finding(
                code="cpu-steal",
                severity="warning",
                message=f"CPU steal: the hypervisor gave {load.steal_pct:.0f} % of this VM's CPU "
                "time to other guests while measuring",
            )
        )
    foreign = load.foreign_gpu_processes
    if foreign is not None and foreign > FOREIGN_GPU_PROCESSES_MAX:
        findings.append(
            Finding(
                code="foreign-gpu-processes",
                severity="warning",
                message=f"{foreign} compute process{'es' if foreign != 1 else ''} not ours "
                "ran on the GPUs while measuring",
            )
        )
    return sorted(findings, key=lambda f: f.code)
