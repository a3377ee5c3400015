"""LLMPerf leaderboard results: the summaries (reference-only: hosted APIs) and the individual
responses, whose records give the summary's figures back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kit.importers import ImportedRecipe, read_file
from kit.recipe import Recipe
from kit.recipe.patterns import ConcurrencyLoad
from kit.recipe.traffic import RandomDataset

Imports = Callable[..., tuple[ImportedRecipe, Recipe]]  # the `imports` fixture


def test_groq_summary(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "llmperf" / "leaderboard-groq-70b_summary.json")
    imp = done.imported
    assert (imp.tool, imp.layout) == ("llmperf", "summary.json, version 2023-08-31")
    assert imp.model == "llama2-70b-4096" and imp.hub_repo is None
    assert imp.engine == "groq (hosted API)"
    assert imp.reference_only == "a hosted API (groq): its server cannot be rebuilt"
    assert imp.date == "2024-01-10T01:55:04+00:00"
    (point,) = imp.points
    assert point.label == "concurrency-5"
    f = point.figures
    assert (f.requests, f.completed, f.failed) == (150, 150, 0)
    assert f.output_tps == 441.84737788500206
    assert f.request_throughput == pytest.approx(176.73895115400083 / 60)
    assert f.ttft_ms is not None and f.ttft_ms.p99 == pytest.approx(350.0269545800982)
    assert f.e2e_ms is not None and f.e2e_ms.median == pytest.approx(805.1837999373674)
    assert f.tpot_ms is None and f.itl_ms is None  # LLMPerf's ITL is neither: kept apart
    (itl,) = point.other.values()
    assert itl.mean == pytest.approx(5.384122478382455)
    assert isinstance(recipe.bench.load, ConcurrencyLoad)
    assert (recipe.bench.load.levels, recipe.bench.load.requests) == ([5], 150)
    assert isinstance(recipe.bench.dataset, RandomDataset)
    assert (recipe.bench.dataset.input_tokens, recipe.bench.dataset.output_tokens) == (550, 150)
    assert recipe.model.source == "synthetic"  # a provider's name: the model stays open


def test_together_summary_counts_more_tokens_than_asked(foreign: Path, imports: Imports) -> None:
    done, _ = imports(foreign / "llmperf" / "leaderboard-together-7b_summary.json")
    imp = done.imported
    (point,) = imp.points
    assert point.figures.output_tps == 255.82978116075432
    assert point.output_tokens_mean == 172.4
    assert (
        "requests asked for 150 output tokens and produced 172.4 on average (LLMPerf's Llama "
        "tokenizer count, and no ignore_eos)"
    ) in imp.warnings


def test_individual_responses_give_the_summary_back(foreign: Path, imports: Imports) -> None:
    done, recipe = imports(foreign / "llmperf" / "leaderboard-groq-70b_individual_responses.json")
    (point,) = done.imported.points
    assert point.load is None and point.label == "point-1"
    pr = point.per_request
    assert pr is not None and (pr.count, pr.failed) == (150, 0)
    (summary,) = read_file(foreign / "llmperf" / "leaderboard-groq-70b_summary.json").points
    for name in ("ttft_ms", "e2e_ms"):
        mine, theirs = getattr(point.figures, name), getattr(summary.figures, name)
        assert mine.mean == pytest.approx(theirs.mean)
        assert mine.p99 == pytest.approx(theirs.p99)
    assert recipe.bench.load is None


def test_partial_failures_are_said(foreign: Path) -> None:
    """Lepton 7b: 130 of 150 requests got HTTP 429; the figures are the 20 survivors'."""
    imp = read_file(foreign / "llmperf" / "leaderboard-lepton-7b_summary.json")
    (point,) = imp.points
    assert (point.figures.requests, point.figures.completed, point.figures.failed) == (150, 20, 130)
    assert imp.warnings[0] == (
        "concurrency-5: 130 of 150 requests failed (status codes: 429 x130): the figures come "
        "from the 20 that completed"
    )
