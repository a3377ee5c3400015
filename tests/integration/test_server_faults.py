"""Real faults: a server that never starts, and a server of the test's own killed mid-bench."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kit.bench import Bencher, RequestRecord, Watch, model_info
from kit.recipe import LoadedRecipe, Prompt
from kit.serve import RunningServer

pytestmark = pytest.mark.integration


def _payload(path: Path) -> dict:
    envelope = json.loads(path.read_bytes())
    return json.loads(base64.b64decode(envelope["payload"]))


def test_server_that_never_starts_exits_3_with_log_tail(repo_root: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kit.cli",
            "reproduce",
            str(repo_root / "recipes" / "cpu-tiny.yaml"),
            "--set",
            "server.extra_args=[--no-such-flag]",
            "--no-sign",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KIT_DEBUG": "0"},
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "error: the server exited with code" in proc.stderr
    assert "server log (last lines):" in proc.stderr
    assert "--no-such-flag" in proc.stderr  # vLLM's own complaint, from the log tail
    assert "Traceback" not in proc.stderr.split("server log (last lines):")[0]
    reports = list(tmp_path.glob("cpu-tiny-*/report.json"))
    assert len(reports) == 1  # the partial report is kept
    data = _payload(reports[0])
    assert data["status"] == "incomplete"
    assert data["incomplete_reason"].startswith("the server exited with code")
    assert data["validity"]["valid"] is False


def test_server_killed_mid_bench_keeps_runs(
    cpu_recipe: LoadedRecipe, own_server: RunningServer
) -> None:
    bench = cpu_recipe.recipe.bench.model_copy(
        update={
            "warmups": 0,
            "runs": 4,
            "prefill": None,
            "prompts": [Prompt(name="narrative", text="Write an essay.", max_tokens=32)],
        }
    )
    measured: list[RequestRecord] = []

    def kill_after_two(rec: RequestRecord) -> None:
        measured.append(rec)
        if len(measured) == 2 and own_server.process is not None:
            os.killpg(own_server.process.pid, signal.SIGKILL)
            own_server.process.wait(timeout=30)

    name, max_len = model_info(own_server.url)
    result = Bencher(
        own_server.url,
        bench,
        name,
        max_model_len=max_len,
        watch=Watch(alive=own_server.exit_reason, on_request=kill_after_two),
    ).run()
    assert result.complete is False
    assert result.incomplete_reason is not None
    assert "narrative measured #2" in result.incomplete_reason
    assert "server exited with code" in result.incomplete_reason
    ok = [r for r in result.records if r.error is None]
    assert len(ok) == 2 and all(r.completion_tokens == 32 for r in ok)
    assert result.prompts[0].measured == 3 and result.prompts[0].usable == 2
