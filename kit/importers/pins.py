"""The open pins of an imported file, derived once from what its reader read: what a recipe
needs that the file does not say. The recipe keeps them in ``reference.open_pins``, so that a
stand-in value it must hold (the base's, or none) is never taken for the file's."""

from __future__ import annotations

import re

from kit.importers.parse import shown_model
from kit.importers.schema import Imported, OpenPin
from kit.recipe.serving import REFERENCE_PROMPTS

# a checkpoint's name that says it is quantized (a hint in the pin's reason, never a value)
_QUANT_NAME = re.compile(
    r"(?<![a-z0-9])(fp8|nvfp4|mxfp4|fp4|int4|int8|w4a16|w8a8|w4a8|awq|gptq|autoround|gguf|"
    r"q\d_k(?:_[a-z]+)?|bnb)(?![a-z0-9])",
    re.I,
)


def quantization_hint(imp: Imported) -> str:
    """What the model's name suggests of its quantization, for a pin's reason ("" if none)."""
    names = [n for n in (imp.hub_repo, imp.model) if n]
    found = next((m.group(1) for n in names if (m := _QUANT_NAME.search(n))), None)
    return f"; its name suggests {found.upper()} weights" if found else ""


def _rig(imp: Imported) -> OpenPin | None:
    if imp.hardware is None and imp.rig_detail is None:
        return OpenPin(field="rig", reason="the hardware is not stated")
    d = imp.rig_detail
    if d is None:
        return None
    missing = [
        part
        for part, known in (
            ("the card", d.card),
            ("the card count", d.cards),
            ("power caps", d.power_cap_w),
            ("PCIe links", d.pcie),
            ("the interconnect (NVLink, P2P)", d.interconnect),
        )
        if not known
    ]
    if not missing:
        return None
    return OpenPin(field="rig", reason=", ".join(missing) + " not stated")


def _speculative(imp: Imported) -> OpenPin | None:
    spec = imp.speculative
    if spec is None or spec.drafting is None:
        return OpenPin(
            field="speculative", reason="not stated: the file shows neither drafting nor none"
        )
    if not spec.drafting:
        return None
    k = f"{spec.num_speculative_tokens} tokens a step" if spec.num_speculative_tokens else ""
    if spec.kit_method is None:
        named = f"the file names {spec.method!r}, not a kit method" if spec.method else ""
        shows = ", ".join(x for x in (k, named) if x)
        return OpenPin(
            field="speculative.method",
            reason=f"the file shows drafting{f' ({shows})' if shows else ''} but not the method",
        )
    if spec.kit_method in ("dflash", "dflash2", "draft_model") and spec.draft is None:
        return OpenPin(field="speculative.draft", reason=f"{spec.kit_method}: no draft is named")
    if spec.num_speculative_tokens is None:
        return OpenPin(
            field="speculative.num_speculative_tokens", reason="tokens a step not stated"
        )
    return None


def _prompts(imp: Imported) -> list[OpenPin]:
    p = imp.protocol
    if p is None:
        return []
    canonical = {r.name: len(r.text) for r in REFERENCE_PROMPTS}
    differ = [n for n, c in p.chars.items() if canonical.get(n) != c]
    if differ or not p.chars:
        shown = ", ".join(f"{n} {p.chars[n]} chars" for n in differ) or "no prompt text"
        return [OpenPin(field="bench.prompts", reason=f"the file prints {shown}")]
    return []


def open_pins(imp: Imported) -> list[OpenPin]:
    """The pins ``imp`` leaves open (a field None: the file does not state it)."""
    pins: list[OpenPin] = []
    if imp.hub_repo is None:
        said = f"names the model {shown_model(imp.model)!r}" if imp.model else "names no model"
        pins.append(OpenPin(field="model.repo_id", reason=f"the file {said}, no hub repository"))
    pins.append(OpenPin(field="model.revision", reason="the file names no model revision"))
    if imp.quantization is None:
        pins.append(
            OpenPin(
                field="quantization",
                reason="not stated (a quantized checkpoint, or none?)" + quantization_hint(imp),
            )
        )
    elif imp.quantization != "none":
        pins.append(
            OpenPin(
                field="quantization",
                reason=f"the file states {imp.quantization!r}, which kit's quantization "
                "section cannot hold (kit quantizes with AutoRound, or serves as is)",
            )
        )
    spec = _speculative(imp)
    if spec is not None:
        pins.append(spec)
    # stated or not, the engine is open: a kit recipe pins a vLLM build
    engine = (
        f"{imp.engine} served it; kit serves with vLLM"
        if imp.engine
        else "the engine and its version are not stated"
    )
    pins.append(OpenPin(field="server.engine", reason=engine))
    pins.append(
        OpenPin(
            field="server",
            reason="serving flags (tensor parallel size, max_model_len, KV cache dtype, "
            "batch limits) are not stated"
            + (
                f"; the served context was {imp.max_context_tokens}"
                if imp.max_context_tokens
                else ""
            )
            + (f"; its KV cache: {imp.kv_cache_dtype}" if imp.kv_cache_dtype else ""),
        )
    )
    rig = _rig(imp)
    if rig is not None:
        pins.append(rig)
    if imp.points and not all(p.load is not None for p in imp.points):
        pins.append(OpenPin(field="bench.load", reason="the concurrency or rate is not stated"))
    w = imp.workload
    if imp.points and not w.random:
        named = f"the run used {w.dataset}" if w.dataset else "no dataset is named"
        if w.input_tokens and w.output_tokens:
            stand_in = (
                f"random prompts of its mean lengths ({w.input_tokens} in / "
                f"{w.output_tokens} out) stand in"
            )
        else:
            stand_in = "no lengths are stated either"
        pins.append(OpenPin(field="bench.dataset", reason=f"{named}; {stand_in}"))
    pins += _prompts(imp)
    sampling = (
        "not printed (bench.sh sends the canonical 0.6 / 0.95 / 20 / 0.0, kit's default)"
        if imp.protocol is not None
        else "temperature, top_p and top_k are not stated"
    )
    pins.append(OpenPin(field="bench.sampling", reason=sampling))
    return pins
