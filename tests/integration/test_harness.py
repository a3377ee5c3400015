"""The task harness (bench.quality.harness) on the session's real vLLM CPU server: lm-eval
0.4.13, installed once into its venv under KIT_HOME, runs kit's own local task
(tests/fixtures/lm_eval: generate_until over a JSONL file, exact_match) offline, and its
results file lands in the report; a task lm-eval does not know is a recorded failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.bench import Bencher, model_info
from kit.build import Built
from kit.engine import EngineEnv
from kit.measure import harness_beside
from kit.quality.harness import LM_EVAL_VERSION, HarnessRun
from kit.recipe import LoadedRecipe, load_recipe
from kit.report.assemble import Extras, Measurement, Setup, finish_report, new_report, server_info
from kit.report.files import encode_report
from kit.report.verify import verify_report
from kit.serve import RunningServer

pytestmark = pytest.mark.integration

SHORT = ["bench.warmups=0", "bench.runs=1", "bench.prefill=null"]
SHORT += [f"bench.prompts.{i}.max_tokens=8" for i in (0, 1)]
# include_path is relative to the recipe (recipes/cpu-tiny.yaml)
HARNESS = [
    "bench.quality.harness.name=lm-eval",
    "bench.quality.harness.tasks=[kit_tiny_qa]",
    "bench.quality.harness.limit=5",
    "bench.quality.harness.include_path=../tests/fixtures/lm_eval",
]


@pytest.fixture(scope="module")
def measured(cpu_recipe: LoadedRecipe, server: RunningServer) -> Measurement:
    short = load_recipe(cpu_recipe.path, SHORT)
    name, max_len = model_info(server.url)
    return Measurement(Bencher(server.url, short.recipe.bench, name, max_model_len=max_len).run())


def _harness(
    cpu_recipe: LoadedRecipe, url: str, measured: Measurement, out: Path, *more: str
) -> tuple[LoadedRecipe, HarnessRun, list[str]]:
    loaded = load_recipe(cpu_recipe.path, [*SHORT, *HARNESS, *more])
    run, notes = harness_beside(loaded, url, measured, out)
    assert run is not None  # the recipe has a harness
    return loaded, run, notes


def test_the_local_task_lands_in_the_report(
    cpu_recipe: LoadedRecipe,
    built: Built,
    engine_env: EngineEnv,
    server: RunningServer,
    measured: Measurement,
    tmp_path: Path,
) -> None:
    loaded, run, notes = _harness(cpu_recipe, server.url, measured, tmp_path)
    assert run.error is None and notes == [], run.error
    assert run.tool_version == LM_EVAL_VERSION
    assert run.model_args["model"] == measured.result.served_model
    assert "base_url" not in run.model_args and server.url not in json.dumps(run.model_args)
    [task] = run.tasks
    assert (task.task, task.docs, task.docs_total, task.n_shot) == ("kit_tiny_qa", 5, 8, 0)
    [metric] = [m for m in task.metrics if m.metric == "exact_match"]
    assert 0 <= metric.value <= 1 and metric.stderr is not None  # the model answers garbage

    # the figures are lm-eval's own file's, read back
    assert run.results_file is not None and run.results_file.startswith("lm-eval/")
    data = json.loads((tmp_path / run.results_file).read_text())
    assert data["results"]["kit_tiny_qa"][f"exact_match,{metric.filter}"] == metric.value
    assert data["n-samples"]["kit_tiny_qa"] == {"original": 8, "effective": 5}

    setup = Setup(built=built, env=engine_env, server=server_info(server, "native"))
    report = finish_report(
        new_report(loaded, "h"), setup, measured, Extras(harness=run), failure=None
    )
    assert report.model_dump(mode="json")["harness"]["tasks"][0]["docs"] == 5
    checklist = verify_report(encode_report(report), allow_unsigned=True)
    assert checklist.ok, checklist.render()


def test_an_unknown_task_is_a_recorded_failure(
    cpu_recipe: LoadedRecipe, server: RunningServer, measured: Measurement, tmp_path: Path
) -> None:
    unknown = "bench.quality.harness.tasks=[kit_no_such_task]"
    _, run, notes = _harness(cpu_recipe, server.url, measured, tmp_path, unknown)
    assert run.tasks == [] and run.results_file is None
    assert run.error is not None
    assert run.error.startswith("lm-eval exited 1: ValueError: Tasks not found: kit_no_such_task")
    assert notes == [f"bench.quality.harness failed: {run.error}"]
