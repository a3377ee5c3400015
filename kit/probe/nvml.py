"""Calling NVML and turning what it returns into plain values.

Every NVML call goes through :func:`call`, which never raises: it returns a *raw result*, a small
JSON-able dict, ``{"value": ...}`` or ``{"error": "NotSupported"}`` (the NVML error name), what
the dump stores; :func:`read` turns one into a value or an :class:`~kit.probe.models.Unavailable`.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kit.probe.models import Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
Raw = dict[str, Any]

MIB = 1024 * 1024
# NVML marks an unsigned value it could not measure with all bits set.
_NOT_AVAILABLE_UINT = 0xFFFFFFFF

# nvmlClocksEventReason* bits (nvml.h); the last two exist only as nvmlClocksThrottleReason*.
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x001, "GpuIdle"),
    (0x002, "ApplicationsClocksSetting"),
    (0x004, "SwPowerCap"),
    (0x008, "HwSlowdown"),
    (0x010, "SyncBoost"),
    (0x020, "SwThermalSlowdown"),
    (0x040, "HwThermalSlowdown"),
    (0x080, "HwPowerBrakeSlowdown"),
    (0x100, "DisplayClockSetting"),
    (0x200, "BoardLimit"),
    (0x400, "Reliability"),
)

TOPOLOGY_LEVELS = {
    0: "INTERNAL",
    10: "SINGLE",
    20: "MULTIPLE",
    30: "HOSTBRIDGE",
    40: "NODE",
    50: "SYSTEM",
}

P2P_STATUS = {
    0: "OK",
    1: "CHIPSET_NOT_SUPPORTED",
    2: "GPU_NOT_SUPPORTED",
    3: "IOH_TOPOLOGY_NOT_SUPPORTED",
    4: "DISABLED_BY_REGKEY",
    5: "NOT_SUPPORTED",
    6: "UNKNOWN",
}

# (dump key suffix, pynvml constant, value in nvml.h). PROP is also called PCI.
P2P_CAPS: tuple[tuple[str, str, int], ...] = (
    ("READ", "NVML_P2P_CAPS_INDEX_READ", 0),
    ("WRITE", "NVML_P2P_CAPS_INDEX_WRITE", 1),
    ("NVLINK", "NVML_P2P_CAPS_INDEX_NVLINK", 2),
    ("ATOMICS", "NVML_P2P_CAPS_INDEX_ATOMICS", 3),
    ("PROP", "NVML_P2P_CAPS_INDEX_PROP", 4),
)

NVLINK_REMOTE_TYPES = {0: "GPU", 1: "IBMNPU", 2: "SWITCH", 255: "UNKNOWN"}
COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}


def error_name(exc: BaseException) -> str:
    """The short name of an NVML error (``NVMLError_NotSupported`` -> ``NotSupported``)."""
    name = type(exc).__name__
    if name.startswith("NVMLError_"):
        return name.removeprefix("NVMLError_")
    if name == "NVMLError":
        return f"NvmlError{getattr(exc, 'value', '')}"
    return name


def start_nvml() -> tuple[Any, str | None]:
    """pynvml, initialised; or None and why not (``NVML could not start: <error name>``)."""
    try:
        # lazy: a failed import is a probe answer
        import pynvml  # noqa: PLC0415

        pynvml.nvmlInit()
    except Exception as exc:  # no bindings, no driver, a broken driver: all are answers here
        return None, f"NVML could not start: {error_name(exc)}"
    return pynvml, None


def jsonable(value: Any) -> Any:
    """A plain JSON value for what a pynvml function returned (bytes, ctypes structs, lists)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, ctypes.Structure):
        return {name: jsonable(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes.Array):
        return [jsonable(v) for v in value]
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def call(nvml: Any, function: str, *args: Any) -> Raw:
    """Call ``nvml.<function>(*args)``; return ``{"value": ...}`` or ``{"error": name}``."""
    fn = getattr(nvml, function, None)
    if fn is None:
        return {"error": "FunctionMissing"}
    try:
        return {"value": jsonable(fn(*args))}
    except nvml.NVMLError as exc:
        return {"error": error_name(exc)}
    except Exception as exc:  # a probe reports what broke; it never stops the run
        log.debug("%s%r failed", function, args, exc_info=True)
        return {"error": error_name(exc)}


def constant(nvml: Any, name: str, default: int) -> int:
    """An integer pynvml constant; nvidia-ml-py 13.x defines some as 1-tuples, e.g. ``(0,)``."""
    value = getattr(nvml, name, default)
    if isinstance(value, (tuple, list)):
        value = value[0] if value else default
    return int(value)


def read(raw: Raw | None, convert: Callable[[Any], T]) -> T | Unavailable:
    """The converted value of a raw result, or Unavailable with the NVML error name."""
    if raw is None:
        return Unavailable(reason="NotInDump")
    if "error" in raw:
        return Unavailable(reason=str(raw["error"]))
    try:
        return convert(raw["value"])
    except _Missing as missing:
        return Unavailable(reason=missing.reason)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return Unavailable(reason="Unparseable")


class _Missing(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def as_str(value: Any) -> str:
    text = str(value).strip()
    if not text:
        raise _Missing("Empty")
    return text


def as_uint(value: Any) -> int:
    """A small unsigned reading (clock, link, temperature); all bits set means not measured."""
    number = int(value)
    if number < 0 or number >= _NOT_AVAILABLE_UINT:
        raise _Missing("ValueNotAvailable")
    return number


def as_int(value: Any) -> int:
    return int(value)


def as_watts(value: Any) -> float:
    """Milliwatts to watts."""
    return round(as_uint(value) / 1000, 3)


def as_mib(field: str) -> Callable[[Any], int]:
    """Bytes in one field of a memory struct to MiB."""

    def convert(value: Any) -> int:
        return int(value[field]) // MIB

    return convert


def as_bool(value: Any) -> bool:
    return bool(int(value))


def as_cuda_version(value: Any) -> str:
    """NVML's CUDA version integer (13000) as ``13.0``."""
    number = int(value)
    return f"{number // 1000}.{number % 1000 // 10}"


def as_reasons(value: Any) -> list[str]:
    """A clocks-event (throttle) bitmask as names; unknown bits as ``Unknown(0x...)``."""
    mask = int(value)
    names = [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]
    known = 0
    for bit, _ in CLOCK_EVENT_REASONS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"Unknown(0x{bit:x})")
            rest &= ~bit
        bit <<= 1
    return names


def as_name(table: dict[int, str], prefix: str) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        return table.get(int(value), f"{prefix}{int(value)}")

    return convert


def as_bus_id(value: Any) -> str:
    """The bus id of an nvmlPciInfo_t struct (``00000000:19:00.0``); all ones is no answer.

    An NVSwitch behind a VM's NVLinks answers ``FFFFFFFF:FF:FF.0``.
    """
    bus_id = as_str(value.get("busId") or value.get("busIdLegacy"))
    if bus_id.upper().startswith("FFFFFFFF:"):
        raise _Missing("ValueNotAvailable")
    return bus_id
