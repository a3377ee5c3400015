"""The DFlash2 parts of a synthetic draft: the ``dflash_config`` keys, the grouped convolutions
around each layer's attention and MLP, the candidate selector, and the target's lm_head row that
makes token 0 the draft's strict top-1 (weights ``token0``). Names and shapes follow vLLM 0.28.0
``model_executor/models/qwen3_dflash2.py`` (:func:`tensors`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kit.recipe import DFlash2Draft

ARCHITECTURE = "DFlash2DraftModel"
RMS_NORM_EPS = 1e-6  # the draft's rms_norm_eps, as kit writes it into every draft's config.json
# token 0's logit is at least this many times any other token's (Cauchy-Schwarz bound)
TOKEN0_MARGIN = 4.0
CONVS = ("attention_conv", "mlp_conv")


def config_keys(d2: DFlash2Draft) -> dict[str, int]:
    """The keys DFlash2 adds to ``dflash_config`` (the v1 keys stay as they are)."""
    return {
        "conv_kernel_size": d2.conv_kernel_size,
        "conv_group_size": d2.conv_group_size,
        "selector_rank": d2.selector_rank,
        "selector_top_k": d2.selector_top_k,
    }


def tensors(
    d2: DFlash2Draft,
    hidden_size: int,
    vocab_size: int,
    num_layers: int,
    rand: Callable[..., Any],
    dtype: Any,
) -> dict[str, Any]:
    """The convolution and selector tensors, in checkpoint names. ``rand(*shape)`` draws the
    random ones (kit's draft generator, after the v1 tensors), in the order written here.

    Names and shapes follow vLLM 0.28.0 ``model_executor/models/qwen3_dflash2.py`` (the study:
    docs/dflash2-backport.md, "Checkpoint contract"); the draft's own layout and the checks are
    in docs/dflash2-draft.md. With H the hidden size, V the vocabulary, T the taps and
    G = H / conv_group_size, each layer adds ``attention_conv`` and ``mlp_conv``, each a
    ``base_kernel`` [2, T, H] and a ``kernel_projection.weight`` [2·T·G, H], and the draft adds
    ``candidate_selector.{predecessor,successor}_codebook`` [V, R] and
    ``candidate_selector.hidden_projection.weight`` [R, H]. Checkpoint names carry no
    ``model.`` prefix (vLLM's DFlash loader adds it).

    The convolution is the identity when ``base_kernel[:, 0, :]`` is 1, its other taps 0 and
    ``kernel_projection`` 0 (``_grouped_conv``: coefficients = base + projection, tap 0 scales
    the position itself); ``random`` adds noise to both. A zero ``hidden_projection`` makes the
    selector's bilinear term 0, so its scores are the unary logits of the K candidates."""
    # lazy: torch is in the build extra (heavy)
    import torch  # noqa: PLC0415

    t, h = d2.conv_kernel_size, hidden_size
    groups = h // d2.conv_group_size
    noisy = d2.weights == "random"
    out: dict[str, Any] = {}
    for n in range(num_layers):
        for conv in CONVS:
            p = f"layers.{n}.{conv}."
            base = torch.zeros(2, t, h, dtype=dtype)
            base[:, 0, :] = 1
            projection = torch.zeros(2 * t * groups, h, dtype=dtype)
            if noisy:
                base = base + rand(2, t, h)
                projection = rand(2 * t * groups, h)
            out[p + "base_kernel"] = base
            out[p + "kernel_projection.weight"] = projection
    s = "candidate_selector."
    out[s + "predecessor_codebook"] = rand(vocab_size, d2.selector_rank)
    out[s + "successor_codebook"] = rand(vocab_size, d2.selector_rank)
    hidden = rand(d2.selector_rank, h) if noisy else torch.zeros(d2.selector_rank, h, dtype=dtype)
    out[s + "hidden_projection.weight"] = hidden
    return out


def silence_layers(tensors: dict[str, Any], num_layers: int) -> None:
    """Zero every layer's ``o_proj`` and ``down_proj`` (weights ``token0``): attention and MLP
    then add nothing to the residual, whatever the context, so every drafted position's hidden
    state is ``RMSNorm(embed[mask_token_id]) * norm.weight``."""
    for n in range(num_layers):
        for name in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            tensors[f"layers.{n}.{name}"].zero_()


def mask_hidden(mask_embedding: Any, eps: float = RMS_NORM_EPS) -> Any:
    """``RMSNorm(embed[mask_token_id])`` in float32, with the draft's final norm weight 1: the
    hidden state a ``token0`` draft samples at every drafted position."""
    x = mask_embedding.float()
    return x * (x.pow(2).mean() + eps).rsqrt()


def token0_row(lm_head: Any, mask_embedding: Any, margin: float = TOKEN0_MARGIN) -> Any:
    """The lm_head row 0 (float32) that makes token 0 a ``token0`` draft's strict top-1.

    It is ``a * c`` with ``c`` = :func:`mask_hidden`, so token 0's logit is ``a * |c|^2``; any
    other token's is at most ``|row_v| * |c|`` (Cauchy-Schwarz). ``a = margin * max(M, 1) / |c|``
    with ``M`` the largest norm of the other rows puts token 0's logit at ``margin`` times that
    bound or more, and above 0. The target does not see it when its final norm is zero."""
    c = mask_hidden(mask_embedding)
    others = lm_head[1:].float().norm(dim=1).max() if lm_head.shape[0] > 1 else c.new_zeros(())
    scale = margin * max(float(others), 1.0) / float(c.norm())
    return c * scale
