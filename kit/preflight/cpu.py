"""CPU preflight items for a CPU recipe: the CPU's ISA against the engine's kernels
(:func:`isa_check`), memory for the engine (:func:`memory_check`) and free disk under
``$KIT_HOME`` (:func:`disk_check`), besides the INT4 path and /dev/shm.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kit import patches
from kit.paths import display_path
from kit.preflight.check import Check
from kit.preflight.disk import free_gib
from kit.preflight.shape import ModelShapes, Unknown
from kit.probe import isa_level, parse_cpuinfo
from kit.recipe import AutoRoundQuantization, Recipe

log = logging.getLogger(__name__)

W4A16_WITHOUT_AVX512 = "cpu-w4a16-without-avx512"
INT4_PATH_CHOICE = "cpu-int4-path"
GIB = 1024**3
# vLLM CPU's default KV cache when VLLM_CPU_KVCACHE_SPACE is not set (GiB)
DEFAULT_KV_GIB = 4.0
# the engine process itself (torch, vLLM, the API server), measured ~1.5 GiB for the tiny model
ENGINE_RSS_GIB = 2.0
# an engine venv (vllm-cpu + CPU torch), and what a build needs besides the model
ENGINE_VENV_GIB = 4.0
BUILD_SCRATCH_GIB = 1.0
# vLLM's engine core puts its message queues in /dev/shm: cpu-tiny's takes 160 MiB ("Insufficient
# space in /dev/shm for shared-memory allocation: 160 MiB required"); a container's default
# /dev/shm is 64 MiB
SHM_NEED_MIB = 256
MIB = 1024**2


def cpu_isa() -> tuple[str, list[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "", []
    info = parse_cpuinfo(text)
    return str(info.get("model") or ""), list(info.get("isa") or [])


def mem_available_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / GIB
    except (OSError, ValueError, IndexError):
        return None
    return None


def _model_gib(shapes: ModelShapes) -> float | Unknown:
    """The served model in bf16 (the torch W4A16 path holds it dense), or why not known."""
    if isinstance(shapes.target, Unknown):
        return shapes.target
    return shapes.target.params() * 2 / GIB


def isa_check(recipe: Recipe, model: str, isa: list[str], machine: str) -> Check:
    """The CPU against the engine's kernels and the recipe's patch series: vllm-cpu's smallest
    build needs AVX2, and its INT4 GEMM (``cpu_gemm_wna16``) exists only in the AVX512 builds,
    so an INT4 recipe on an AVX2-only CPU needs a patch series that
    ``provides: cpu-w4a16-without-avx512``."""
    level = isa_level(isa)
    where = f"{model or 'this CPU'} ({level})"
    if machine not in ("x86_64", "AMD64"):
        return Check("cpu-isa", None, f"{where}: not an x86-64 CPU, ISA not checked")
    if not isa:
        return Check("cpu-isa", None, "no CPU flags readable (/proc/cpuinfo): ISA not checked")
    if "avx2" not in isa:
        return Check(
            "cpu-isa",
            False,
            f"{where}: vllm-cpu needs AVX2 at least; this CPU has none",
            "run the CPU recipe on an x86-64 CPU with AVX2 (2013 or later)",
        )
    quant = recipe.quantization
    int4 = isinstance(quant, AutoRoundQuantization) and quant.bits == 4
    if not int4 or "avx512f" in isa:
        return Check("cpu-isa", True, f"{where}: the engine's compiled kernels serve")
    series = recipe.server.patches
    provided = (
        {cap for p in patches.series_named(series).patches for cap in p.meta.provides}
        if series
        else set()
    )
    if W4A16_WITHOUT_AVX512 in provided:
        return Check(
            "cpu-isa",
            True,
            f"{where}: no AVX512, so no compiled INT4 GEMM; the patch series {series} "
            "serves INT4 through its torch W4A16 path (the memory of the bf16 model)",
        )
    return Check(
        "cpu-isa",
        False,
        f"{where}: INT4 on vllm-cpu needs AVX512 (cpu_gemm_wna16) or a patch series that "
        f"provides {W4A16_WITHOUT_AVX512}; the recipe's series {series or '(none)'} does not",
        "set server.patches: vllm-cpu-0.32.0 (its 0003 adds the torch W4A16 path), or run on "
        "a CPU with AVX512",
    )


def _provided(recipe: Recipe) -> set[str]:
    series = recipe.server.patches
    if not series:
        return set()
    return {cap for p in patches.series_named(series).patches for cap in p.meta.provides}


def int4_path_check(recipe: Recipe, isa: list[str]) -> Check:
    """The INT4 path a recipe pins (server.cpu_int4_path) against the series and this CPU:
    W4A8's int4_scaled_mm_cpu is built only into vllm._C (AVX512 with BF16)."""
    path = recipe.server.cpu_int4_path
    amx = "amx_tile" in isa
    quant = recipe.quantization
    if not (isinstance(quant, AutoRoundQuantization) and quant.bits == 4):
        return Check("int4-path", True, f"{path}: not an INT4 model, no INT4 layer to run")
    if path == "auto":
        vllm_picks = "W4A8 (int8 activations: this CPU has AMX)" if amx else "W4A16"
        return Check("int4-path", True, f"auto: vLLM picks {vllm_picks}")
    provided = INT4_PATH_CHOICE in _provided(recipe)
    if path == "w4a16" and not provided:
        # vLLM's own VLLM_CPU_INT4_W4A8=0 (rendered with it) asks for W4A16 without the patch
        return Check(
            "int4-path",
            True,
            "w4a16 through vLLM's VLLM_CPU_INT4_W4A8=0 (without patch 0006 the server log "
            "does not name the path)",
        )
    if not provided:
        return Check(
            "int4-path",
            False,
            f"server.cpu_int4_path {path} needs a patch series that provides "
            f"{INT4_PATH_CHOICE}; the recipe's series {recipe.server.patches or '(none)'} "
            "does not",
            "set server.patches: vllm-cpu-0.32.0 (its 0006 adds VLLM_CPU_INT4_PATH), or "
            "server.cpu_int4_path: auto",
        )
    if path == "w4a8" and isa and not {"avx512f", "avx512_bf16"} <= set(isa):
        return Check(
            "int4-path",
            False,
            "server.cpu_int4_path w4a8 needs int4_scaled_mm_cpu, which vllm-cpu builds only "
            "for CPUs with AVX512 and AVX512-BF16; this CPU lacks "
            + ", ".join(f for f in ("avx512f", "avx512_bf16") if f not in isa),
            "use server.cpu_int4_path: w4a16 on this CPU",
        )
    note = " (forced: this CPU has no AMX)" if path == "w4a8" and not amx else ""
    return Check("int4-path", True, f"{path}{note}")


