"""Preflight's three states: ok, problem, and not checked (with why). A size kit could not learn
is never ok; the table ends with the hints of the items not checked, one a line, and how many
were not made; they fail nothing. Each check runs once a run, on a shape derived once.

The seed runs offline (HF_HUB_OFFLINE, an empty KIT_HOME) and against the local hub stand-in
(tests/hubserver.py) through the real huggingface_hub client; a rig of 2 x 24 GiB is assumed.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hubserver import Hub, serving_hub

import kit.preflight
from kit.cli import main
from kit.errors import BadInputError
from kit.paths import display_path
from kit.preflight import assumed_rig, table
from kit.recipe import load_recipe
from kit.runtimes import Native

SEED = "recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml"
RIG = ["--rig", "2x24"]
OFFLINE_CONFIG = "config.json is not in kit's cache, and HF_HUB_OFFLINE is set"
CALIBRATION_HINT = (
    "hint: a calibration set kit pins by its content: quantization.calibration with source: "
    "file (a text file beside the recipe) or source: inline"
)
# a small decoder: a model and a one-layer draft that fit the rig, on the hub stand-in
CONFIG = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "vocab_size": 32000,
}


def sets(pins: list[str]) -> list[str]:
    return [a for pin in pins for a in ("--set", pin)]


def kit_preflight(*args: str) -> Result:
    return CliRunner().invoke(main, ["preflight", *args])


@pytest.fixture
def nothing_known(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    """No hub, and nothing in kit's cache."""
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kit"))


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    """The hub stand-in holding a model and a draft, and an empty KIT_HOME."""
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kit"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    repos = {}
    for repo, layers in (("kit-test/big", 8), ("kit-test/big-draft", 1)):
        root = tmp_path / "hub-files" / repo
        root.mkdir(parents=True)
        (root / "config.json").write_text(json.dumps({**CONFIG, "num_hidden_layers": layers}))
        (root / "model.safetensors").write_bytes(b"\0" * 1024 * 1024)
        repos[repo] = root
    with serving_hub(repos) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


def test_the_seed_offline_says_what_it_did_not_check(
    fixtures_dir: Path, seed_pins: list[str], nothing_known: None
) -> None:
    seed = fixtures_dir / SEED
    res = kit_preflight(str(seed), *sets(seed_pins), *RIG)
    assert res.exit_code == 0, res.output  # items not checked fail nothing
    assert res.stderr == ""
    lines = res.stdout.splitlines()
    cells = [re.split(r"  +", line, maxsplit=2) for line in lines[:-3]]
    states = {name: state for state, name, _ in cells}
    assert states == {
        # a 40-hex revision proves nothing: neither kit's cache nor the hub could say
        "pin model": "not checked",
        "pin speculative.draft": "not checked",
        # loaded by name: kit cannot pin it, so it never says ok
        "pin calibration": "not checked",
        "engine python": "ok",  # the package index (tests/unit/conftest.py) answered
        "output": "ok",
        "shm": "ok",
        "gpus": "ok",
        # the model alone is about 54 GB: a size kit did not learn is never ok
        "gpu memory": "not checked",
        "autoround memory": "not checked",
        "disk": "not checked",
    }, res.stdout
    rows = {name: detail for state, name, detail in cells if state == "not checked"}
    assert rows["pin model"] == (
        f"Qwen/Qwen3.8-27B@{'a' * 40}: not in kit's hub cache, and HF_HUB_OFFLINE is set"
    )
    assert rows["gpu memory"] == (
        f"not estimated: model Qwen/Qwen3.8-27B: {OFFLINE_CONFIG}; draft "
        f"incoai/Qwen3.8-27B-DFlash2: {OFFLINE_CONFIG}"
    )
    assert rows["autoround memory"] == f"not estimated: model Qwen/Qwen3.8-27B: {OFFLINE_CONFIG}"
    assert re.fullmatch(
        r"\d+\.\d GiB free for \S+; not sized: model Qwen/Qwen3\.8-27B \(HF_HUB_OFFLINE is set\), "
        r"draft incoai/Qwen3\.8-27B-DFlash2 \(HF_HUB_OFFLINE is set\), the quantized checkpoint "
        r"\(the model's shape is not known\)",
        rows["disk"],
    )
    # the hint, once for the five, the calibration's, then the count: the last line
    assert lines[-3:] == [
        f"hint: unset HF_HUB_OFFLINE and run kit preflight {display_path(seed)} again: it reads "
        "config.json and the file sizes from the hub (a few KB, no weights)",
        CALIBRATION_HINT,
        "6 checks not made (pin model, pin speculative.draft, pin calibration, gpu memory, "
        "autoround memory, disk): they do not fail preflight; the run may still fail on them",
    ]


