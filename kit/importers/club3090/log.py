"""The stdout of Club-3090's ``scripts/bench.sh`` (and its Windows port ``bench.ps1``): per
prompt a NARRATIVE / CODE block of warm-up and measured runs and a ``summary`` of mean, std,
CV, min and max; PREFILL-10K / 90K blocks; ``GPU state``; vLLM's last ``SpecDecoding metrics``
lines; in newer versions CONFIG FINGERPRINT and CAPTURE blocks (PCIe, VRAM, draft acceptance,
engine-side timings)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import BadInputError
from kit.importers.club3090.common import DEFINITIONS, PROMPT_NAMES, TOOL
from kit.importers.parse import ImportOptions, Parsed, Reader, parse_file
from kit.importers.schema import Imported, Prompts, SpecDecode
from kit.recipe.protocol import AcceptanceFigures, PromptFigures, RigDetail

_BLOCK = re.compile(r"^={5,} (.+?) ={5,}\s*$")
_SECTION = re.compile(r"^={3} (.+?) ={3}\s*$")
_SHAPE = re.compile(r"^([A-Z]+) \(prompt=(\d+) chars, max_tokens=(\d+)\)$")
_PREFILL = re.compile(r"^PREFILL-(\w+) \(target=(\d+) prompt tokens, max_tokens=(\d+)")
_COUNT = re.compile(r"^(warmups|measured) \((\d+)\)$")
_SUMMARY = re.compile(r"^summary \[([^\]]+)\] \(n=(\d+)\)$")
_RUN = re.compile(r"^\s+(warm|run)-(\d+)\s+(.*)$")
_STAT = re.compile(
    r"^\s+(wall_TPS|decode_TPS|prefill tok/s)\s+mean=\s*([\d.]+)\s+std=\s*([\d.]+)\s+"
    r"CV=\s*([\d.]+)%"
)
_TTFT = re.compile(r"^\s+TTFT\s+mean=\s*([\d.]+)ms\s+std=\s*([\d.]+)ms")
_USABLE = re.compile(r"n-usable\s+(\d+)/(\d+)")
_GPU = re.compile(r"^(\d+), (\d+) %, (\d+) MiB, (\d+) MiB, ([\d.]+) W, (\d+)\s*$")
_FIELD = re.compile(r"^\s+([\w -]+?)\s+:\s+(.*)$")
_LINK = re.compile(r"GPU(\d+) gen=(\d+)/\d+ width=(\d+)/\d+")
_VRAM = re.compile(r"idle=(\d+) MiB\s+peak=(\d+|n/a) MiB\s+post=(\d+|n/a) MiB")
_SPEC = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: ([\d.]+),.*?Accepted: (\d+) tokens, "
    r"Drafted: (\d+) tokens, Per-position acceptance rate: ([\d., ]+?), Avg Draft acceptance "
    r"rate: ([\d.]+)%"
)
_STAMP = re.compile(r"INFO (\d\d-\d\d \d\d:\d\d:\d\d)")
MARKS = ("========== NARRATIVE (prompt=", "========== CODE (prompt=", "=== summary [")


def detect(path: Path, data: Parsed) -> bool:
    """Text with bench.sh's per-prompt blocks and their wall_TPS / decode_TPS lines."""
    text = data.text
    return data.json is None and any(m in text for m in MARKS) and "wall_TPS" in text


@dataclass
class _Read:
    """What the log's lines say, gathered block by block."""

    protocol: dict[str, int] = field(default_factory=dict)
    max_tokens: dict[str, int] = field(default_factory=dict)
    chars: dict[str, int] = field(default_factory=dict)
    prompts: dict[str, dict[str, float]] = field(default_factory=dict)
    depths: dict[int, dict[str, float]] = field(default_factory=dict)
    prefill: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    usable: dict[str, tuple[int, int]] = field(default_factory=dict)
    gpus: list[tuple[int, int, int]] = field(default_factory=list)  # index, used, total MiB
    fingerprint: dict[str, str] = field(default_factory=dict)
    links: dict[int, str] = field(default_factory=dict)
    vram: tuple[int, int | None, int | None] | None = None
    spec: list[re.Match[str]] = field(default_factory=list)
    stamps: list[str] = field(default_factory=list)
    capture: dict[str, list[str]] = field(default_factory=dict)


