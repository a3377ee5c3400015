"""The open pins every reader checks: what a recipe needs that a result file may not say."""

from __future__ import annotations

from kit.importers.parse import shown_model
from kit.importers.schema import OpenPin, Workload


def open_pins(
    *,
    model: str | None,
    hub_repo: str | None,
    engine: str | None,
    hardware: str | None,
    workload: Workload,
    load_known: bool,
    quantization: str | None = None,
    serving: str | None = None,
    sampling: str | None = None,
) -> list[OpenPin]:
    """The pins left open, given what the file states (None: not stated)."""
    pins: list[OpenPin] = []
    if hub_repo is None:
        said = f"names the model {shown_model(model)!r}" if model else "names no model"
        pins.append(OpenPin(field="model.repo_id", reason=f"the file {said}, no hub repository"))
    pins.append(OpenPin(field="model.revision", reason="the file names no model revision"))
    if quantization is None:
        pins.append(
            OpenPin(field="quantization", reason="not stated (a quantized checkpoint, or none?)")
        )
    if engine is None:
        pins.append(
            OpenPin(field="server.engine", reason="the engine and its version are not stated")
        )
    if serving is None:
        pins.append(
            OpenPin(
                field="server",
                reason="serving flags (tensor parallel size, max_model_len, KV cache dtype, "
                "batch limits) are not stated",
            )
        )
    if hardware is None:
        pins.append(OpenPin(field="rig", reason="the hardware is not stated"))
    if not load_known:
        pins.append(OpenPin(field="bench.load", reason="the concurrency or rate is not stated"))
    if not workload.random:
        named = f"the run used {workload.dataset}" if workload.dataset else "no dataset is named"
        if workload.input_tokens and workload.output_tokens:
            stand_in = (
                f"random prompts of its mean lengths ({workload.input_tokens} in / "
                f"{workload.output_tokens} out) stand in"
            )
        else:
            stand_in = "no lengths are stated either"
        pins.append(OpenPin(field="bench.dataset", reason=f"{named}; {stand_in}"))
    if sampling is None:
        pins.append(
            OpenPin(field="bench.sampling", reason="temperature, top_p and top_k are not stated")
        )
    return pins