def test_unpinned_the_hints_name_kit_lock_one_a_line(
    fixtures_dir: Path, nothing_known: None
) -> None:
    seed = fixtures_dir / SEED
    lock = (
        f"kit lock {display_path(seed)} pins the hub revisions the recipe leaves open (or kit "
        f"reproduce {display_path(seed)} --resolve; make: ARGS=--resolve)"
    )
    res = kit_preflight(str(seed), *RIG)
    assert res.exit_code == 2, res.output
    # the problems' hints on stderr, each line one hint, the shared one once
    hints = [line.removeprefix("hint: ") for line in res.stderr.splitlines()]
    hints = hints[hints.index(lock) :]
    assert hints == [
        lock,
        "or pin the commit you reproduce: --set model.revision=<40-hex sha> (make: SET=...)",
        "or pin the commit you reproduce: --set speculative.draft.revision=<40-hex sha> "
        "(make: SET=...)",
    ]
    # the items not checked for want of the pins: the same command, once
    assert res.stdout.splitlines()[-3:] == [
        CALIBRATION_HINT,
        f"hint: {lock}, and preflight then sizes them from the hub",
        "4 checks not made (pin calibration, gpu memory, autoround memory, disk): they do not "
        "fail preflight; the run may still fail on them",
    ]
    with pytest.raises(BadInputError) as info:
        Native().preflight(load_recipe(seed), rig=assumed_rig("2x24"))
    assert info.value.hint is not None and info.value.hint.splitlines()[0] == lock


def test_the_lock_hint_runs_and_then_every_item_is_checked(
    fixtures_dir: Path, tmp_path: Path, hub: Hub
) -> None:
    text = (fixtures_dir / SEED).read_text()
    text = text.replace("repo_id: Qwen/Qwen3.8-27B\n", "repo_id: kit-test/big\n")
    text = text.replace("repo_id: incoai/Qwen3.8-27B-DFlash2\n", "repo_id: kit-test/big-draft\n")
    recipe = tmp_path / "seed.yaml"
    recipe.write_text(text)
    before = kit_preflight(str(recipe), *RIG)
    assert before.exit_code == 2, before.output
    assert before.stdout.splitlines()[-1].startswith("4 checks not made")
    assert f"hint: kit lock {display_path(recipe)} pins" in before.stdout
    locked = CliRunner().invoke(main, ["lock", str(recipe), "--no-image"])  # as the hint says
    assert locked.exit_code == 0, locked.output
    after = kit_preflight(str(recipe), *RIG)
    assert after.exit_code == 0, after.output
    *rows, hint, count = after.stdout.splitlines()
    # every item the hub answers for is checked; the calibration set, which kit cannot pin,
    # is the one not checked
    states = [(row.split("  ")[0], re.split(r"  +", row)[1]) for row in rows]
    assert [name for state, name in states if state != "ok"] == ["pin calibration"], after.stdout
    assert len(rows) == 10
    assert re.split(r"  +", rows[0], maxsplit=2)[2] == (
        f"kit-test/big@{hub.sha['kit-test/big']}: the hub has it"
    )
    assert (hint, count) == (
        CALIBRATION_HINT,
        "1 check not made (pin calibration): it does not fail preflight; the run may still "
        "fail on it",
    )
    assert "about" in rows[-1] and "not sized" not in rows[-1]  # the disk, sized


def test_a_made_up_revision_is_a_problem_where_the_hub_answers(
    fixtures_dir: Path, tmp_path: Path, hub: Hub
) -> None:
    text = (fixtures_dir / SEED).read_text()
    text = text.replace("repo_id: Qwen/Qwen3.8-27B\n", "repo_id: kit-test/big\n")
    text = text.replace("repo_id: incoai/Qwen3.8-27B-DFlash2\n", "repo_id: kit-test/big-draft\n")
    recipe = tmp_path / "seed.yaml"
    recipe.write_text(text)
    made_up = "c" * 40
    draft = f"speculative.draft.revision={hub.sha['kit-test/big-draft']}"
    res = kit_preflight(str(recipe), *sets([f"model.revision={made_up}", draft]), *RIG)
    assert res.exit_code == 2, res.output
    assert (
        f"error:   pin model: model.revision: kit-test/big@{made_up}: the hub has no such "
        "repository or revision: RepositoryNotFoundError"
    ) in res.stderr.splitlines()
    assert (
        f"hint: check the repo_id and the revision in {display_path(recipe)} (kit lock "
        f"{display_path(recipe)} pins the current commit of an open one; a private or gated "
        "repository needs HF_TOKEN)"
    ) in res.stderr.splitlines()
    (draft_row,) = [r for r in res.stdout.splitlines() if "pin speculative.draft" in r]
    assert draft_row.startswith("ok ") and draft_row.endswith(": the hub has it")


