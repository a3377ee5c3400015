"""The open pins of an imported file, derived once from what its reader read: what a recipe
needs that the file does not say."""

from __future__ import annotations

from kit.importers.parse import shown_model
from kit.importers.schema import Imported, OpenPin


def open_pins(imp: Imported) -> list[OpenPin]:
    """The pins ``imp`` leaves open (a field None: the file does not state it)."""
    pins: list[OpenPin] = []
    if imp.hub_repo is None:
        said = f"names the model {shown_model(imp.model)!r}" if imp.model else "names no model"
        pins.append(OpenPin(field="model.repo_id", reason=f"the file {said}, no hub repository"))
    pins.append(OpenPin(field="model.revision", reason="the file names no model revision"))
    if imp.quantization is None:
        pins.append(
            OpenPin(field="quantization", reason="not stated (a quantized checkpoint, or none?)")
        )
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
            "batch limits) are not stated",
        )
    )
    if imp.hardware is None:
        pins.append(OpenPin(field="rig", reason="the hardware is not stated"))
    if not all(p.load is not None for p in imp.points):
        pins.append(OpenPin(field="bench.load", reason="the concurrency or rate is not stated"))
    w = imp.workload
    if not w.random:
        named = f"the run used {w.dataset}" if w.dataset else "no dataset is named"
        if w.input_tokens and w.output_tokens:
            stand_in = (
                f"random prompts of its mean lengths ({w.input_tokens} in / "
                f"{w.output_tokens} out) stand in"
            )
        else:
            stand_in = "no lengths are stated either"
        pins.append(OpenPin(field="bench.dataset", reason=f"{named}; {stand_in}"))
    pins.append(
        OpenPin(field="bench.sampling", reason="temperature, top_p and top_k are not stated")
    )
    return pins
