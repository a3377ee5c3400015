"""AutoRound preflight: will the quantization stage fit the cards it tunes on, and host RAM?

:func:`tuning_estimate` holds the formula, :func:`autoround_checks` the checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.preflight.check import Check
from kit.preflight.gpu import GIB, Card
from kit.preflight.shape import Shape, Unknown
from kit.recipe import AutoRoundQuantization, Recipe
from kit.recipe.sources import AutoRoundPlacement

# TUNING_BYTES_PER_PARAM and ACTIVATION_TENSORS are fitted, not derived: to one measurement of
# AutoRound 0.16.1 at the Qwen3.5-27B width (hidden 5120, FFN 17408, W4 g128, iters 200,
# nsamples 128, seqlen 2048, batch 8) on one card capped at 24 GiB, both placements
# (experiments/results/autoround-24gb-h200-2026-12-01.json): 17.9 GiB allocated with the block
# I/O on the card, 11.1 GiB in host RAM; the formula gives 18.9 and 11.4. HEADROOM is the
# measured reserved/allocated ratio (1.14 and 1.19). torch.compile was off there; with it on
# the estimate is the same, and unmeasured.
TUNING_BYTES_PER_PARAM = 10
ACTIVATION_TENSORS = 11
IO_SETS = 3
HEADROOM = 1.2
CONTEXT_GIB = 0.5
HOST_SPARE_GIB = 4.0  # kit, AutoRound and the calibration data beside the model


@dataclass(frozen=True)
class TuningEstimate:
    """AutoRound's memory while it tunes one block, in GiB."""

    weights: float
    tuning: float
    activations: float
    block_io: float  # on the first card; 0 when low_gpu_mem_usage
    host_block_io: float  # in host RAM; 0 unless low_gpu_mem_usage
    cards: int  # a block is spread over this many
    model_bf16: float  # the whole model, held in host RAM

    @property
    def allocated(self) -> float:
        """Allocated on the first (busiest) card."""
        return (self.weights + self.tuning + self.activations) / self.cards + self.block_io

    @property
    def need(self) -> float:
        return self.allocated * HEADROOM + CONTEXT_GIB

    @property
    def host(self) -> float:
        return self.model_bf16 + self.host_block_io + HOST_SPARE_GIB


def tuning_estimate(
    shape: Shape, q: AutoRoundQuantization, cards: int = 1, full_params: int | None = None
) -> TuningEstimate:
    """AutoRound's memory while it tunes one block of ``shape`` spread over ``cards``.

    AutoRound tunes one decoder block at a time, so its peak on a card is one block's worth, the
    same for block 1 as for block 64. The peak is estimated from the model's shape and the
    recipe's ``quantization`` and ``quantization.placement``, as written down here so that it
    can be checked (bytes; P = one block's parameters, S = one set of block inputs)::

        P          = (attention + MLP) parameters of one layer
        weights    = P x 2                      the block in bf16
        tuning     = P x 10                     per weight, AutoRound's rounding offset (fp32), its
                                                gradient (fp32) and the fake-quantized copy (bf16)
        activations = batch_size x seqlen x (hidden + intermediate) x 2 x 11
                                                forward and backward of one batch of samples
        S          = nsamples x seqlen x hidden x 2
        block I/O  = 3 x S on the first tuning card, unless low_gpu_mem_usage keeps it in host
                     RAM: the block's inputs, their full-precision outputs, and the quantized
                     outputs that become the next block's inputs

        allocated per card = (weights + tuning + activations) / cards a block is spread over
                             + block I/O (first card)
        need per card      = allocated x 1.2 (allocator headroom) + 0.5 GiB (CUDA context)

    Host RAM holds the whole model in bf16 while it is tuned (plus the block I/O with
    ``low_gpu_mem_usage``).
    """
    placement = q.placement or AutoRoundPlacement()
    block = shape.body_params() / max(shape.layers, 1)
    tokens = q.batch_size * q.seqlen
    io = IO_SETS * q.nsamples * q.seqlen * shape.hidden * 2 / GIB
    on_card = not placement.low_gpu_mem_usage
    params = shape.params() if full_params is None else full_params
    return TuningEstimate(
        weights=block * 2 / GIB,
        tuning=block * TUNING_BYTES_PER_PARAM / GIB,
        activations=tokens * (shape.hidden + shape.intermediate) * 2 * ACTIVATION_TENSORS / GIB,
        block_io=io if on_card else 0.0,
        host_block_io=0.0 if on_card else io,
        cards=cards,
        model_bf16=params * 2 / GIB,
    )


