"""Synthetic acceptance resolved: each form of ``speculative.synthetic_acceptance`` to the
per-position unconditional rates vLLM takes (the math: docs/synthetic-acceptance.md)."""

from __future__ import annotations

import itertools
from typing import Any, Literal

from pydantic import Field, ValidationError

from kit.base import FrozenModel
from kit.errors import BadInputError
from kit.recipe.protocol import AcceptanceFigures, Reference
from kit.recipe.sources import (
    AcceptanceConvention,
    AcceptanceProfile,
    Speculative,
    SyntheticAcceptance,
)

# keys of --speculative-config that synthetic_acceptance sets, and only it
VLLM_KEYS = ("rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length")

Form = Literal["mean", "rates", "conditional", "reference"]


class AcceptanceTarget(FrozenModel):
    """A synthetic acceptance resolved: the form asked and the rates vLLM is given."""

    form: Form = Field(description="How the recipe stated it: mean, rates, conditional, reference.")
    mean: float | None = Field(
        description="The mean asked, in its convention (reference: the published accepted / "
        "drafts); None for rates and conditional."
    )
    convention: AcceptanceConvention | None = Field(
        description="The convention of mean: accepted_per_draft or acceptance_length."
    )
    profile: AcceptanceProfile | None = Field(
        description="geometric or step for a mean; geometric for conditional; None for rates."
    )
    conditional: float | None = Field(
        description="The geometric profile's conditional rate c (given, or solved from the "
        "mean); None otherwise."
    )
    rates: list[float] = Field(
        description="Unconditional rate per draft position (what vLLM is given): the chance "
        "that the first i draft tokens are all accepted."
    )
    conditional_rates: list[float] = Field(
        description="vLLM's conditional rate per position, rates[i] / rates[i - 1]: a draft "
        "token is accepted when u < c_i and every earlier one was."
    )
    accepted_per_draft: float = Field(description="Expected accepted draft tokens per step.")
    acceptance_length: float = Field(description="1 + accepted_per_draft (vLLM's convention).")


def geometric_rates(c: float, k: int) -> list[float]:
    """Unconditional rates of one conditional rate ``c`` at every position: ``p_i = c^i``
    (held non-increasing against the last bit of rounding, as vLLM requires)."""
    return list(itertools.accumulate((c**i for i in range(1, k + 1)), min))


def step_rates(mean: float, k: int) -> list[float]:
    """vLLM's minimum-variance schedule for ``mean`` accepted per step: ``[1] * floor(mean) +
    [mean - floor(mean)] + [0] * rest``, cut to ``k`` positions."""
    whole = int(mean)
    return ([1.0] * whole + [mean - whole] + [0.0] * (k - whole - 1))[:k]


def solve_conditional(mean: float, k: int) -> float:
    """The conditional rate ``c`` in [0, 1] whose geometric profile accepts ``mean`` tokens per
    step: the root of ``c + c^2 + ... + c^k = mean``, increasing in ``c`` from 0 to ``k``, by
    bisection to float precision."""
    if not 0 <= mean <= k:
        raise ValueError(f"mean {mean:g} accepted per step is outside 0..{k}")
    if mean in (0, k):  # the ends exactly: bisection would stop a hair inside them
        return mean / k
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        if sum(geometric_rates(mid, k)) < mean:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def conditional_rates(rates: list[float]) -> list[float]:
    """vLLM's conversion: ``c_i = p_i / p_(i-1)`` with ``p_0 = 1``, and 0 after a position
    that is never accepted."""
    return [p / q if q > 0 else 0.0 for p, q in zip(rates, [1.0, *rates[:-1]], strict=True)]


def accepted_mean(mean: float, convention: AcceptanceConvention) -> float:
    """A mean as accepted draft tokens per step: an acceptance length less its bonus token."""
    return mean - 1 if convention == "acceptance_length" else mean


def reference_mean(figures: AcceptanceFigures | None) -> float:
    """The published accepted draft tokens per step (accepted / drafts); ValueError when the
    reference holds no acceptance figures to take it from."""
    if figures is None:
        raise ValueError("the recipe's reference has no acceptance (reference.acceptance)")
    if figures.drafts <= 0:
        raise ValueError("reference.acceptance.drafts is 0: no mean to take")
    return figures.accepted / figures.drafts


