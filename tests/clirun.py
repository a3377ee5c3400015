"""What many tests share: ``kit`` run in this process, and the small bench of a run whose
subject is not the bench's own size."""

from __future__ import annotations

import shlex

from click.testing import CliRunner, Result

from kit.cli import main


def kit(*args: object, code: int | None = None) -> Result:
    """``kit ARGS`` through click's runner: no traceback and no exception but SystemExit may
    escape; it must exit ``code`` when one is given (None: the caller looks)."""
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    assert res.exc_info is None or res.exc_info[0] is SystemExit, res.exc_info
    assert code is None or res.exit_code == code, f"kit {shlex.join(map(str, args))}:\n{res.output}"
    return res


def small(*, warmups: int = 1, runs: int = 2, max_tokens: int = 32) -> list[str]:
    """The ``--set`` overrides of cpu-tiny's short bench: both prompts at ``max_tokens``, no
    prefill probe, and none of the probes after the bench (test_quality and test_claims have
    them)."""
    return [
        f"bench.warmups={warmups}",
        f"bench.runs={runs}",
        f"bench.prompts.0.max_tokens={max_tokens}",
        f"bench.prompts.1.max_tokens={max_tokens}",
        "bench.prefill=null",
        "bench.quality=null",
        "bench.context=null",
        "bench.soak=null",
    ]