class _Gather:
    """The log read line by line: the block and section it is in decide what a line is."""

    def __init__(self) -> None:
        self.r = _Read()
        self.block = self.section = ""
        self.shape: str | None = None
        self.depth: int | None = None

    def header(self, block: str) -> None:
        self.block, self.section, self.shape, self.depth = block, "", None, None
        r = self.r
        if s := _SHAPE.match(block):
            self.shape = PROMPT_NAMES.get(s.group(1).lower(), s.group(1).lower())
            r.chars[self.shape] = int(s.group(2))
            r.max_tokens[self.shape] = int(s.group(3))
        elif p := _PREFILL.match(block):
            self.depth = int(p.group(2))
            r.depths.setdefault(self.depth, {})
            r.prefill["max_tokens"] = int(p.group(3))

    def subsection(self, section: str) -> None:
        self.section = section
        if c := _COUNT.match(section):
            kind = "prefill_" if self.depth is not None else ""
            self.r.protocol[kind + c.group(1)] = int(c.group(2))
        elif section == "GPU state" or section.endswith("SpecDecoding metrics"):
            self.block = section

    def line(self, line: str) -> None:
        r, block = self.r, self.block
        if block == "CONFIG FINGERPRINT" and (f := _FIELD.match(line)):
            r.fingerprint[f.group(1).strip()] = f.group(2).strip()
        elif block.startswith("CAPTURE: ") and line.strip():
            self.capture(block.removeprefix("CAPTURE: "), line)
        elif block == "GPU state" and (g := _GPU.match(line)):
            r.gpus.append((int(g.group(1)), int(g.group(3)), int(g.group(4))))
        elif (s := _SPEC.search(line)) is not None:
            r.spec.append(s)
            if t := _STAMP.search(line):
                r.stamps.append(t.group(1))
        elif "SKIP:" in line and self.depth is not None:
            r.skipped.append(f"{self.depth}: {line.strip().removeprefix('SKIP: ')}")
        elif self.section.startswith("summary"):
            _summary_line(r, line, self.shape, self.depth)

    def capture(self, name: str, line: str) -> None:
        r = self.r
        r.capture.setdefault(name, []).append(line.strip())
        if v := _VRAM.search(line):
            r.vram = (int(v.group(1)), _int(v.group(2)), _int(v.group(3)))
        for link in _LINK.finditer(line):
            r.links[int(link.group(1))] = f"gen{link.group(2)} x{link.group(3)}"


def _gather(text: str) -> _Read:
    g = _Gather()
    for line in text.splitlines():
        if line.startswith(("[bench]", "#")):
            continue
        if m := _BLOCK.match(line):
            g.header(m.group(1))
        elif m := _SECTION.match(line):
            g.subsection(m.group(1))
        else:
            g.line(line)
    return g.r


def _int(value: str) -> int | None:
    return None if value == "n/a" else int(value)


def _summary_line(r: _Read, line: str, shape: str | None, depth: int | None) -> None:
    if depth is not None:
        if (m := _STAT.match(line)) and m.group(1) == "prefill tok/s":
            r.depths[depth] = {"mean": float(m.group(2)), "std": float(m.group(3))}
        return
    if shape is None:
        return
    figs = r.prompts.setdefault(shape, {})
    if m := _STAT.match(line):
        key = "wall" if m.group(1) == "wall_TPS" else "decode"
        figs[key], figs[f"{key}_std"], figs[f"{key}_cv"] = (float(m.group(i)) for i in (2, 3, 4))
    elif m := _TTFT.match(line):
        figs["ttft"], figs["ttft_std"] = float(m.group(1)), float(m.group(2))
    elif m := _USABLE.search(line):
        r.usable[shape] = (int(m.group(1)), int(m.group(2)))


def _prompt_figures(r: _Read, runs: int | None) -> dict[str, PromptFigures]:
    out = {}
    for name, f in r.prompts.items():
        if not f:
            continue
        out[name] = PromptFigures(
            decode_tps=f.get("decode"),
            decode_std=f.get("decode_std"),
            decode_cv_pct=f.get("decode_cv"),
            wall_tps=f.get("wall"),
            wall_std=f.get("wall_std"),
            ttft_ms=f.get("ttft"),
            ttft_std=f.get("ttft_std"),
            runs=runs,
        )
    return out


