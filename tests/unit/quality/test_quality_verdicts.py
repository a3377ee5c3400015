"""The quality probe in the verdicts: validity findings, comparability's quality aspect and
the reproduction verdict it refuses, and ``kit report verify`` recomputing the probe from its
per-token scores (a forged figure fails)."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

import pytest
from factories import build_report

from kit import signing
from kit.quality import QualityProbe, quality_findings, summarize, text_sha256
from kit.quality.measures import Pair, scores_of
from kit.quality.schema import ReferenceProvenance, ReferenceScores
from kit.recipe.quality import Quality
from kit.report import Report
from kit.report.comparability import comparability
from kit.report.files import encode_report
from kit.report.reproduction import judge
from kit.report.validity import verdict
from kit.report.verify import verify_report

ln = math.log
POSITIONS = 20


def probe(agree: int = POSITIONS, ppl_factor: float = 1.0, **settings: Any) -> QualityProbe:
    """20 scored positions: the reference's top-1 cycles through 7 tokens (chance: 3 of 20),
    the served top-1 is the reference's at the first ``agree``, and the served next token is
    ``ppl_factor`` times less likely than the reference's (the perplexity ratio)."""
    tokens = list(range(POSITIONS + 1))
    ref_top: list[list[Pair]] = [[(100 + i % 7, ln(0.5)), (200, ln(0.2))] for i in range(20)]
    served_top: list[list[Pair]] = [
        t if i < agree else [(300, ln(0.5)), (t[0][0], ln(0.2))] for i, t in enumerate(ref_top)
    ]
    served = scores_of([ln(0.1 / ppl_factor)] * POSITIONS, served_top)
    reference = ReferenceScores(
        text_sha256=text_sha256(),
        token_ids=tokens,
        vocab_size=1024,
        top_k=2,
        scores=scores_of([ln(0.1)] * POSITIONS, ref_top),
        provenance=ReferenceProvenance(
            method="transformers", model_identity="a" * 64, dtype="float32", device="cpu"
        ),
    )
    return QualityProbe(
        settings=Quality(**settings),
        text_sha256=text_sha256(),
        token_ids=tokens,
        served=served,
        reference=reference,
        no_reference=None,
        summary=summarize(tokens, served, reference),
        duration_s=1.5,
    )


def test_an_intact_probe_has_no_finding() -> None:
    assert quality_findings(probe()) == []


def test_agreement_near_chance_is_garbage() -> None:
    p = probe(agree=2)
    assert (p.summary.agreement, p.summary.chance) == (0.1, 0.15)
    [finding] = quality_findings(p)
    assert (finding.code, finding.severity) == ("quality-garbage", "error")
    assert finding.message == (
        "top-1 agreement 10.0 % is at most 1.5× chance (15.0 %): the served model's answers "
        "are not the model's"
    )


def test_an_absurd_perplexity_ratio_is_garbage() -> None:
    [finding] = quality_findings(probe(ppl_factor=6.0))
    assert finding.code == "quality-garbage"
    assert finding.message.startswith("perplexity 60 is 6× the reference's, above 5×")


def test_past_the_recipes_thresholds_is_a_warning() -> None:
    [finding] = quality_findings(probe(agree=8, ppl_factor=1.6))
    assert (finding.code, finding.severity) == ("quality-degraded", "warning")
    assert finding.message.startswith(
        "perplexity 16 is 1.6× the reference's 10 (above 1.5×); top-1 agreement 40.0 % is "
        "below 50.0 % (KL estimate"
    )
    # the recipe's own thresholds
    assert (
        quality_findings(
            probe(agree=8, ppl_factor=1.6, max_perplexity_ratio=2.0, min_agreement=0.3)
        )
        == []
    )


def test_agreement_that_cannot_tell_is_not_judged() -> None:
    # a reference that answers token 100 everywhere (as a zero-norm model's ties do): chance
    # is 1, and a server that breaks the ties otherwise agrees nowhere, rightly
    p = probe(agree=0)
    ref = p.reference
    assert ref is not None
    constant = scores_of([ln(0.1)] * POSITIONS, [[(100, ln(0.5)), (200, ln(0.2))]] * POSITIONS)
    ref = ref.model_copy(update={"scores": constant})
    flat = p.model_copy(update={"reference": ref, "summary": summarize(p.token_ids, p.served, ref)})
    assert (flat.summary.agreement, flat.summary.chance) == (0.0, 1.0)
    assert quality_findings(flat) == []


def test_without_a_reference_nothing_is_judged() -> None:
    p = probe(agree=0)
    alone = p.model_copy(
        update={
            "reference": None,
            "no_reference": "bench.quality.reference is none",
            "summary": summarize(p.token_ids, p.served, None),
        }
    )
    assert quality_findings(alone) == []