def test_a_recipe_checked_in_full_ends_with_its_last_item(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kit"))
    monkeypatch.delenv("KIT_ENGINE_PYTHON", raising=False)
    res = kit_preflight(str(fixtures_dir / "recipes" / "cpu-tiny.yaml"))
    assert res.exit_code == 0, res.output  # this machine runs cpu-tiny
    lines = res.stdout.splitlines()
    assert [line.split()[1] for line in lines] == [
        "engine", "output", "shm", "cpu-isa", "int4-path", "memory", "disk"
    ]  # fmt: skip
    assert lines[-1].startswith("ok  disk  ")


def test_a_cpu_recipe_of_a_hub_model_offline_does_not_size_memory_or_disk(
    fixtures_dir: Path, tmp_path: Path, nothing_known: None
) -> None:
    recipe = tmp_path / "hub-tiny.yaml"
    (tmp_path / "cpu-tiny.yaml").write_text(
        (fixtures_dir / "recipes" / "cpu-tiny.yaml").read_text()
    )
    recipe.write_text(
        "extends: cpu-tiny.yaml\nname: hub-tiny\n"
        f"model: {{source: hub, repo_id: kit-test/tiny, revision: '{'c' * 40}'}}\n"
        "speculative: {method: none, draft: null}\n"
    )
    items = {c.name: c for c in Native().checks(load_recipe(recipe))}
    for name in ("memory", "disk"):
        assert items[name].state == "not checked", table(list(items.values()))
        assert items[name].detail.endswith(f"not sized: model kit-test/tiny: {OFFLINE_CONFIG}")
        assert items[name].hint.startswith("unset HF_HUB_OFFLINE")


def counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Count the calls of ``module.name`` (still calling it)."""
    calls: list[int] = []
    real: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_kit_preflight_runs_each_check_once_on_a_shape_derived_once(
    fixtures_dir: Path,
    cached_models: Path,
    seed_pins: list[str],
    offline: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = [
        "pin_checks",
        "engine_python_check",
        "shm_check",
        "gpu_checks",
        "autoround_checks",
        "gpu_disk_check",
        "model_shapes",
    ]
    calls = {name: counted(monkeypatch, kit.preflight, name) for name in names}
    configs = counted(monkeypatch, kit.preflight.hub, "config")
    res = kit_preflight(str(fixtures_dir / SEED), *sets(seed_pins), *RIG)
    assert res.exit_code == 0, res.output
    assert {name: len(c) for name, c in calls.items()} == dict.fromkeys(names, 1)
    assert len(configs) == 2  # the model's config.json and the draft's, read once each
    # and with a problem (the table, then the error): still once
    res = kit_preflight(str(fixtures_dir / SEED), *sets(seed_pins), "--rig", "2x8")
    assert res.exit_code == 3, res.output
    assert {name: len(c) for name, c in calls.items()} == dict.fromkeys(names, 2)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def test_the_reproduce_preflight_says_what_it_did_not_check(
    fixtures_dir: Path, seed_pins: list[str], nothing_known: None
) -> None:
    records = Records()
    logger = logging.getLogger("kit.preflight")
    logger.addHandler(records)
    try:
        items = Native().preflight(
            load_recipe(fixtures_dir / SEED, seed_pins), rig=assumed_rig("2x24")
        )
    finally:
        logger.removeHandler(records)
    skipped = [
        "pin model",
        "pin speculative.draft",
        "pin calibration",
        "gpu memory",
        "autoround memory",
        "disk",
    ]
    assert [c.name for c in items if c.state == "not checked"] == skipped
    warnings = [line for line in records.lines if line.startswith("WARNING")]
    assert [w.split(":")[:3] for w in warnings[:6]] == [
        ["WARNING preflight", " not checked", f" {name}"] for name in skipped
    ]
    assert warnings[6].startswith("WARNING preflight: hint: unset HF_HUB_OFFLINE")
    assert warnings[7] == f"WARNING preflight: {CALIBRATION_HINT}"
    assert warnings[8] == (
        f"WARNING preflight: 6 checks not made ({', '.join(skipped)}): they do not fail "
        "preflight; the run may still fail on them"
    )
    assert len(warnings) == 9
