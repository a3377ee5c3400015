"""The quality probe against a running server: kit's evaluation text (the reference's tokens,
else the server's own tokenization of it) in one ``/v1/completions`` request that generates one
token and asks vLLM for ``prompt_logprobs``: every position scored teacher-forced."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import httpx

from kit.errors import ServerAnswerError, to_kit_error
from kit.quality.measures import Pair, scores_of, summarize
from kit.quality.reference import window
from kit.quality.schema import QualityProbe, ReferenceScores, TokenScores
from kit.quality.text import evaluation_text, text_sha256
from kit.recipe.quality import Quality

log = logging.getLogger(__name__)

# the top k's probabilities may sum past 1 by rounding, never by more
SUM_TOLERANCE = 1e-3


@dataclass(frozen=True)
class ProbeJob:
    """Where the probe asks and what: the server, its model name, the recipe's settings, the
    recipe's context length, and the request's time limit."""

    url: str
    model: str
    settings: Quality
    max_model_len: int
    timeout_s: float


def parse_rows(rows: Any, token_ids: list[int], k: int) -> TokenScores:
    """vLLM's ``prompt_logprobs`` (per prompt position: None for the first, then a mapping of
    token id to its logprob and rank, the prompt's own token first when it is not in the top
    k) as TokenScores; ValueError when they are not that."""
    if not isinstance(rows, list) or len(rows) != len(token_ids):
        got = len(rows) if isinstance(rows, list) else type(rows).__name__
        raise ValueError(f"prompt_logprobs for {got} positions, the prompt has {len(token_ids)}")
    logprobs: list[float] = []
    tops: list[list[Pair]] = []
    for i, row in enumerate(rows[1:], start=1):
        pairs = {int(tid): float(entry["logprob"]) for tid, entry in row.items()}
        target = token_ids[i]
        if target not in pairs:
            raise ValueError(f"position {i}: no log-probability for the prompt's token {target}")
        top = [(t, lp) for t, lp in pairs.items() if t != target or len(pairs) <= k]
        top.sort(key=lambda p: -p[1])
        mass = math.fsum(math.exp(lp) for _, lp in top)
        if mass > 1 + SUM_TOLERANCE or any(lp > SUM_TOLERANCE for _, lp in top):
            raise ValueError(
                f"position {i}: the top {k} are not log-probabilities (their probabilities sum "
                f"to {mass:.3g}): is the server started with --logprobs-mode raw_logits?"
            )
        logprobs.append(pairs[target])
        tops.append(top[:k])
    return scores_of(logprobs, tops)


def tokenize(client: httpx.Client, job: ProbeJob) -> list[int]:
    """The server's tokens of the evaluation text, cut to the window (no reference to take
    them from)."""
    endpoint = job.url.rstrip("/") + "/tokenize"
    resp = client.post(endpoint, json={"model": job.model, "prompt": evaluation_text()})
    if resp.is_error:
        raise ServerAnswerError(endpoint, resp.status_code, resp.text)
    try:
        tokens = [int(t) for t in resp.json()["tokens"]]
    except (ValueError, LookupError, TypeError):
        raise ServerAnswerError(
            endpoint, resp.status_code, resp.text, expected="no token list"
        ) from None
    return tokens[: window(job.settings, job.max_model_len)]


def served_scores(client: httpx.Client, job: ProbeJob, token_ids: list[int]) -> TokenScores:
    """The server's scores of ``token_ids``, teacher-forced, in one request."""
    endpoint = job.url.rstrip("/") + "/v1/completions"
    body = {
        "model": job.model,
        "prompt": token_ids,
        "max_tokens": 1,
        "temperature": 0.0,
        "prompt_logprobs": job.settings.top_k,
    }
    resp = client.post(endpoint, json=body)
    if resp.is_error:
        raise ServerAnswerError(endpoint, resp.status_code, resp.text)
    try:
        rows = resp.json()["choices"][0]["prompt_logprobs"]
        return parse_rows(rows, token_ids, job.settings.top_k)
    except (ValueError, LookupError, TypeError, AttributeError) as exc:
        raise ServerAnswerError(
            endpoint, resp.status_code, "", expected=f"no prompt_logprobs kit can read: {exc}"
        ) from None


def run_probe(
    job: ProbeJob, reference: ReferenceScores | None, no_reference: str | None
) -> QualityProbe:
    """Score the text through the server and sum it up against the reference (if any)."""
    try:
        with httpx.Client(timeout=job.timeout_s) as client:
            token_ids = list(reference.token_ids) if reference else tokenize(client, job)
            t0 = time.monotonic()
            served = served_scores(client, job, token_ids)
            duration = time.monotonic() - t0
    except httpx.HTTPError as exc:
        raise to_kit_error(exc) from exc
    summary = summarize(token_ids, served, reference)
    log.info(
        "quality: %d tokens, perplexity %.4g%s",
        summary.positions,
        summary.perplexity,
        f" (reference {summary.reference_perplexity:.4g}), agreement {summary.agreement:.1%}"
        if summary.reference_perplexity is not None and summary.agreement is not None
        else f"; no reference: {no_reference}",
    )
    return QualityProbe(
        settings=job.settings,
        text_sha256=text_sha256(),
        token_ids=token_ids,
        served=served,
        reference=reference,
        no_reference=None if reference else no_reference,
        summary=summary,
        duration_s=round(duration, 3),
    )
