"""What the verdicts make of a quality probe: validity findings (a warning past the recipe's
thresholds, an error for garbage) and how two runs' figures differ beyond their band."""

from __future__ import annotations

import math

from kit.probe import Finding
from kit.quality.schema import QualityProbe


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def quality_findings(probe: QualityProbe | None) -> list[Finding]:
    """``quality-garbage`` (error) when the agreement is near chance or the perplexity ratio
    absurd; ``quality-degraded`` (warning) past the recipe's thresholds. Nothing without a
    reference: the served perplexity alone has no scale to judge it by. The agreement is
    judged only where it can tell: where garbage_over_chance × chance is below 1 (a reference
    that answers one token nearly everywhere, as a zero-norm model does, leaves it nothing)."""
    if probe is None or probe.summary.perplexity_ratio is None:
        return []
    garbage = _garbage(probe)
    if garbage:
        message = "; ".join(garbage) + ": the served model's answers are not the model's"
        return [Finding(code="quality-garbage", severity="error", message=message)]
    degraded = _degraded(probe)
    if not degraded:
        return []
    kl = f"{probe.summary.kl:.3g}" if probe.summary.kl is not None else "?"
    message = "; ".join(degraded) + f" (KL estimate {kl} nats, top {probe.settings.top_k})"
    return [Finding(code="quality-degraded", severity="warning", message=message)]


def _agreement_tells(probe: QualityProbe) -> float | None:
    """The agreement, where it can tell garbage from the model (see quality_findings)."""
    s = probe.summary
    if s.agreement is None or s.chance is None:
        return None
    return s.agreement if probe.settings.garbage_over_chance * s.chance < 1 else None


def _garbage(probe: QualityProbe) -> list[str]:
    s, limits = probe.summary, probe.settings
    out = []
    agreement = _agreement_tells(probe)
    if agreement is not None and s.chance is not None:
        if agreement <= limits.garbage_over_chance * s.chance:
            out.append(
                f"top-1 agreement {_pct(agreement)} is at most {limits.garbage_over_chance:g}× "
                f"chance ({_pct(s.chance)})"
            )
    ratio = s.perplexity_ratio
    if ratio is not None and ratio > limits.garbage_perplexity_ratio:
        out.append(
            f"perplexity {s.perplexity:.4g} is {ratio:.3g}× the reference's, above "
            f"{limits.garbage_perplexity_ratio:g}×"
        )
    return out


def _degraded(probe: QualityProbe) -> list[str]:
    s, limits = probe.summary, probe.settings
    out = []
    ratio = s.perplexity_ratio
    if ratio is not None and ratio > limits.max_perplexity_ratio:
        out.append(
            f"perplexity {s.perplexity:.4g} is {ratio:.3g}× the reference's "
            f"{s.reference_perplexity:.4g} (above {limits.max_perplexity_ratio:g}×)"
        )
    agreement = _agreement_tells(probe)
    if agreement is not None and agreement < limits.min_agreement:
        out.append(f"top-1 agreement {_pct(agreement)} is below {_pct(limits.min_agreement)}")
    return out


def _beyond(delta: float, band: float) -> bool:
    """|delta| past the band (a delta that is the band, but for float rounding, is within)."""
    return abs(delta) > band and not math.isclose(abs(delta), band)


def alike(a: QualityProbe, b: QualityProbe) -> bool:
    """Whether two probes scored the same tokens of the same text (their figures compare)."""
    return a.text_sha256 == b.text_sha256 and a.token_ids == b.token_ids


def quality_diff(a: QualityProbe | None, b: QualityProbe | None) -> list[str]:
    """How two runs' quality figures differ beyond their band (the wider of the two recipes'):
    the served perplexity in percent of A's, the agreement in percentage points (where both
    can tell, see quality_findings). Nothing when a side has no probe or they scored other
    tokens."""
    if a is None or b is None or not alike(a, b):
        return []
    out = []
    sa, sb = a.summary, b.summary
    band = max(a.settings.band_perplexity_pct, b.settings.band_perplexity_pct)
    delta = (sb.perplexity - sa.perplexity) / sa.perplexity * 100
    if _beyond(delta, band):
        out.append(
            f"perplexity {sa.perplexity:.4g} vs {sb.perplexity:.4g} ({delta:+.1f} %, band "
            f"±{band:g} %)"
        )
    ga, gb = _agreement_tells(a), _agreement_tells(b)
    if ga is not None and gb is not None:
        band = max(a.settings.band_agreement_pp, b.settings.band_agreement_pp)
        pp = (gb - ga) * 100
        if _beyond(pp, band):
            out.append(
                f"top-1 agreement {_pct(ga)} vs {_pct(gb)} ({pp:+.1f} pp, band ±{band:g} pp)"
            )
    if out and sa.kl is not None and sb.kl is not None:
        out.append(f"KL estimate {sa.kl:.3g} vs {sb.kl:.3g} nats")
    return out