def memory_check(recipe: Recipe, available_gib: float | None, shapes: ModelShapes) -> Check:
    """Memory available for the engine's KV cache, the model and the engine itself. Where the
    model's size is not known (:mod:`kit.preflight.shape`), memory is not checked unless the
    rest does not fit already."""
    raw = recipe.server.env.get("VLLM_CPU_KVCACHE_SPACE", str(DEFAULT_KV_GIB))
    try:
        kv = float(raw)
    except ValueError:
        return Check(
            "memory",
            False,
            f"server.env.VLLM_CPU_KVCACHE_SPACE={raw!r} is not a number of GiB",
            'set it to the KV cache size in GiB, e.g. "1"',
        )
    model = _model_gib(shapes)
    need = kv + ENGINE_RSS_GIB + (0.0 if isinstance(model, Unknown) else model)
    if available_gib is None:
        return Check("memory", None, f"needs about {need:.1f} GiB; MemAvailable not readable")
    detail = f"{available_gib:.1f} GiB available, about {need:.1f} GiB needed"
    if isinstance(model, Unknown):
        detail += f" besides the model (KV cache {kv:g} GiB + engine); not sized: {model.why}"
        if available_gib >= need:
            return Check("memory", None, detail, model.hint)
    else:
        detail += f" (KV cache {kv:g} GiB + model + engine)"
    fix = "free memory, or lower server.env.VLLM_CPU_KVCACHE_SPACE"
    return Check("memory", available_gib >= need, detail, fix)


def disk_check(recipe: Recipe, home: Path, engine_installed: bool, shapes: ModelShapes) -> Check:
    """Free disk under ``$KIT_HOME`` for the engine venv, the model and its quantized copy.
    Where the model's size is not known (:mod:`kit.preflight.shape`), disk is not checked
    unless the rest does not fit already."""
    model = _model_gib(shapes)
    need = BUILD_SCRATCH_GIB + (0.0 if isinstance(model, Unknown) else model * 2)
    if not engine_installed:
        need += ENGINE_VENV_GIB
    free = free_gib(home)
    detail = f"{free:.1f} GiB free for {display_path(home)}, about {need:.1f} GiB needed"
    detail += "" if engine_installed else " (the engine venv is not installed yet)"
    if isinstance(model, Unknown):
        detail += f" besides the model; not sized: {model.why}"
        if free >= need:
            return Check("disk", None, detail, model.hint)
    return Check(
        "disk", free >= need, detail, "free disk space, or point KIT_HOME at a larger disk"
    )


def shm_free_mib(path: Path = Path("/dev/shm")) -> float | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize / MIB


def shm_check(free_mib: float | None) -> Check:
    """Room in /dev/shm for the engine's shared-memory queues (native runs: in containers kit
    sizes it, KIT_SHM_SIZE)."""
    if free_mib is None:
        return Check("shm", None, "/dev/shm is not there to check (the engine may refuse)")
    return Check(
        "shm",
        free_mib >= SHM_NEED_MIB,
        f"{free_mib:.0f} MiB free in /dev/shm, about {SHM_NEED_MIB} MiB needed (the engine's "
        "shared-memory queues)",
        "in a container, start it with --shm-size=1g (or --ipc=host); on a host, free /dev/shm "
        "or remount it larger",
    )
