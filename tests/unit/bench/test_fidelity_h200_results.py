"""The committed H200 fidelity runs (experiments/results/fidelity-h200-*.json, issue 14, copied to
tests/fixtures/results/): each reads back as kit's Fidelity model, its summary is what kit's
summarize gives from its windows, and goals_met is what the goals say of the kit arm. The fourth run
(2026-12-03, ignore_eos) met both goals; the third (2026-12-02-s3) met the mean goal only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.fidelity import GOAL_DIP_PCT, GOAL_MEAN_PCT, Fidelity, summarize

RESULTS = Path(__file__).parents[2] / "fixtures" / "results"
# the first run (fidelity-h200-2026-12-02.json) carries a note added by hand ("incomplete": the
# call's limit cut it), which the model refuses; the later ones are as kit wrote them
RUNS = [
    RESULTS / f"fidelity-h200-{d}.json" for d in ("2026-12-02-s2", "2026-12-02-s3", "2026-12-03")
]


def load(path: Path) -> Fidelity:
    return Fidelity.model_validate(json.loads(path.read_text()))


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_summary_and_verdict_follow_from_the_windows(path: Path) -> None:
    run = load(path)
    assert run.complete and run.windows
    assert summarize(run.windows) == run.summary
    kit = next(s for s in run.summary if s.arm == "kit")
    if run.goals_met is not None:
        assert kit.server_vs_independent_pct is not None and kit.worst_dip_pct is not None
        met = kit.server_vs_independent_pct >= -GOAL_MEAN_PCT and kit.worst_dip_pct >= -GOAL_DIP_PCT
        assert run.goals_met == met


def test_fourth_run_met_both_goals_with_every_request_decoding_max_tokens() -> None:
    run = load(RESULTS / "fidelity-h200-2026-12-03.json")
    assert run.goals_met is True and run.rounds == 2 and run.runs == 3
    assert {w.arm for w in run.windows} == {"kit", "kit-no-sampler", "independent", "kit-cli"}
    # ignore_eos: every window's server counted exactly max_tokens a request
    for w in run.windows:
        assert w.server is not None
        assert w.server.generation_tokens == run.max_tokens * len(w.decode_tps)
    assert all(s.worst_dip_pct is not None and s.worst_dip_pct > -2 for s in run.summary)