def _speculative(r: _Read, warnings: list[str], notes: list[str]) -> SpecDecode | None:
    """vLLM's SpecDecoding lines: each covers one logging interval (its counters reset after
    each line), so their sum covers the intervals shown, not the run."""
    if not r.spec:
        drafter = r.fingerprint.get("drafter")
        if drafter is not None and drafter.lower() == "none":
            return SpecDecode(drafting=False, source="CONFIG FINGERPRINT drafter: none")
        for line in r.capture.get("DRAFT ACCEPTANCE", []):
            notes.append(f"CAPTURE: DRAFT ACCEPTANCE: {line}")
        return None
    rates_per_line = [[float(x) for x in m.group(4).split(",")] for m in r.spec]
    k = len(rates_per_line[-1])
    accepted = drafted = drafts = 0
    per_position = [0] * k
    exact = True
    for m, rates in zip(r.spec, rates_per_line, strict=True):
        a, d = int(m.group(2)), int(m.group(3))
        accepted, drafted = accepted + a, drafted + d
        steps = d // len(rates) if rates and d % len(rates) == 0 else None
        if steps is None or len(rates) != k:
            exact = False
            continue
        drafts += steps
        # rates are printed to 3 decimals: rate x steps is an exact count below 1000 steps
        counts = [round(x * steps) for x in rates]
        if steps >= 1000 or sum(counts) != a:
            exact = False
        per_position = [p + c for p, c in zip(per_position, counts, strict=True)]
    lines = len(r.spec)
    span = f" ({r.stamps[0]} to {r.stamps[-1]})" if len(r.stamps) > 1 else ""
    scope = (
        f"the last {lines} vLLM logging interval(s) of the run{span}, not the whole run: vLLM's "
        "SpecDecoding counters reset after each line"
    )
    warnings.append(
        f"acceptance: the log's {lines} SpecDecoding metrics line(s) cover only {scope}; "
        "kit's acceptance counts the whole measured window"
    )
    last = r.spec[-1]
    return SpecDecode(
        drafting=True,
        num_speculative_tokens=k,
        acceptance=AcceptanceFigures(
            accepted=accepted,
            drafted=drafted,
            drafts=drafts,
            accepted_per_position=per_position if exact else None,
        )
        if drafts
        else None,
        acceptance_rate_pct=float(last.group(5)),
        acceptance_length=float(last.group(1)),
        per_position_rates=rates_per_line[-1],
        scope=scope,
        source="the SpecDecoding metrics lines (vLLM's log)",
    )


IDLE_MIB = 1024  # a card holding less after the run served nothing (nvidia-smi lists it)


def _rig(r: _Read, notes: list[str]) -> RigDetail | None:
    """The cards from GPU state (those holding more than IDLE_MIB: the others served
    nothing), their memory, and the PCIe links CAPTURE sampled under load."""
    used = [g for g in r.gpus if g[1] >= IDLE_MIB]
    idle = [g for g in r.gpus if g[1] < IDLE_MIB]
    if idle:
        shown = ", ".join(f"GPU{i} ({u} MiB)" for i, u, _ in idle)
        notes.append(f"GPU state: {shown} idle after the run, not counted as the server's")
    cards = len(used) or len(r.links) or None
    totals = {total for _, _, total in used}
    detail = RigDetail(
        cards=cards,
        memory_mib=totals.pop() if len(totals) == 1 else None,
        pcie=[r.links[i] for i in sorted(r.links)],
    )
    return detail if detail != RigDetail() else None


def _hardware(detail: RigDetail | None) -> str | None:
    if detail is None:
        return None
    parts = [f"{detail.cards} GPU(s)" if detail.cards else "GPUs"]
    if detail.memory_mib:
        parts.append(f"of {detail.memory_mib} MiB (nvidia-smi memory.total)")
    if detail.pcie:
        parts.append(f"PCIe {' / '.join(detail.pcie)} (sampled under load)")
    return ", ".join(parts) + "; card model, power caps and P2P not in the log"


