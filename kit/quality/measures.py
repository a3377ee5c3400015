"""The probe's figures from per-token scores: perplexity, top-1 agreement, chance, and the
KL(reference || served) estimate from the two top-k lists. docs/quality.md has the formulas."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence

from kit.quality.schema import QualitySummary, ReferenceScores, TokenScores

DECIMALS = 4  # stored log-probabilities are rounded to this many decimals
FLOOR = 1e-12  # the least probability a bin is given, so that no logarithm is of zero

Pair = tuple[int, float]  # (token id, log-probability)


def pack_top(pairs: Sequence[Pair]) -> str:
    """'id:logprob id:logprob ...', logprobs rounded as stored."""
    return " ".join(f"{tid}:{round(lp, DECIMALS)!r}" for tid, lp in pairs)


def parse_top(entry: str) -> list[Pair]:
    """The pairs of one packed top list; ValueError when it is not one."""
    out: list[Pair] = []
    for item in entry.split():
        tid, sep, lp = item.partition(":")
        if not sep:
            raise ValueError(f"{item!r} is not id:logprob")
        value = float(lp)
        if not math.isfinite(value):
            raise ValueError(f"{item!r}: the log-probability is not finite")
        out.append((int(tid), value))
    return out


def scores_of(logprobs: Sequence[float], tops: Sequence[Sequence[Pair]]) -> TokenScores:
    """TokenScores, rounded as stored (the figures are computed from the stored values)."""
    return TokenScores(
        logprobs=[round(lp, DECIMALS) for lp in logprobs], top=[pack_top(t) for t in tops]
    )


def perplexity(logprobs: Sequence[float]) -> float:
    """exp of the mean negative log-probability of the text's tokens."""
    if not logprobs:
        raise ValueError("no position scored")
    return math.exp(-math.fsum(logprobs) / len(logprobs))


def top1(tops: Sequence[Sequence[Pair]]) -> list[int]:
    """Each position's best token: the highest log-probability, the first listed on a tie."""
    return [max(t, key=lambda p: p[1])[0] if t else -1 for t in tops]


def agreement(served: Sequence[int], reference: Sequence[int]) -> float:
    """Share of positions whose top-1 tokens are the same."""
    if not served or len(served) != len(reference):
        raise ValueError(f"{len(served)} served positions against {len(reference)} reference")
    return sum(1 for s, r in zip(served, reference, strict=True) if s == r) / len(served)


def chance(reference: Sequence[int], vocab_size: int) -> float:
    """The agreement of a model that always answers the reference's most frequent top-1
    token, and at least that of a uniformly random answer, 1 / vocab_size."""
    most = Counter(reference).most_common(1)
    share = most[0][1] / len(reference) if most else 0.0
    return max(share, 1 / vocab_size)


def kl_position(ref_top: Sequence[Pair], served_top: Sequence[Pair], served_target: Pair) -> float:
    """KL(P || Q) over k + 1 bins: the reference's top-k tokens, and one bin for all else.

    P of a bin is the reference's probability (the rest bin: 1 minus the top k). Q of a token
    the server reported (its top k, or the text's next token) is the served probability. A
    token it did not report ranked below its top k, so its Q is at most the served k-th
    probability: each such token of the reference's top k gets min(k-th, u / (m + 1)), where
    u is the served mass left unreported and m their number (they and the rest bin share u
    evenly). The rest bin is 1 minus Q of the top-k bins. A bin's Q is at least FLOOR; the
    estimate, at least 0."""
    reported = dict(served_top)
    reported.setdefault(*served_target)
    kth = min((math.exp(lp) for _, lp in served_top), default=0.0)
    unreported = max(0.0, 1.0 - math.fsum(math.exp(lp) for lp in reported.values()))
    missing = [tid for tid, _ in ref_top if tid not in reported]
    fill = min(kth, unreported / (len(missing) + 1))
    total, q_top = [], []
    for tid, lp in ref_top:
        q = math.exp(reported[tid]) if tid in reported else fill
        q_top.append(q)
        total.append(math.exp(lp) * (lp - math.log(max(q, FLOOR))))
    p_rest = 1.0 - math.fsum(math.exp(lp) for _, lp in ref_top)
    if p_rest > 0:
        q_rest = max(1.0 - math.fsum(q_top), FLOOR)
        total.append(p_rest * (math.log(p_rest) - math.log(q_rest)))
    return max(0.0, math.fsum(total))  # not below 0 by the rounding of stored values


def summarize(
    token_ids: Sequence[int], served: TokenScores, reference: ReferenceScores | None
) -> QualitySummary:
    """The figures of a probe from its per-token scores; ValueError when they do not fit."""
    n = len(token_ids) - 1
    if n < 1 or len(served.logprobs) != n or len(served.top) != n:
        raise ValueError(
            f"{len(token_ids)} tokens need {max(n, 0)} scored positions; the served side has "
            f"{len(served.logprobs)} log-probabilities and {len(served.top)} top lists"
        )
    ppl = perplexity(served.logprobs)
    if reference is None:
        return QualitySummary(
            positions=n,
            perplexity=ppl,
            reference_perplexity=None,
            perplexity_ratio=None,
            agreement=None,
            chance=None,
            kl=None,
        )
    if reference.token_ids != list(token_ids):
        raise ValueError("the reference scored other tokens than the served engine")
    served_top = [parse_top(t) for t in served.top]
    ref_top = [parse_top(t) for t in reference.scores.top]
    if len(ref_top) != n or len(reference.scores.logprobs) != n:
        raise ValueError(f"the reference has {len(ref_top)} positions, not {n}")
    ref_best = top1(ref_top)
    kls = [
        kl_position(r, s, (token_ids[i + 1], served.logprobs[i]))
        for i, (r, s) in enumerate(zip(ref_top, served_top, strict=True))
    ]
    ref_ppl = perplexity(reference.scores.logprobs)
    return QualitySummary(
        positions=n,
        perplexity=ppl,
        reference_perplexity=ref_ppl,
        perplexity_ratio=ppl / ref_ppl,
        agreement=agreement(top1(served_top), ref_best),
        chance=chance(ref_best, reference.vocab_size),
        kl=math.fsum(kls) / n,
    )


def score_problems(scores: TokenScores, token_ids: Sequence[int], k: int, side: str) -> list[str]:
    """How one side's stored scores contradict themselves: a top list longer than k, not best
    first, or unreadable; the next token's log-probability above its position's best, or not
    the one its top list gives it; a log-probability above 0."""
    out: list[str] = []
    for i, (lp, entry) in enumerate(zip(scores.logprobs, scores.top, strict=False), start=1):
        where = f"{side} position {i}"
        try:
            top = parse_top(entry)
        except ValueError as exc:
            out.append(f"{where}: {exc}")
            continue
        if len(top) > k:
            out.append(f"{where}: {len(top)} entries in a top {k}")
        if any(a[1] < b[1] for a, b in itertools.pairwise(top)):
            out.append(f"{where}: the top list is not best first")
        if lp > 0 or any(v > 0 for _, v in top):
            out.append(f"{where}: a log-probability above 0")
        if top and lp > top[0][1]:
            out.append(f"{where}: the next token's {lp} is above the best's {top[0][1]}")
        listed = dict(top).get(token_ids[i]) if i < len(token_ids) else None
        if listed is not None and listed != lp:
            out.append(f"{where}: the next token is listed at {listed}, scored {lp}")
    return out
