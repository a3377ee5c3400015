"""The DFlash2 backport's H200 runs (experiments/results/h200-dflash2-2026-12-0{2,3}/, issue 18,
copied to tests/fixtures/results/): the reports verify against the committed key and hold what
the deterministic case predicts.

token0: a zero-norm target that always emits token 0 and a draft whose every position has token
0 as its strict top-1, so vLLM's own counters must show every drafted token accepted, at each of
the 7 positions. int4-dflash2: random weights, so next to nothing is accepted, but the DFlash2
speculator drafted on every step. The second session ran the 8B recipe as committed: its 10K and
90K-token prefill probe went through the DFlash2 path too."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.report.files import read_report
from kit.report.verify import verify_report
from kit.signing import load_public_key

FIXTURES = Path(__file__).parents[2] / "fixtures"
RUNS = FIXTURES / "results" / "h200-dflash2-2026-12-02"
FULL = FIXTURES / "results" / "h200-dflash2-2026-12-03" / "int4-dflash2.report.json"
KEY = load_public_key(FIXTURES / "examples" / "keys" / "h200-2026-12-02-dflash2.pub")


@pytest.mark.parametrize(
    "path", [RUNS / "token0.report.json", RUNS / "int4-dflash2.report.json", FULL], ids=str
)
def test_dflash2_report_verifies_item_by_item(path: Path) -> None:
    result = verify_report(path, KEY)
    assert result.ok and all(item.ok for item in result.items), result.failed
    report, check = read_report(path, KEY)
    assert check.valid and report.status == "complete"
    assert report.engine is not None
    assert report.engine.patch_series == "vllm-0.26.0" and report.engine.version == "0.26.0"
    assert report.draft is not None and report.draft.architecture == "DFlash2DraftModel"


def test_token0_accepts_every_drafted_token_at_every_position() -> None:
    report, _ = read_report(RUNS / "token0.report.json", KEY)
    assert report.bench is not None
    sd = report.bench.spec_decode
    assert sd is not None and sd.drafts > 0
    assert sd.draft_tokens == 7 * sd.drafts and sd.accepted_tokens == sd.draft_tokens
    assert (sd.acceptance_length, sd.accepted_per_draft, sd.acceptance_rate) == (8, 7, 1)
    assert sd.per_position_accepted == [sd.drafts] * 7
    assert sd.per_position_rate == [1] * 7


@pytest.mark.parametrize(
    ("path", "overrides"),
    [(RUNS / "int4-dflash2.report.json", ["bench.prefill=null"]), (FULL, [])],
    ids=["2026-12-02", "2026-12-03"],
)
def test_random_int4_dflash2_drafts_on_every_step_and_accepts_almost_nothing(
    path: Path, overrides: list[str]
) -> None:
    report, _ = read_report(path, KEY)
    assert report.bench is not None
    sd = report.bench.spec_decode
    assert sd is not None and sd.draft_tokens == 7 * sd.drafts > 0
    assert sd.acceptance_rate is not None and sd.acceptance_rate < 0.01
    assert report.recipe_overrides == overrides


def test_full_run_served_the_long_prefills_through_dflash2() -> None:
    report, _ = read_report(FULL, KEY)
    assert report.bench is not None
    assert [p.depth for p in report.bench.prefill] == [10000, 90000]
    for probe in report.bench.prefill:
        assert probe.status == "measured" and probe.ttft_ms is not None
        assert probe.ttft_ms.n == 3 and probe.prompt_tokens.min >= probe.depth
    long = [r for r in report.bench.records if r.prompt == "prefill-90000"]
    assert len(long) == 4 and all(r.error is None for r in long)