def tuning_cards(placement: AutoRoundPlacement, cards: list[Card]) -> tuple[list[Card], str]:
    """The cards ``device_map`` names among ``cards``, and what is missing (empty: none)."""
    dm = placement.device_map
    if dm == "auto":
        return cards, ""
    wanted = dm if isinstance(dm, list) else [dm]
    missing = [i for i in wanted if i >= len(cards)]
    if missing:
        return [], f"device_map {dm} names card(s) {missing}, and there are {len(cards)}"
    return [cards[i] for i in wanted], ""


def autoround_checks(
    recipe: Recipe, cards: list[Card], host_available_gib: float | None, shape: Shape | Unknown
) -> list[Check]:
    """The quantization stage against the cards it tunes on (and host RAM, where this machine
    is the one that will run it: ``host_available_gib`` None skips that item), for a model of
    ``shape`` (:func:`kit.preflight.shape.model_shapes`). Nothing for a recipe that serves a
    checkpoint as published, quantizes on the CPU, or rounds to nearest without tuning (iters
    0: one block's weights on the card). Host RAM (the whole model in bf16, see
    :func:`tuning_estimate`) is checked against the memory available now."""
    q = recipe.quantization
    if not isinstance(q, AutoRoundQuantization) or q.device == "cpu" or q.iters == 0:
        return []
    if not cards:
        return []  # the gpus item already failed
    if isinstance(shape, Unknown):
        return [Check("autoround memory", None, f"not estimated: {shape.why}", shape.hint)]
    placement = q.placement or AutoRoundPlacement()
    used, missing = tuning_cards(placement, cards)
    fix = (
        "set quantization.placement.low_gpu_mem_usage: true (block inputs in host RAM, about "
        "2.8x slower per block), spread each block over more cards (device_map: [0, 1] or "
        '"auto"), or lower quantization.batch_size / nsamples'
    )
    if missing:
        return [
            Check("autoround memory", False, f"quantization.placement: {missing}", fix, "recipe")
        ]
    est = tuning_estimate(shape, q, len(used))
    smallest = min(c.memory_gib for c in used)
    where = "in host RAM" if placement.low_gpu_mem_usage else "on the card"
    out = [
        Check(
            "autoround memory",
            est.need <= smallest,
            f"about {est.need:.1f} GiB on card {used[0].index} while a block is tuned "
            f"(block {est.weights:.1f} + tuning {est.tuning:.1f} + activations "
            f"{est.activations:.1f}, over {est.cards} card(s); block inputs {where}"
            + (f" {est.block_io:.1f}" if est.block_io else "")
            + f"; x{HEADROOM:g} + {CONTEXT_GIB:g}) of {smallest:.0f} GiB",
            fix,
        )
    ]
    if host_available_gib is not None:
        out.append(
            Check(
                "autoround host memory",
                est.host <= host_available_gib,
                f"about {est.host:.0f} GiB while quantizing (the model in bf16 "
                f"{est.model_bf16:.0f}"
                + (f" + block inputs {est.host_block_io:.1f}" if est.host_block_io else "")
                + f" + {HOST_SPARE_GIB:g}) of {host_available_gib:.0f} GiB available",
                "quantize on a host with more RAM (or add swap), or use a published checkpoint "
                "(quantization: {method: none})",
            )
        )
    return out
