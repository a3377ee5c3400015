"""bench.quality.harness (lm-eval): the recipe's checks at load time, the command kit gives
lm-eval, the results file read back, and a harness that cannot run recorded, not raised.

``results-cpu-tiny.json`` is the results file lm-eval 0.4.13 wrote in
tests/integration/test_harness.py (kit_tiny_qa, limit 5, against the CPU server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import build_report

from kit.errors import RecipeError
from kit.quality.harness import (
    HarnessJob,
    HarnessRun,
    command,
    failed,
    failure_reason,
    parse_results,
    read_results,
    run_harness,
)
from kit.recipe import load_recipe, shown_recipe
from kit.recipe.quality import Harness
from kit.report.html.harness import harness_section
from kit.report.show.markdown import markdown_row
from kit.report.show.summary import harness_lines

HARNESS = ["bench.quality.harness.name=lm-eval", "bench.quality.harness.tasks=[kit_tiny_qa]"]


def _recipe_with(tmp_path: Path, fixtures_dir: Path, block: str) -> Path:
    """cpu-tiny's recipe with ``block`` (YAML lines of bench.quality.harness), in tmp_path."""
    text = (fixtures_dir / "recipes" / "cpu-tiny.yaml").read_text()
    assert "\nbench:\n" in text
    path = tmp_path / "recipe.yaml"
    harness = "".join(f"      {line}\n" for line in block.splitlines())
    path.write_text(text.replace("\nbench:\n", f"\nbench:\n  quality:\n    harness:\n{harness}"))
    return path


def test_an_include_path_that_is_not_there_names_the_file_and_field(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    path = _recipe_with(
        tmp_path, fixtures_dir, "name: lm-eval\ntasks: [kit_tiny_qa]\ninclude_path: tasks"
    )
    with pytest.raises(RecipeError) as err:
        load_recipe(path)
    [problem] = err.value.problems
    assert problem.startswith(f"{path}:")
    assert problem.endswith(
        ": bench.quality.harness.include_path: tasks: no such folder (relative to the recipe)"
    )
    (tmp_path / "tasks").mkdir()
    harness = load_recipe(path).recipe.bench.quality
    assert harness is not None and harness.harness is not None
    assert harness.harness.include_path == "tasks"  # kept as written: the report names no path


def test_an_include_path_from_set_is_checked_beside_the_recipe(fixtures_dir: Path) -> None:
    recipe = fixtures_dir / "recipes" / "cpu-tiny.yaml"
    given = "bench.quality.harness.include_path=../lm_eval"  # tests/fixtures/lm_eval
    loaded = load_recipe(recipe, [*HARNESS, given])
    assert loaded.recipe.bench.quality is not None
    assert "harness" in shown_recipe(loaded.recipe)["bench"]["quality"]
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe, [*HARNESS, "bench.quality.harness.include_path=lm_eval"])
    assert str(err.value) == (
        "--set bench.quality.harness.include_path=lm_eval: "
        "bench.quality.harness.include_path: lm_eval: no such folder (relative to the recipe)"
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "bench.quality.harness.tasks=[]",
            "--set bench.quality.harness.tasks=[]: bench.quality.harness.tasks: List should "
            "have at least 1 item after validation, not 0",
        ),
        (
            "bench.quality.harness.tasks=['a,b']",
            "--set bench.quality.harness.tasks=['a,b']: bench.quality.harness.tasks.0: String "
            "should match pattern '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'",
        ),
        (
            "bench.quality.harness.name=helm",
            "--set bench.quality.harness.name=helm: bench.quality.harness.name: Input should "
            "be 'lm-eval'",
        ),
    ],
)
def test_bad_harness_settings_are_named(fixtures_dir: Path, override: str, message: str) -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", [*HARNESS, override])
    assert str(err.value) == message


def _job(tmp_path: Path, python: Path, **settings: Any) -> HarnessJob:
    harness = Harness.model_validate({"name": "lm-eval", "tasks": ["kit_tiny_qa"], **settings})
    return HarnessJob(python, "http://127.0.0.1:8000", "m", harness, None, tmp_path, 30)