def resolve(
    acc: SyntheticAcceptance, k: int, figures: AcceptanceFigures | None
) -> AcceptanceTarget:
    """Every form to ``k`` unconditional per-position rates.

    - ``rates``: as given;
    - ``conditional`` c: ``p_i = c^i``;
    - ``mean`` m (accepted per step ``a`` = m, or m - 1 as an acceptance length) or ``from:
      reference`` (``a`` = accepted / drafts): ``geometric``, ``p_i = c^i`` with c solving
      ``sum p_i = a``; ``step``, :func:`step_rates`.

    The expected accepted tokens per step is ``sum p_i`` (a step accepts position i exactly
    when the first i draft tokens are all accepted). Raises ValueError for rates not one per
    draft token, a mean outside ``0..k`` accepted per step, or a reference without acceptance
    figures.
    """
    form: Form
    mean: float | None = None
    convention: AcceptanceConvention | None = None
    profile: AcceptanceProfile | None = None
    c: float | None = None
    if acc.rates is not None:
        form, rates = "rates", list(acc.rates)
        if len(rates) != k:
            raise ValueError(f"{len(rates)} rates for {k} draft tokens")
    elif acc.conditional is not None:
        form, profile, c = "conditional", "geometric", acc.conditional
        rates = geometric_rates(c, k)
    else:
        if acc.mean is not None and acc.convention is not None:
            form, mean, convention = "mean", acc.mean, acc.convention
            a = accepted_mean(acc.mean, acc.convention)
        else:
            form, convention = "reference", "accepted_per_draft"
            mean = a = reference_mean(figures)
        profile = acc.profile or "geometric"
        if not 0 <= a <= k:
            raise ValueError(f"mean {a:g} accepted per step is outside 0..{k}")
        if profile == "step":
            rates = step_rates(a, k)
        else:
            c = solve_conditional(a, k)
            rates = geometric_rates(c, k)
    expected = sum(rates)
    return AcceptanceTarget(
        form=form,
        mean=mean,
        convention=convention,
        profile=profile,
        conditional=c,
        rates=rates,
        conditional_rates=conditional_rates(rates),
        accepted_per_draft=expected,
        acceptance_length=1 + expected,
    )


def target(spec: Speculative, reference: Reference | None) -> AcceptanceTarget | None:
    """The synthetic acceptance of a validated recipe's speculative section; None without."""
    acc = spec.synthetic_acceptance
    if acc is None:
        return None
    figures = reference.acceptance if reference is not None else None
    return resolve(acc, spec.num_speculative_tokens, figures)


def target_of(recipe: dict[str, Any]) -> AcceptanceTarget | None:
    """The synthetic acceptance of a recipe as a report embeds it (JSON); None without. Raises
    ``BadInputError`` when the embedded section does not resolve."""
    spec = recipe.get("speculative") or {}
    data = spec.get("synthetic_acceptance") if isinstance(spec, dict) else None
    if data is None:
        return None
    where = "recipe: speculative.synthetic_acceptance"
    try:
        acc = SyntheticAcceptance.model_validate(data)
        ref = recipe.get("reference") or {}
        figures = ref.get("acceptance") if isinstance(ref, dict) else None
        return resolve(
            acc,
            int(spec.get("num_speculative_tokens") or 0),
            AcceptanceFigures.model_validate(figures) if figures is not None else None,
        )
    except (ValidationError, ValueError, TypeError) as exc:
        raise BadInputError(
            f"{where}: does not resolve: {exc}",
            hint="kit report verify checks the embedded recipe",
        ) from None


def synthetic_problems(spec: Speculative, reference: Reference | None) -> list[str]:
    """What a recipe's synthetic acceptance cannot be, each starting with its field path."""
    acc = spec.synthetic_acceptance
    where = "speculative.synthetic_acceptance"
    taken = [key for key in VLLM_KEYS if key in spec.extra]
    out = [
        f"speculative.extra.{key}: kit sets it from speculative.synthetic_acceptance, which "
        "states the acceptance (and the report records it)"
        for key in taken
    ]
    if acc is None:
        return out
    k = spec.num_speculative_tokens
    if spec.method == "none":
        return [*out, f"{where}: needs speculative decoding (speculative.method is none)"]
    if acc.rates is not None and len(acc.rates) != k:
        out.append(
            f"{where}.rates: {len(acc.rates)} rates for speculative.num_speculative_tokens {k}: "
            "give one per draft token"
        )
    if acc.mean is not None and acc.convention is not None:
        low = 1 if acc.convention == "acceptance_length" else 0
        if not low <= acc.mean <= low + k:
            out.append(
                f"{where}.mean: {acc.mean:g} is outside {low}..{low + k} ({acc.convention}, "
                f"{k} draft tokens)"
            )
    if acc.from_ is not None:
        figures = reference.acceptance if reference is not None else None
        try:
            a = reference_mean(figures)
        except ValueError as exc:
            out.append(f"{where}.from: reference, but {exc}")
        else:
            if a > k:
                out.append(
                    f"{where}.from: reference accepted {a:g} per step, more than "
                    f"speculative.num_speculative_tokens {k}"
                )
    return out