def _protocol(r: _Read) -> Prompts:
    return Prompts(
        warmups=r.protocol.get("warmups"),
        runs=r.protocol.get("measured"),
        max_tokens=r.max_tokens,
        chars=r.chars,
        prefill_depths=sorted(r.depths),
        prefill_runs=r.protocol.get("prefill_measured"),
        prefill_warmups=r.protocol.get("prefill_warmups"),
        prefill_max_tokens=r.prefill.get("max_tokens"),
    )


def _memory(
    r: _Read, cards: int | None, warnings: list[str], notes: list[str]
) -> tuple[float | None, float | None]:
    """(peak per card, growth post - idle over all cards) from CAPTURE: VRAM, which sums the
    cards; the per-card peak only where there is one card."""
    peak = growth = None
    if r.vram is not None:
        idle, top, post = r.vram
        if post is not None:
            growth = float(post - idle)
        if top is not None and cards == 1:
            peak = float(top)
        elif top is not None:
            notes.append(
                f"VRAM: peak {top} MiB over all {cards or 'the'} cards (bench.sh sums them); "
                "the per-card peak is not in the log"
            )
    if r.gpus:
        used = ", ".join(f"GPU{i} {u} MiB" for i, u, _ in r.gpus)
        notes.append(f"GPU state after the run (not a peak): {used}")
    return peak, growth


def read(path: Path, options: ImportOptions) -> Imported:
    """Read a bench.sh (or bench.ps1) log."""
    parsed = parse_file(path)
    r = _gather(parsed.text)
    warnings: list[str] = []
    notes: list[str] = []
    if not any(r.prompts.values()) and not any(r.depths.values()):
        raise BadInputError(f"{path.name}: bench.sh blocks without a summary: no figure to read")
    runs = r.protocol.get("measured")
    prompts = _prompt_figures(r, runs)
    for name, (ok, n) in r.usable.items():
        if ok < n:
            warnings.append(
                f"{name}: {n - ok} of {n} runs stopped before 25 % of max_tokens (not usable); "
                "bench.sh's figures include them"
            )
    for skip in r.skipped:
        warnings.append(f"prefill depth {skip}: skipped, no figure")
    detail = _rig(r, notes)
    peak, growth = _memory(r, detail.cards if detail else None, warnings, notes)
    fp = r.fingerprint
    ctx = re.match(r"(\d+)", fp.get("served ctx", ""))
    kv = fp.get("KV cache type")
    if fp.get("CPU offload", "").startswith("DETECTED"):
        warnings.append(f"the server offloaded weights to the CPU ({fp['CPU offload']})")
    for line in r.capture.get("ENGINE-SIDE TIMINGS", []):
        notes.append(f"engine-side timings: {line}")
    engine = None
    if r.spec and any("APIServer" in m.string for m in r.spec):
        engine = "vLLM (its SpecDecoding log lines; version not stated)"
    windows = "bench.ps1" in parsed.text
    layout = (
        "bench.ps1 stdout (the Windows port)"
        if windows
        else "bench.sh stdout with CONFIG FINGERPRINT / CAPTURE blocks"
        if fp or r.capture
        else "bench.sh stdout (NARRATIVE / CODE blocks)"
    )
    return Imported(
        file=path.name,
        tool=TOOL + (" (bench.ps1)" if windows else ""),
        layout=layout,
        model=fp.get("model"),
        engine=engine,
        hardware=_hardware(detail),
        protocol=_protocol(r),
        prompts=prompts,
        prefill_tps={d: f["mean"] for d, f in sorted(r.depths.items()) if "mean" in f},
        peak_vram_mib=peak,
        vram_growth_mib=growth,
        max_context_tokens=int(ctx.group(1)) if ctx else None,
        kv_cache_dtype=kv.split(" (")[0] if kv and not kv.startswith("capture:") else None,
        rig_detail=detail,
        speculative=_speculative(r, warnings, notes),
        warnings=warnings,
        notes=notes,
    )


READER = Reader(
    tool="club3090 bench.sh log",
    reads="Club-3090 scripts/bench.sh (or bench.ps1) stdout",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)