def with_probe(report: Report, p: QualityProbe | None) -> Report:
    out = report.model_copy(update={"quality": p})
    return out.model_copy(update={"validity": verdict(out, out.host, out.gpu_sampling)})


@pytest.fixture(scope="module")
def base(fixtures_dir: Path) -> Report:
    return build_report(fixtures_dir)


def test_a_garbage_probe_makes_the_run_invalid(base: Report) -> None:
    report = with_probe(base, probe(agree=1))
    assert not report.validity.valid
    assert "quality-garbage" in [f.code for f in report.validity.reasons]
    checklist = verify_report(encode_report(report), allow_unsigned=True)
    assert checklist.ok, checklist.render()  # the stored verdict is the recomputed one


def _forged(report: Report, edit: Any) -> bytes:
    data = report.model_dump(mode="json")
    edit(data["quality"])
    envelope = json.loads(encode_report(report))
    envelope["payload"] = base64.b64encode(signing.canonical_bytes(data)).decode()
    return signing.canonical_bytes(envelope)


def test_verify_recomputes_the_probe_and_a_forged_figure_fails(base: Report) -> None:
    report = with_probe(base, probe(agree=15))
    checklist = verify_report(encode_report(report), allow_unsigned=True)
    assert checklist.ok, checklist.render()
    assert "quality probe (20 positions)" in checklist.item("summaries").detail

    def better(q: dict[str, Any]) -> None:
        q["summary"]["agreement"] = 0.99

    forged = verify_report(_forged(report, better), allow_unsigned=True)
    assert forged.failed == ["summaries"]
    assert forged.item("summaries").problems == [
        "quality.summary.agreement: stored 0.99, recomputed 0.75"
    ]

    def lenient(q: dict[str, Any]) -> None:
        q["settings"]["garbage_over_chance"] = 1.0

    forged = verify_report(_forged(report, lenient), allow_unsigned=True)
    assert "quality.settings: not the embedded recipe's bench.quality" in (
        forged.item("summaries").problems
    )

    def reordered(q: dict[str, Any]) -> None:
        q["served"]["top"][0] = " ".join(reversed(q["served"]["top"][0].split()))

    forged = verify_report(_forged(report, reordered), allow_unsigned=True)
    assert "quality.served position 1: the top list is not best first" in (
        forged.item("summaries").problems
    )


def test_quality_beyond_its_band_is_not_comparable(base: Report) -> None:
    a, b = with_probe(base, probe()), with_probe(base, probe(agree=2, ppl_factor=1.1))
    [diff] = [d for d in comparability(a, b) if d.aspect == "quality"]
    assert diff.refuses
    assert diff.detail == (
        "perplexity 10 vs 11 (+10.0 %, band ±2 %); top-1 agreement 100.0 % vs 10.0 % "
        "(-90.0 pp, band ±5 pp); KL estimate 0 vs 0.302 nats"
    )
    # B's KL by hand: at each of 18 disagreeing positions the reference has 0.5, 0.2 and a
    # rest of 0.3; the server 0.2 on the reference's top-1, its 200 unreported: it shares the
    # unreported 1 - 0.5 - 0.2 - 0.1 / 1.1 with the rest bin, half each
    assert b.quality is not None
    fill = (1 - 0.5 - 0.2 - 0.1 / 1.1) / 2
    per = 0.5 * ln(0.5 / 0.2) + 0.2 * ln(0.2 / fill) + 0.3 * ln(0.3 / (1 - 0.2 - fill))
    assert b.quality.summary.kl == pytest.approx(per * 18 / 20, rel=1e-3)  # stored rounded
    verdict_ = judge(a, b)
    assert verdict_.verdict == "NOT COMPARABLE"
    assert verdict_.summary == "NOT COMPARABLE: quality differs"
    assert verdict_.not_comparable == [f"quality: {diff.detail}"]


def test_quality_within_its_band_or_not_alike_is_no_difference(
    base: Report, fixtures_dir: Path
) -> None:
    a = with_probe(base, probe())
    within = with_probe(base, probe(agree=19, ppl_factor=1.01))  # -5 pp, +1 %
    assert not [d for d in comparability(a, within) if d.aspect == "quality"]
    other = probe(agree=2)
    shifted = other.model_copy(update={"token_ids": [t + 1 for t in other.token_ids]})
    assert not [d for d in comparability(a, with_probe(base, shifted)) if d.aspect == "quality"]
    assert not [d for d in comparability(a, with_probe(base, None)) if d.aspect == "quality"]
    # the probe's settings are not the protocol: they move no speed figure
    looser = build_report(fixtures_dir, overrides=("bench.quality.max_perplexity_ratio=3",))
    assert not [d.aspect for d in comparability(base, looser)]
