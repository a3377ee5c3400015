"""kit.quality.measures: the probe's figures against cases worked out by hand."""

from __future__ import annotations

import math

import pytest

from kit.quality.measures import (
    FLOOR,
    agreement,
    chance,
    kl_position,
    pack_top,
    parse_top,
    perplexity,
    score_problems,
    scores_of,
    summarize,
    top1,
)
from kit.quality.schema import ReferenceProvenance, ReferenceScores, TokenScores

ln = math.log


def test_perplexity_is_exp_of_the_mean_negative_logprob() -> None:
    assert perplexity([-1.0, -2.0, -3.0]) == pytest.approx(math.exp(2.0))
    assert perplexity([ln(0.25)] * 7) == pytest.approx(4.0)  # uniform over 4 tokens
    with pytest.raises(ValueError, match="no position"):
        perplexity([])


def test_agreement_counts_equal_top1() -> None:
    assert agreement([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75
    with pytest.raises(ValueError):
        agreement([1, 2], [1])


def test_top1_takes_the_highest_and_the_first_on_a_tie() -> None:
    assert top1([[(3, -2.0), (5, -1.0)], [(7, -1.0), (2, -1.0)]]) == [5, 7]


def test_chance_is_the_best_constant_answer_and_at_least_uniform() -> None:
    # always answering 5 agrees at 3 of 4 positions
    assert chance([5, 5, 5, 7], vocab_size=1024) == 0.75
    # four different answers: 1/4 each, below a uniform guess over 2 tokens
    assert chance([1, 2, 3, 4], vocab_size=2) == 0.5
    assert chance([1, 2, 3, 4], vocab_size=1024) == 0.25


def test_kl_with_every_reference_token_reported() -> None:
    ref = [(1, ln(0.5)), (2, ln(0.3))]  # rest 0.2
    served = [(1, ln(0.4)), (2, ln(0.4))]  # rest 0.2 (the next token, 3, at 0.1 among it)
    expected = 0.5 * ln(0.5 / 0.4) + 0.3 * ln(0.3 / 0.4) + 0.2 * ln(0.2 / 0.2)
    assert kl_position(ref, served, (3, ln(0.1))) == pytest.approx(expected)


def test_kl_of_identical_lists_is_zero() -> None:
    top = [(4, ln(0.6)), (9, ln(0.3))]
    assert kl_position(top, top, (4, ln(0.6))) == pytest.approx(0.0, abs=1e-15)


def test_kl_a_token_the_server_did_not_report_shares_the_unreported_mass() -> None:
    ref = [(1, ln(0.5)), (2, ln(0.3))]  # rest 0.2
    served = [(1, ln(0.6)), (4, ln(0.2))]  # k-th: 0.2
    # reported: 0.6 + 0.2 + the next token's 0.1; unreported 0.1, shared by token 2 and the
    # rest bin: token 2 gets min(0.2, 0.1 / 2) = 0.05; the rest bin 1 - 0.6 - 0.05 = 0.35
    expected = 0.5 * ln(0.5 / 0.6) + 0.3 * ln(0.3 / 0.05) + 0.2 * ln(0.2 / 0.35)
    assert kl_position(ref, served, (5, ln(0.1))) == pytest.approx(expected)


def test_kl_a_missing_token_is_at_most_the_served_kth() -> None:
    ref = [(1, ln(0.4)), (2, ln(0.3)), (3, ln(0.2))]  # rest 0.1
    served = [(1, ln(0.5))]  # k = 1: the k-th is 0.5, unreported 0.5
    # tokens 2 and 3 and the rest bin share 0.5: min(0.5, 0.5 / 3) = 1/6 each
    sixth = 1 / 6
    expected = (
        0.4 * ln(0.4 / 0.5) + 0.3 * ln(0.3 / sixth) + 0.2 * ln(0.2 / sixth) + 0.1 * ln(0.1 / sixth)
    )
    assert kl_position(ref, served, (1, ln(0.5))) == pytest.approx(expected)
    # a k-th below the share caps it: k = 2 with a k-th of 0.05
    served = [(1, ln(0.5)), (8, ln(0.05))]  # unreported 0.45, 3 claimants: 0.15 > 0.05
    q_rest = 1 - 0.5 - 0.05 - 0.05
    expected = (
        0.4 * ln(0.4 / 0.5) + 0.3 * ln(0.3 / 0.05) + 0.2 * ln(0.2 / 0.05) + 0.1 * ln(0.1 / q_rest)
    )
    assert kl_position(ref, served, (1, ln(0.5))) == pytest.approx(expected)


def test_kl_nothing_left_for_a_bin_is_the_floor() -> None:
    ref = [(1, ln(0.5))]  # rest 0.5
    served = [(1, 0.0)]  # the server puts everything on token 1
    expected = 0.5 * ln(0.5 / 1.0) + 0.5 * (ln(0.5) - ln(FLOOR))
    assert kl_position(ref, served, (1, 0.0)) == pytest.approx(expected)


def test_packed_top_lists_round_trip_rounded() -> None:
    pairs = [(404, -6.035818576812744), (7, -9999.0), (12, -0.00001)]
    packed = pack_top(pairs)
    assert packed == "404:-6.0358 7:-9999.0 12:-0.0"
    assert parse_top(packed) == [(404, -6.0358), (7, -9999.0), (12, -0.0)]
    for bad in ("404", "a:1", "3:nan"):
        with pytest.raises(ValueError):
            parse_top(bad)


def _reference(token_ids: list[int], scores: TokenScores, vocab: int = 8) -> ReferenceScores:
    return ReferenceScores(
        text_sha256="0" * 64,
        token_ids=token_ids,
        vocab_size=vocab,
        top_k=2,
        scores=scores,
        provenance=ReferenceProvenance(
            method="transformers", model_identity=None, dtype="float32", device="cpu"
        ),
    )


def test_summarize_a_three_position_probe() -> None:
    tokens = [0, 1, 2, 3]
    ref = scores_of(
        [ln(0.5), ln(0.5), ln(0.25)],
        [
            [(1, ln(0.5)), (2, ln(0.25))],
            [(2, ln(0.5)), (1, ln(0.25))],
            [(1, ln(0.5)), (3, ln(0.25))],
        ],
    )
    served = scores_of(
        [ln(0.5), ln(0.25), ln(0.5)],
        [
            [(1, ln(0.5)), (2, ln(0.25))],
            [(1, ln(0.5)), (2, ln(0.25))],
            [(3, ln(0.5)), (1, ln(0.25))],
        ],
    )
    s = summarize(tokens, served, _reference(tokens, ref))
    assert s.positions == 3
    assert s.perplexity == pytest.approx((0.5 * 0.25 * 0.5) ** (-1 / 3), rel=1e-4)
    assert s.reference_perplexity == pytest.approx((0.5 * 0.5 * 0.25) ** (-1 / 3), rel=1e-4)
    assert s.perplexity_ratio == pytest.approx(1.0, rel=1e-4)
    assert s.agreement == pytest.approx(1 / 3)  # top-1: 1/1, 2/1, 1/3
    assert s.chance == pytest.approx(2 / 3)  # the reference answers 1 at two of three
    assert s.kl is not None and s.kl > 0
    # no reference: perplexity alone
    alone = summarize(tokens, served, None)
    assert (alone.perplexity, alone.agreement, alone.kl) == (s.perplexity, None, None)
    with pytest.raises(ValueError, match="other tokens"):
        summarize(tokens, served, _reference([0, 1, 2, 4], ref))
    with pytest.raises(ValueError, match="scored positions"):
        summarize(tokens[:3], served, None)


def test_score_problems_names_what_contradicts_itself() -> None:
    tokens = [0, 1, 2, 3]
    good = scores_of([-1.0, -2.0, -0.5], [[(1, -1.0)], [(5, -1.0)], [(3, -0.5)]])
    assert score_problems(good, tokens, 1, "served") == []
    bad = TokenScores(
        logprobs=[-1.0, -0.5, 0.5],
        top=["1:-2.0 4:-1.0", "5:-1.0", "3:0.5"],
    )
    problems = score_problems(bad, tokens, 1, "served")
    assert "served position 1: 2 entries in a top 1" in problems
    assert "served position 1: the top list is not best first" in problems
    assert "served position 1: the next token is listed at -2.0, scored -1.0" in problems
    assert "served position 2: the next token's -0.5 is above the best's -1.0" in problems
    assert "served position 3: a log-probability above 0" in problems