def test_the_command_carries_the_recipe(tmp_path: Path) -> None:
    job = _job(tmp_path, Path("py"), limit=5, num_fewshot=2, gen_kwargs={"max_gen_toks": 8})
    argv = command(job)
    assert argv[:4] == ["py", "-m", "lm_eval", "run"]
    args = json.loads(argv[argv.index("--model_args") + 1])
    assert args["base_url"] == "http://127.0.0.1:8000/v1/completions"
    assert args["tokenizer_backend"] is None and args["tokenized_requests"] is False
    assert argv[argv.index("--limit") + 1] == "5" and "--include_path" not in argv
    assert json.loads(argv[argv.index("--gen_kwargs") + 1]) == {"max_gen_toks": 8}
    chat = command(_job(tmp_path, Path("py"), model="local-chat-completions"))
    assert "--apply_chat_template" in chat
    assert json.loads(chat[chat.index("--model_args") + 1])["base_url"].endswith(
        "/v1/chat/completions"
    )


@pytest.fixture
def results(fixtures_dir: Path) -> Path:
    return fixtures_dir / "lm_eval" / "results-cpu-tiny.json"


def test_the_results_file_is_read_back(results: Path) -> None:
    raw = json.loads(results.read_text())
    tasks, version = read_results(results)
    assert version == raw["lm_eval_version"] == "0.4.13"
    [task] = tasks
    assert (task.task, task.docs, task.docs_total) == ("kit_tiny_qa", 5, 8)
    assert task.n_shot == raw["n-shot"]["kit_tiny_qa"] and task.version == "1.0"
    [metric] = task.metrics
    row = raw["results"]["kit_tiny_qa"]
    assert (metric.metric, metric.filter) == ("exact_match", "none")
    assert (metric.value, metric.stderr) == (
        row["exact_match,none"],
        row["exact_match_stderr,none"],
    )


def test_a_stderr_lm_eval_did_not_compute_is_none_and_a_group_has_no_docs(
    results: Path,
) -> None:
    raw = json.loads(results.read_text())
    raw["results"]["kit_tiny_qa"]["exact_match_stderr,none"] = "N/A"
    raw["results"]["kit_group"] = {"alias": "kit_group", "exact_match,none": 0.25}
    task, group = parse_results(raw)
    assert task.metrics[0].stderr is None
    assert (group.task, group.docs, group.metrics[0].value) == ("kit_group", None, 0.25)
    with pytest.raises(ValueError, match="no results"):
        parse_results({"results": {}})


def test_lm_eval_s_own_exception_is_the_reason(tmp_path: Path) -> None:
    log = tmp_path / "lm-eval.log"
    log.write_text(
        "INFO selected tasks\nTraceback (most recent call last):\n  File 'x.py', line 1\n"
        "    raise ValueError\nValueError: Tasks not found: nope\n"
    )
    assert failure_reason(log, 1).startswith("lm-eval exited 1: ValueError: Tasks not found: nope")


def test_a_harness_that_cannot_run_is_recorded_not_raised(tmp_path: Path) -> None:
    # kit's own interpreter has no lm_eval: the real process fails as a missing install would
    run = run_harness(_job(tmp_path / "out", Path(sys.executable)))
    assert run.error is not None and "No module named lm_eval" in run.error
    assert run.tasks == [] and run.results_file is None
    gone = run_harness(_job(tmp_path / "out", tmp_path / "no-python"))
    assert gone.error is not None and gone.error.startswith("lm-eval could not start:")


def test_the_page_the_terminal_and_the_row_show_it(fixtures_dir: Path, results: Path) -> None:
    tasks, version = read_results(results)
    settings = Harness(name="lm-eval", tasks=["kit_tiny_qa"], limit=5)
    run = HarnessRun(
        settings=settings,
        tool_version=version,
        model_args={"model": "kit-model"},
        tasks=tasks,
        results_file="lm-eval/kit-model/results.json",
        duration_s=9.5,
        error=None,
    )
    report = build_report(fixtures_dir).model_copy(update={"harness": run})
    assert harness_lines(report) == [
        "  harness (lm-eval 0.4.13):",
        "    kit_tiny_qa: exact_match 0 ± 0 (5 docs)",
    ]
    assert "lm-eval: kit_tiny_qa: exact_match 0 ± 0 (5 docs)" in markdown_row(report)
    html = harness_section(report)
    assert html is not None and "<td>kit_tiny_qa</td>" in html and "5 of 8" in html
    broken = report.model_copy(update={"harness": failed(settings, "lm-eval exited 1: boom")})
    assert harness_lines(broken) == ["  harness (lm-eval): failed: lm-eval exited 1: boom"]
    assert "lm-eval exited 1: boom" in (harness_section(broken) or "")
    assert "harness" not in build_report(fixtures_dir).model_dump(mode="json")  # as before
