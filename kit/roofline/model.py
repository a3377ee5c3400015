"""The step model: what a decode step costs, to predict speculative decoding's speed-up over no
draft (docs/roofline.md derives it; experiments/acceptance-sweep.py tests it on a GPU). A pass
costs a fixed time per decoder layer plus its bytes at the bandwidth (:class:`Pass`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from kit.base import KitModel


class StepModel(KitModel):
    """A run's decode step against the model: the per-layer time learned from the measured
    step, the plain step it predicts and the speed-up over no draft that follows."""

    per_layer_ms: float = Field(description="tau: the fixed time of one decoder layer's pass, ms.")
    target_layers: int = Field(description="The target's decoder layers.")
    draft_layers: int = Field(description="The draft's decoder layers a step runs (0: none).")
    measured_step_ms: float = Field(description="This run's step: L / decode TPS, ms.")
    plain_step_ms: float = Field(description="The predicted step without a draft, ms.")
    predicted_plain_tps: float = Field(description="1 / plain step: the decode TPS without it.")
    predicted_speedup: float | None = Field(
        description="L x plain step / measured step: the speed-up over no draft (None: no draft)."
    )


@dataclass(frozen=True)
class Pass:
    """One step's passes: layers and bytes per GPU.

    A forward pass costs a fixed time per decoder layer (kernel launches, synchronisation, the
    small kernels of norms, rotary and attention that no bandwidth bounds) plus its bytes at
    the bandwidth: ``t = layers x tau + bytes / BW`` (:meth:`Pass.ms`). A speculative step is one
    target pass verifying 1 + k tokens and one draft pass; a plain step is one target pass."""

    layers: int
    bytes: float

    def ms(self, tau_ms: float, bandwidth_gbps: float) -> float:
        return self.layers * tau_ms + self.bytes / (bandwidth_gbps * 1e9) * 1000


def tau_from(step_ms: float, step: Pass, bandwidth_gbps: float) -> float:
    """The per-layer time that makes ``step`` take ``step_ms`` (0 where its bytes alone take
    longer: a step at the bandwidth)."""
    rest = step_ms - step.bytes / (bandwidth_gbps * 1e9) * 1000
    return max(rest / step.layers, 0.0) if step.layers else 0.0


def step_model(
    measured_step_ms: float,
    length: float | None,
    spec: Pass,
    plain: Pass,
    draft_layers: int,
    bandwidth_gbps: float,
) -> StepModel:
    """The model of a run whose measured step (``spec``: target verify pass plus draft pass;
    without a draft the plain pass) took ``measured_step_ms`` at ``length`` tokens per step.
    ``tau`` is learned from the measured step; the model then predicts the plain step, and the
    speed-up is ``L x t_plain / t_step`` (L: tokens per step, 1 + accepted/drafts)."""
    tau = tau_from(measured_step_ms, spec, bandwidth_gbps)
    plain_ms = plain.ms(tau, bandwidth_gbps)
    return StepModel(
        per_layer_ms=tau,
        target_layers=plain.layers,
        draft_layers=draft_layers,
        measured_step_ms=measured_step_ms,
        plain_step_ms=plain_ms,
        predicted_plain_tps=1000 / plain_ms if plain_ms > 0 else 0.0,
        predicted_speedup=length * plain_ms / measured_step_ms
        if length is not None and measured_step_ms > 0
        else None,
    )


@dataclass(frozen=True)
class Predicted:
    """A speed-up predicted from a no-draft baseline: the model's and the bytes-only ratio's."""

    speedup: float
    bytes_only: float
    per_layer_ms: float
    step_ms: float

    def as_dict(self) -> dict[str, float]:
        return {
            "speedup": self.speedup,
            "bytes_only": self.bytes_only,
            "per_layer_ms": self.per_layer_ms,
            "step_ms": self.step_ms,
        }


def predicted_speedup(
    length: float,
    plain_step_ms: float,
    plain: Pass,
    spec: Pass,
    bandwidth_gbps: float,
) -> Predicted:
    """The speed-up at ``length`` tokens per step, predicted from a measured plain step: tau
    from the plain step, the speculative step from tau and its passes' layers and bytes.

    Measured on an H100 (2026-12-07, docs/results.md): a DFlash2 step of the 8B-shaped INT4
    target took 5.78-5.91 ms at every acceptance from 0 to 7 of 7, a plain step 4.82 ms: 1.21
    times, where the bytes alone (the roofline bound) say 1.40. The bytes-only ratio predicted
    the speed-up 14 % short at every point; this model, within 6 %."""
    tau = tau_from(plain_step_ms, plain, bandwidth_gbps)
    step_ms = spec.ms(tau, bandwidth_gbps)
    bytes_only = length * plain.bytes / spec.bytes if spec.bytes else length
    return Predicted(length * plain_step_ms / step_ms, bytes_only, tau, step_ms)
